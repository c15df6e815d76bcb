"""Known causes of a failed build, read from its output: what happened, and what to do instead.

Holds a table of patterns seen in real build output (CMake, hipcc, gcc and clang drivers,
setuptools, PyTorch's ``cpp_extension``) and ``diagnose(text)``; ``skipped_for_missing(text)``
finds a build that said it left its GPU code out because a build requirement (torch) could
not be imported. Reads nothing but the text it is given and, for a CUDA-only torch, the
installed torch's version from its metadata. Prints nothing; a cause it does not know is
None, never a guess.
"""

from __future__ import annotations

import re
from importlib import metadata
from typing import Callable, NamedTuple

MAX_TEXT = 1 << 20  # the tail of a build's output that is looked at


class Cause(NamedTuple):
    what: str  # what happened, in one clause
    todo: str  # what to do instead

    def lines(self) -> list[str]:
        return [f"error: the build failed: {self.what}", f"hint: {self.todo}"]


# Patterns, compiled (and kept by ``re``) when a failure is looked at: not on every build's import.
_KILLED = (
    r"(?i)Killed signal terminated program|unable to execute command: Killed|"
    r"failed with exit (?:code|status) (?:-9|137)\b|terminated by signal 9\b|\(signal 9\)|"
    r"signal: killed"
)
_HIP_LANG = r"hip-lang-config\.cmake|package configuration file provided by\s+\"hip-lang\""
_TORCH_CUDA = (
    r"CUDA_HOME environment variable is not set|No CUDA runtime is found|"
    r"Torch not compiled with CUDA|torch\.version\.hip is None"
)
_NVIDIA = r"nvcc fatal|HIP_PLATFORM\s*=\s*nvidia|__HIP_PLATFORM_(?:NVIDIA|NVCC)__"


def installed_torch() -> str | None:
    """The version of the torch installed where this build runs, from its metadata (no import)."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def _killed(text: str, torch: Callable[[], str | None]) -> Cause | None:
    if not re.search(_KILLED, text):
        return None
    return Cause(
        "a compiler was killed (signal 9), most likely by the kernel for lack of memory",
        "build with fewer parallel jobs: -C rocm-build-backend.max-jobs=2, or raise "
        "-C rocm-build-backend.memory-per-job=8 (the GiB one compile job may take)",
    )


def _hip_lang(text: str, torch: Callable[[], str | None]) -> Cause | None:
    if not re.search(_HIP_LANG, text):
        return None
    return Cause(
        "CMake's HIP language cannot find ROCm's hip-lang CMake package (hip-lang-config.cmake)",
        "install ROCm's HIP development files (hip-dev, or the ROCm SDK), or tell CMake where ROCm "
        "is: -C cmake.define.CMAKE_HIP_COMPILER_ROCM_ROOT=/opt/rocm (scikit-build-core), or "
        "CMAKE_ARGS=-DCMAKE_HIP_COMPILER_ROCM_ROOT=/opt/rocm",
    )


def _torch_cuda(text: str, torch: Callable[[], str | None]) -> Cause | None:
    if not re.search(_TORCH_CUDA, text):
        return None
    version = torch()
    if version is None or "rocm" in version:
        return None
    return Cause(
        f"the installed torch {version} is not a ROCm build, so PyTorch builds the extension "
        "for CUDA with nvcc instead of hipcc",
        "install ROCm's torch for your ROCm version (the ROCm command of PyTorch's install "
        "selector: pip install torch with PyTorch's rocmX.Y index), then build again",
    )


def _nvidia(text: str, torch: Callable[[], str | None]) -> Cause | None:
    if not re.search(_NVIDIA, text):
        return None
    return Cause(
        "hipcc ran NVIDIA's nvcc instead of AMD's clang (it picked the NVIDIA platform)",
        "build with HIP_PLATFORM=amd and ROCm's hipcc first on PATH; a build script that sets "
        "HIP_PLATFORM=nvidia, or a HIP install made for NVIDIA, makes hipcc pick nvcc",
    )


_CHECKS = (_killed, _hip_lang, _torch_cuda, _nvidia)  # the first that matches wins

# A build that leaves its GPU code out because a requirement is missing says so in one line:
# "Skip building ext ops due to the absence of torch." (mmcv, mmdet, mmdeploy, mmrotate ...),
# "PyTorch not found, skipping ..." (CMake), "torch not importable ...; building without
# extensions". Both parts must be on one line; each part is a plain alternation (linear time).
_SKIPS = (
    r"(?i)\b(?:skip(?:s|ped|ping)?|without|disabl\w*|omit\w*|not build\w*|won't build|"
    r"will not build|fall(?:s|ing)? back)\b"
)
_MISSING = (
    r"(?i)(?:absence of|No module named|cannot import|could not import|unable to import|failed to import)"
    r"\s+'?\"?(?P<a>[A-Za-z_][\w.-]{0,60})"
    r"|\b(?P<b>[A-Za-z_][\w.-]{0,60})\s+(?:is\s+|was\s+)?(?:not\s+(?:installed|importable)|not\s+found|unavailable|missing)"
)
_NOT_REQUIREMENTS = {
    "gpu",
    "gpus",
    "device",
    "devices",
    "cuda",
    "rocm",
    "hip",
    "nvcc",
    "hipcc",
    "compiler",
    "file",
    "files",
    "ninja",
    "it",
    "this",
    "that",
    "which",
    "module",
    "extension",
    "extensions",
}
_TORCH = {"torch", "pytorch"}
MAX_LINE = 1000  # longer lines are not looked at (a skip message is one short line)


_MISSING_WORDS = ("absence", "module", "import", "not ", "unavailable", "missing")


def _missing_name(line: str) -> str | None:
    low = line.lower()
    if not any(w in low for w in _MISSING_WORDS):
        return None
    for m in re.finditer(_MISSING, line):
        name = (m.group("a") or m.group("b") or "").strip(".-'\"")
        top = name.split(".")[0].lower()
        if top in _TORCH:
            return "torch"
        if top and top not in _NOT_REQUIREMENTS and (m.group("a") or "not found" not in m.group(0).lower()):
            return name.split(".")[0]
    return None


def skipped_for_missing(text: str) -> Cause | None:
    """The build's own line saying it skipped its GPU (extension) code because a build
    requirement could not be imported, as the cause of a wheel without device code; None
    when no line says so. torch is named first when several requirements are."""
    found: tuple[str, str] | None = None
    skips = re.compile(_SKIPS)
    for line in text[-MAX_TEXT:].splitlines():
        if len(line) > MAX_LINE or not skips.search(line):
            continue
        name = _missing_name(line)
        if name is not None and (found is None or (name == "torch" and found[0] != "torch")):
            found = (name, line.strip())
    if found is None:
        return None
    name, line = found
    what = f"the project left its GPU code out because {name} could not be imported during the build (it printed: {line[:200]!r})"
    if name == "torch":
        todo = (
            "install torch (the build for your GPU) in the build environment: pip install torch, then build "
            "with --no-build-isolation (pip, uv) so the build sees it; or list torch in the project's "
            "[build-system] requires"
        )
    else:
        todo = (
            f"install {name} in the build environment, then build with --no-build-isolation (pip, uv) so "
            f"the build sees it; or list {name} in the project's [build-system] requires"
        )
    return Cause(what, todo)


def explain(exc: BaseException) -> Cause | None:
    """The known cause of a wrapped backend's exception (its message and the ones it chains)."""
    parts: list[str] = []
    seen: BaseException | None = exc
    for _ in range(8):  # a chain of causes is short; a cycle stops here
        if seen is None:
            break
        parts.append(f"{type(seen).__name__}: {seen}"[: MAX_TEXT // 8])
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
