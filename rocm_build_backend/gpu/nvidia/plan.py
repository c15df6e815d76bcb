"""What a build for NVIDIA targets gets: the generic CUDA knobs merged with the user's environment.

``nvidia_build_env(targets, inputs)`` is pure (``gpu.build.BuildInputs`` in, ``gpu.build.Knobs``
out), the NVIDIA counterpart of ``gpu/amd/plan.py``: the generic CUDA knobs
(``knobs.cuda_knobs``) merged with the user's environment (a user's value that names the same
code is kept, another is replaced and reported), ``CMAKE_ARGS`` and scikit-build-core's
``cmake.define``. ``code`` is the code targets after the ``ptx`` choice. Project profiles are
applied by the build layer, not here.
"""

from __future__ import annotations

import shlex
from typing import Sequence

from rocm_build_backend.errors import ConfigError
from rocm_build_backend.gpu.build import BuildInputs, Knobs
from rocm_build_backend.gpu.nvidia.knobs import cuda_knobs
from rocm_build_backend.gpu.nvidia.targets import (
    CudaTarget,
    parse_cmake_architectures,
    parse_torch_arch_list,
)
from rocm_build_backend.gpu.targets import GpuTarget

_CMAKE_DEF = "-DCMAKE_CUDA_ARCHITECTURES"


def _same(var: str, value: str, code: Sequence[CudaTarget]) -> bool:
    try:
        parsed = parse_torch_arch_list(value) if var == "TORCH_CUDA_ARCH_LIST" else parse_cmake_architectures(value)
    except Exception:  # noqa: BLE001 - a value we cannot read is not the same
        return False
    return parsed == list(code)


def _cmake_args(user: str, arches: str) -> tuple[str, bool]:
    """CMAKE_ARGS with our -DCMAKE_CUDA_ARCHITECTURES; whether the user's named other ones."""
    args = shlex.split(user)
    theirs = [a for a in args if a.startswith((_CMAKE_DEF + "=", _CMAKE_DEF + ":"))]
    ours = f"{_CMAKE_DEF}={arches}"
    clash = any(a.split("=", 1)[1] != arches for a in theirs)
    return shlex.join([a for a in args if a not in theirs] + [ours]), clash


def nvidia_build_env(targets: Sequence[GpuTarget | CudaTarget | str], inputs: BuildInputs) -> Knobs:
    """The variables and config settings a CUDA build gets. Pure; raises ConfigError."""
    env = inputs.env
    knobs = cuda_knobs([str(t) for t in targets], inputs.ptx, user_env=dict(env))
    out = Knobs(notes=list(knobs.notes), code=[GpuTarget(str(t)) for t in knobs.code])
    for var in ("TORCH_CUDA_ARCH_LIST", "CUDAARCHS"):
        ours, user = knobs.env[var], env.get(var)
        if user is not None and (user == ours or _same(var, user, knobs.code)):
            out.kept[var] = out.env[var] = user
        else:
            if user is not None:
                out.replaced[var] = (user, ours)
            out.env[var] = ours
    out.env["NVCC_APPEND_FLAGS"] = knobs.env["NVCC_APPEND_FLAGS"]
    if any("NVCC_APPEND_FLAGS" in n for n in knobs.notes):
        out.replaced["NVCC_APPEND_FLAGS"] = (env["NVCC_APPEND_FLAGS"], out.env["NVCC_APPEND_FLAGS"])
    arches = knobs.cmake["CMAKE_CUDA_ARCHITECTURES"]
    out.env["CMAKE_ARGS"], clash = _cmake_args(env.get("CMAKE_ARGS", ""), arches)
    if clash:
        out.replaced["CMAKE_ARGS"] = (env["CMAKE_ARGS"], out.env["CMAKE_ARGS"])
    out.config_settings = dict(inputs.config_settings)
    if inputs.backend_kind == "scikit-build-core":
        key = "cmake.define.CMAKE_CUDA_ARCHITECTURES"
        given = out.config_settings.get(key, out.config_settings.get("skbuild." + key))
        if given is not None and not _same("CMAKE_CUDA_ARCHITECTURES", str(given), knobs.code):
            raise ConfigError(
                [f"-C {key}={given} conflicts with the targets {arches}"],
                hint="drop the -C cmake.define setting, or set the same targets",
            )
        out.config_settings.setdefault(key, arches)
    return out
