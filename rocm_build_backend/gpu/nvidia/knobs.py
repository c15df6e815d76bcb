"""The variables a CUDA build reads to pick its GPU code, computed from the code targets.

``cuda_knobs(targets, ptx)`` is pure: code targets (``sm_90``, ``sm_90a``, ``compute_90``) and
the ``ptx`` choice in, variables out:

- ``TORCH_CUDA_ARCH_LIST`` (``torch.utils.cpp_extension`` and PyTorch's CMake): ``9.0``, ``9.0a``,
  ``9.0+PTX``; a PTX-only target can only be written ``X.Y+PTX``, which adds ``sm_XY`` too, and
  PyTorch 2.11 refuses family targets, so ``sm_100f`` is written ``10.0`` there (sm_100 code
  loads on the same devices) while ``NVCC_APPEND_FLAGS`` still asks nvcc for ``sm_100f``;
- ``CMAKE_CUDA_ARCHITECTURES`` (for ``CMAKE_ARGS`` and scikit-build-core's ``cmake.define``) and
  ``CUDAARCHS`` (CMake 3.20+, first configure only): ``90-real`` (SASS), ``90-virtual`` (PTX),
  ``90`` (both);
- ``NVCC_APPEND_FLAGS``: one ``-gencode`` per code target, appended by nvcc (CUDA 11.5+) to
  every command line, so builds that pass their own flags still emit our targets.

``ptx`` is ``"none"`` (the default: only the listed targets, so the wheel holds exactly the code
its stamp names and a newer GPU is refused rather than JIT-compiled), ``"highest"`` (PTX for the
highest SASS target too, ``a`` dropped, so a newer GPU can run it), or ``"all"`` (PTX for each).
"""

from __future__ import annotations

import shlex
from typing import NamedTuple, Sequence

from rocm_build_backend.errors import ConfigError
from rocm_build_backend.gpu.build import PTX_CHOICES
from rocm_build_backend.gpu.nvidia.targets import CudaTarget, parse_cuda_target, sort_cuda

__all__ = [
    "PTX_CHOICES",
    "CudaKnobs",
    "with_ptx",
    "torch_arch_list",
    "cmake_architectures",
    "gencode_flags",
    "cuda_knobs",
]


class CudaKnobs(NamedTuple):
    """``env``: variables for the build; ``cmake``: CMake definitions; ``code``: what nvcc emits."""

    env: dict[str, str]
    cmake: dict[str, str]
    code: list[CudaTarget]
    notes: list[str]


def with_ptx(targets: Sequence[CudaTarget | str], ptx: str = "none") -> list[CudaTarget]:
    """The code targets after the ``ptx`` choice is applied."""
    if ptx not in PTX_CHOICES:
        raise ConfigError(
            [f"ptx = {ptx!r}: expected " + ", ".join(repr(c) for c in PTX_CHOICES)],
            hint='ptx = "none" builds only the listed targets',
        )
    code = [t if isinstance(t, CudaTarget) else parse_cuda_target(t) for t in targets]
    if not code:
        raise ConfigError(["no NVIDIA code target to build for"], hint="give targets, e.g. sm_90")
    sass = [t for t in code if not t.ptx]
    if ptx == "highest" and sass:
        top = max(sass, key=lambda t: (t.number, t.suffix != "a"))
        code.append(CudaTarget(top.number, "" if top.suffix == "a" else top.suffix, True))
    elif ptx == "all":
        code += [CudaTarget(t.number, "" if t.suffix == "a" else t.suffix, True) for t in sass]
    return sort_cuda(code)


def torch_arch_list(code: Sequence[CudaTarget]) -> tuple[str, list[str]]:
    """PyTorch's spelling of ``code``, and notes where it cannot say exactly that."""
    items: list[str] = []
    notes: list[str] = []
    sass = {(t.number, t.suffix) for t in code if not t.ptx}
    ptx = {(t.number, t.suffix) for t in code if t.ptx}
    for number, suffix in sorted(sass | ptx):
        cc = CudaTarget(number, suffix).cc
        if suffix == "f":
            notes.append(
                f"TORCH_CUDA_ARCH_LIST has no family targets (PyTorch 2.11 refuses {cc}): "
                f"{cc[:-1]} stands for it there, and NVCC_APPEND_FLAGS adds the {cc} code"
            )
            items.append(cc[:-1])  # never +PTX: plain PTX would also load on newer majors
            continue
        if (number, suffix) in ptx:
            if (number, suffix) not in sass:
                notes.append(f"TORCH_CUDA_ARCH_LIST cannot ask for PTX alone: {cc}+PTX also builds sm_{number}{suffix}")
            items.append(cc + "+PTX")
        else:
            items.append(cc)
    return ";".join(items), notes


def cmake_architectures(code: Sequence[CudaTarget]) -> str:
    """CMake's spelling: ``80-real;90`` (bare = SASS and PTX)."""
    sass = {(t.number, t.suffix) for t in code if not t.ptx}
    ptx = {(t.number, t.suffix) for t in code if t.ptx}
    out = []
    for number, suffix in sorted(sass | ptx):
        name = f"{number}{suffix}"
        both = (number, suffix) in sass and (number, suffix) in ptx
        out.append(name if both else name + ("-real" if (number, suffix) in sass else "-virtual"))
    return ";".join(out)


def gencode_flags(code: Sequence[CudaTarget]) -> list[str]:
    return [t.gencode() for t in sort_cuda(code)]


def cuda_knobs(
    targets: Sequence[CudaTarget | str], ptx: str = "none", user_env: dict[str, str] | None = None
) -> CudaKnobs:
    """Every generic CUDA knob for these targets. ``user_env`` keeps the user's other nvcc flags."""
    code = with_ptx(targets, ptx)
    torch_list, notes = torch_arch_list(code)
    arches = cmake_architectures(code)
    flags = gencode_flags(code)
    user = shlex.split((user_env or {}).get("NVCC_APPEND_FLAGS", ""))
    kept = _without_arch_flags(user)
    if len(kept) != len(user):
        notes.append("NVCC_APPEND_FLAGS: the user's -gencode/-arch flags were replaced by the targets")
    env = {
        "TORCH_CUDA_ARCH_LIST": torch_list,
        "CMAKE_CUDA_ARCHITECTURES": arches,
        "CUDAARCHS": arches,
        "NVCC_APPEND_FLAGS": shlex.join(kept + flags),
    }
    return CudaKnobs(env=env, cmake={"CMAKE_CUDA_ARCHITECTURES": arches}, code=code, notes=notes)


_ARCH_FLAGS = ("-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code", "--gpu-code")


def _without_arch_flags(flags: list[str]) -> list[str]:
    """``flags`` without nvcc's target options (``-gencode X`` and ``-gencode=X`` alike)."""
    out: list[str] = []
    skip = False
    for f in flags:
        if skip:
            skip = False
        elif f in _ARCH_FLAGS:
            skip = True
        elif not f.startswith(tuple(a + "=" for a in _ARCH_FLAGS)):
            out.append(f)
    return out
