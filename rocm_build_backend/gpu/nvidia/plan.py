"""What a build for NVIDIA targets gets: the vendor choice and the NVIDIA half of the plan.

Pure functions for ``builder/plan.py`` to call (it owns the plan; this module owns the CUDA
facts), mirroring what the plan does for AMD:

- ``choose_vendor(setting, requested, detected)``: ``vendor = "auto" | "amd" | "nvidia"``.
  ``auto``: the vendor of the requested targets; else the only vendor among the detected GPUs;
  else an error naming what was found. A build targets one vendor.
- ``nvidia_build_env(...)``: the generic CUDA knobs (``knobs.cuda_knobs``) merged with the
  user's environment (a user's value that names the same code is kept, another is replaced and
  reported), ``CMAKE_ARGS`` and scikit-build-core's ``cmake.define``, and the project's profile
  (``data/profiles_nvidia.json``), which may opt out of ``NVCC_APPEND_FLAGS``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from rocm_build_backend.errors import ConfigError, NoGpuDetectedError
from rocm_build_backend.gpu.nvidia.knobs import cuda_knobs
from rocm_build_backend.gpu.nvidia.profiles import nvidia_profile_for
from rocm_build_backend.gpu.nvidia.targets import (
    CudaTarget,
    parse_cmake_architectures,
    parse_cuda_target,
    parse_torch_arch_list,
)

VENDORS = ("auto", "amd", "nvidia")
_CMAKE_DEF = "-DCMAKE_CUDA_ARCHITECTURES"


def choose_vendor(setting: str, requested: Sequence[Any], detected: Sequence[Any]) -> str:
    """The one vendor a build is for. ``requested``/``detected`` hold targets with ``.vendor``
    (``GpuTarget``); ``requested`` is empty for ``targets = "auto"``."""
    if setting not in VENDORS:
        raise ConfigError([f"vendor = {setting!r}: expected 'auto', 'amd' or 'nvidia'"],
                          hint="vendor = \"auto\" takes the vendor of the targets")
    asked: list[str] = sorted({str(t.vendor) for t in requested})
    if len(asked) > 1:
        raise ConfigError([f"the targets name GPUs of {' and '.join(asked)}: a build targets one vendor"],
                          hint="build once per vendor, each with its own targets")
    if setting != "auto":
        if asked and asked[0] != setting:
            raise ConfigError([f"vendor = {setting!r} but the targets are {asked[0]} targets"],
                              hint="drop the vendor setting, or give targets of that vendor")
        return setting
    if asked:
        return asked[0]
    found: list[str] = sorted({str(t.vendor) for t in detected})
    if len(found) == 1:
        return found[0]
    if not found:
        raise NoGpuDetectedError("no GPU found to pick a vendor from",
                                 hint="set targets, e.g. targets = [\"sm_90\"] or [\"gfx942\"]")
    seen = ", ".join(sorted({f"{t.vendor}: {t}" for t in detected}))
    raise ConfigError([f"this machine has GPUs of more than one vendor ({seen})"],
                      hint="set vendor = \"amd\" or \"nvidia\", or give the targets")


@dataclass(frozen=True)
class NvidiaBuildEnv:
    env: dict[str, str]
    kept: dict[str, str]
    replaced: dict[str, tuple[str, str]]
    config_settings: dict[str, Any]
    code: list[CudaTarget]
    profile: str | None = None
    notes: list[str] = field(default_factory=list)


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


def nvidia_build_env(
    targets: Sequence[CudaTarget | str],
    ptx: str,
    env: Mapping[str, str],
    *,
    backend_kind: str,
    config_settings: Mapping[str, Any] | None = None,
    dist_name: str | None = None,
    profile: str = "auto",
) -> NvidiaBuildEnv:
    """The variables and config settings a CUDA build gets. Pure; raises ConfigError."""
    code = [t if isinstance(t, CudaTarget) else parse_cuda_target(t) for t in targets]
    knobs = cuda_knobs(code, ptx, user_env=dict(env))
    out: dict[str, str] = {}
    kept: dict[str, str] = {}
    replaced: dict[str, tuple[str, str]] = {}
    for var in ("TORCH_CUDA_ARCH_LIST", "CUDAARCHS"):
        ours, user = knobs.env[var], env.get(var)
        if user is not None and (user == ours or _same(var, user, knobs.code)):
            kept[var] = out[var] = user
        else:
            if user is not None:
                replaced[var] = (user, ours)
            out[var] = ours
    out["NVCC_APPEND_FLAGS"] = knobs.env["NVCC_APPEND_FLAGS"]
    if any("NVCC_APPEND_FLAGS" in n for n in knobs.notes):
        replaced["NVCC_APPEND_FLAGS"] = (env["NVCC_APPEND_FLAGS"], out["NVCC_APPEND_FLAGS"])
    arches = knobs.cmake["CMAKE_CUDA_ARCHITECTURES"]
    out["CMAKE_ARGS"], clash = _cmake_args(env.get("CMAKE_ARGS", ""), arches)
    if clash:
        replaced["CMAKE_ARGS"] = (env["CMAKE_ARGS"], out["CMAKE_ARGS"])
    forwarded = dict(config_settings or {})
    if backend_kind == "scikit-build-core":
        key = "cmake.define.CMAKE_CUDA_ARCHITECTURES"
        given = forwarded.get(key, forwarded.get("skbuild." + key))
        if given is not None and not _same("CMAKE_CUDA_ARCHITECTURES", str(given), knobs.code):
            raise ConfigError([f"-C {key}={given} conflicts with the targets {arches}"],
                              hint="drop the -C cmake.define setting, or set the same targets")
        forwarded.setdefault(key, arches)
    notes = list(knobs.notes)
    wanted = dist_name if profile == "auto" else profile
    found = _apply_profile(wanted, knobs.code, env, backend_kind, out, replaced, forwarded, notes)
    return NvidiaBuildEnv(env=out, kept=kept, replaced=replaced, config_settings=forwarded, code=knobs.code,
                          profile=found, notes=notes)


def _apply_profile(wanted: str | None, code: list[CudaTarget], env: Mapping[str, str], backend_kind: str,
                   out: dict[str, str], replaced: dict[str, tuple[str, str]], forwarded: dict[str, Any],
                   notes: list[str]) -> str | None:
    """Add the project's own knobs (in place); the profile's name, or None without one."""
    found = nvidia_profile_for(wanted) if wanted and wanted != "none" else None
    if found is None:
        return None
    for var, value in found.env(code).items():
        if var in env and env[var] != value:
            replaced[var] = (env[var], value)
        out[var] = value
    defines = found.cmake_defines(code)
    if backend_kind == "scikit-build-core":
        for var, value in defines.items():
            forwarded.setdefault(f"cmake.define.{var}", value)
    elif defines:
        out["CMAKE_ARGS"] = shlex.join(shlex.split(out["CMAKE_ARGS"]) + [f"-D{k}={v}" for k, v in defines.items()])
    if not found.nvcc_append_flags:
        del out["NVCC_APPEND_FLAGS"]
        notes.append(f"NVCC_APPEND_FLAGS not set: the {found.title} profile builds files for narrower target lists")
    return found.name
