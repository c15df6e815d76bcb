"""Known causes of a failed build, read from its output: what happened, and what to do instead.

Holds a table of patterns seen in real build output (CMake, hipcc, gcc and clang drivers,
setuptools, PyTorch's ``cpp_extension``) and ``diagnose(text)``. Reads nothing but the text it
is given and, for a CUDA-only torch, the installed torch's version from its metadata. Prints
nothing; a cause it does not know is None, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata
from typing import Callable

MAX_TEXT = 1 << 20  # the tail of a build's output that is looked at


@dataclass(frozen=True)
class Cause:
    what: str  # what happened, in one clause
    todo: str  # what to do instead

    def lines(self) -> list[str]:
        return [f"error: the build failed: {self.what}", f"hint: {self.todo}"]


_KILLED = re.compile(
    r"Killed signal terminated program|unable to execute command: Killed|"
    r"failed with exit (?:code|status) (?:-9|137)\b|terminated by signal 9\b|\(signal 9\)|"
    r"signal: killed", re.I)
_HIP_LANG = re.compile(r"hip-lang-config\.cmake|package configuration file provided by\s+\"hip-lang\"")
_TORCH_CUDA = re.compile(r"CUDA_HOME environment variable is not set|No CUDA runtime is found|"
                         r"Torch not compiled with CUDA|torch\.version\.hip is None")
_NVIDIA = re.compile(r"nvcc fatal|HIP_PLATFORM\s*=\s*nvidia|__HIP_PLATFORM_(?:NVIDIA|NVCC)__")


def installed_torch() -> str | None:
    """The version of the torch installed where this build runs, from its metadata (no import)."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def _killed(text: str, torch: Callable[[], str | None]) -> Cause | None:
    if not _KILLED.search(text):
        return None
    return Cause("a compiler was killed (signal 9), most likely by the kernel for lack of memory",
                 "build with fewer parallel jobs: -C rocm-build-backend.max-jobs=2, or raise "
                 "-C rocm-build-backend.memory-per-job=8 (the GiB one compile job may take)")


def _hip_lang(text: str, torch: Callable[[], str | None]) -> Cause | None:
    if not _HIP_LANG.search(text):
        return None
    return Cause("CMake's HIP language cannot find ROCm's hip-lang CMake package (hip-lang-config.cmake)",
                 "install ROCm's HIP development files (hip-dev, or the ROCm SDK), or tell CMake where ROCm "
                 "is: -C cmake.define.CMAKE_HIP_COMPILER_ROCM_ROOT=/opt/rocm (scikit-build-core), or "
                 "CMAKE_ARGS=-DCMAKE_HIP_COMPILER_ROCM_ROOT=/opt/rocm")


def _torch_cuda(text: str, torch: Callable[[], str | None]) -> Cause | None:
    if not _TORCH_CUDA.search(text):
        return None
    version = torch()
    if version is None or "rocm" in version:
        return None
    return Cause(f"the installed torch {version} is not a ROCm build, so PyTorch builds the extension "
                 "for CUDA with nvcc instead of hipcc",
                 "install ROCm's torch for your ROCm version (the ROCm command of PyTorch's install "
                 "selector: pip install torch with PyTorch's rocmX.Y index), then build again")


def _nvidia(text: str, torch: Callable[[], str | None]) -> Cause | None:
    if not _NVIDIA.search(text):
        return None
    return Cause("hipcc ran NVIDIA's nvcc instead of AMD's clang (it picked the NVIDIA platform)",
                 "build with HIP_PLATFORM=amd and ROCm's hipcc first on PATH; a build script that sets "
                 "HIP_PLATFORM=nvidia, or a HIP install made for NVIDIA, makes hipcc pick nvcc")


_CHECKS = (_killed, _hip_lang, _torch_cuda, _nvidia)  # the first that matches wins


def explain(exc: BaseException) -> Cause | None:
    """The known cause of a wrapped backend's exception (its message and the ones it chains)."""
    parts: list[str] = []
    seen: BaseException | None = exc
    for _ in range(8):  # a chain of causes is short; a cycle stops here
        if seen is None:
            break
        parts.append(f"{type(seen).__name__}: {seen}"[:MAX_TEXT // 8])
        seen = seen.__cause__ or seen.__context__
    return diagnose("\n".join(parts))


def diagnose(text: str, *, torch: Callable[[], str | None] = installed_torch) -> Cause | None:
    """The known cause of a failed build whose output ends with ``text``, or None."""
    tail = text[-MAX_TEXT:]
    for check in _CHECKS:
        cause = check(tail, torch)
        if cause is not None:
            return cause
    return None
