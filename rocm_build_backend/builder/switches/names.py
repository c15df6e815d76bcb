"""Which names are GPU switches, and of what kind: the one place that judges a name.

``role(name)`` sorts an environment variable or CMake option by its name alone: ``targets``
(``*ARCH*``, ``*GENCODE*``, ``GPU_TARGETS``), ``jobs`` (``MAX_JOBS``, ``NVCC_THREADS``,
``*_NUM_BUILD_JOBS``), ``prebuilt`` (``*FORCE_BUILD``: build instead of downloading a wheel),
``gpu-off`` (``*SKIP*CUDA*``, ``FORCE_ONLY_CPU``, ``*_NO_CUDA``), ``flags`` (``NVCC_FLAGS``),
``gpu-on`` (a name whose object is the GPU backend: ``FORCE_CUDA``, ``WITH_CUDA``,
``BUILD_CUDA_EXT``, ``BUILD_TARGET``, ``VLLM_TARGET_DEVICE``, ``DS_BUILD_OPS``), or None: not a GPU switch (toolkit locations such as ``CUDA_HOME``, versions, ABI
and debug switches, run-time device selection, features of a backend such as
``ENABLE_HIP_FMHA_RTN_BF16_CONVERT``). ``option_role`` is stricter for CMake options,
which projects have by the dozen: only a backend's main switch (``GGML_CUDA``, ``USE_ROCM``), not
its sub-features (``GGML_CUDA_F16``). ``vendor(name)`` tells a name that is one vendor's alone
(each vendor's ``BuildVendor.switches`` knows its own words); ``vendor_switches()`` lists the
vendors that know any.
"""

from __future__ import annotations

import re

from rocm_build_backend.gpu.build import Switches
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.gpu.vendor import vendor_names

# Patterns, compiled (and kept by ``re``) when a name is judged: not on every build's import.
_NOT = (
    r"(^|_)(HOME|PATH|ROOT|DIR|DIRS|VERSION|VISIBLE_DEVICES|ABI|DEBUG|VERBOSE|LOCAL_VERSION|"
    r"INCLUDE|LIB|LIBRARY|BIN|EXECUTABLE|COMPILER|CC|CXX)($|_)|^NVIDIA_|^CI$|"
    r"(^|_)(NVCC|HIPCC|CUDACXX|HIPCXX|LAUNCHER)$"
)
_GPU = (
    r"CUDA|HIP|ROCM|(^|_)GPU|NVCC|CUBLAS|AMDGPU|TARGET_DEVICE|COMPUTE_BACKEND|"
    r"(^|_)BUILD_TARGET$|(^|_)BUILD_OPS$"
)
# a switch turns a GPU backend on when that backend is what it names, not a feature of it:
# FORCE_CUDA, WITH_ROCM, BUILD_CUDA_EXT, CT_CUBLAS, DS_BUILD_OPS; not ENABLE_HIP_FMHA_RTN_BF16_CONVERT
_ON_NAME = (
    r"(^|_)(CUDA|HIP|ROCM|GPU|CUBLAS|HIPBLAS|NVCC)(_(EXT|EXTS|EXTENSION|EXTENSIONS|BUILD|KERNELS|OPS))?$|"
    r"TARGET_DEVICE$|COMPUTE_BACKEND$|(^|_)BUILD_TARGET$|(^|_)BUILD_OPS$"
)
_TARGETS = r"ARCH|GENCODE|(^|_)(GPU|AMDGPU)_TARGETS?$|CUDAARCHS|HCC_AMDGPU_TARGET"
_JOBS = r"(^|_)(MAX_JOBS|NUM_BUILD_JOBS|BUILD_JOBS|JOBS|NVCC_THREADS|PARALLEL_LEVEL)$"
_PREBUILT = r"FORCE_BUILD$"
_OFF = r"SKIP|(^|_)NO_(CUDA|HIP|ROCM|GPU)|ONLY_CPU|CPU_ONLY|DISABLE"
_FLAGS = r"(FLAGS|ARGS)($|_)"
#: other accelerators and APIs: a switch for one of them never turns on a CUDA or HIP build
OTHER_DEVICE = r"(^|_)(MLU|NPU|XPU|MPS|MUSA|IPU|DIPU|TPU|SYCL|OPENCL|VULKAN|METAL|ONEAPI|DPCPP|ASCEND)($|_)"
_CPU_ONLY = r"ONLY_CPU|CPU_ONLY"
_MAIN_OPTION = r"(^|_)(CUDA|HIP|ROCM|HIPBLAS|CUBLAS|GPU)$"
_GPU_WORD = r"CUDA|HIP|ROCM|CUBLAS|GPU"


def role(name: str) -> str | None:
    """The role of an environment variable named ``name``, or None when it is no GPU switch."""
    up = name.upper()
    if re.search(_JOBS, up):
        return "jobs"
    if re.search(_TARGETS, up) and not re.search(_NOT, up):
        return "targets"
    if re.search(_PREBUILT, up):
        return "prebuilt"
    if re.search(_CPU_ONLY, up):
        return "gpu-off"
    if re.search(_NOT, up) or not re.search(_GPU, up):
        return None
    if re.search(_OFF, up):
        return "gpu-off"
    if re.search(_FLAGS, up):
        return "flags"
    return "gpu-on" if re.search(_ON_NAME, up) else None


def switch_like(name: str) -> bool:
    """Whether a variable named ``name`` can be a switch at all (not a location, version, compiler
    or job count): what ``role`` says of a name that decides the GPU build by what it gates."""
    up = name.upper()
    return not any(re.search(p, up) for p in (_NOT, _JOBS, _FLAGS, _OFF, OTHER_DEVICE))


def option_role(name: str) -> str | None:
    """The role of a CMake ``option()`` (default OFF) named ``name``: ``gpu-on`` for a backend's
    main switch, ``targets`` for one that names targets, else None."""
    up = name.upper()
    if re.search(_TARGETS, up) and not re.search(_NOT, up):
        return "targets"
    # the backend's own word once, at the end: GGML_CUDA, USE_ROCM; not GGML_CUDA_FORCE_CUBLAS
    return "gpu-on" if re.search(_MAIN_OPTION, up) and len(re.findall(_GPU_WORD, up)) == 1 else None


def vendor_switches() -> list[tuple[str, Switches]]:
    """(vendor name, its ``Switches``) for each registered vendor that has them, in registry order."""
    out = []
    for name in vendor_names():
        found = build_side(name).switches
        if found is not None:
            out.append((name, found))
    return out


def vendor(name: str, switch_role: str | None = None) -> str | None:
    """The vendor a name belongs to alone (its registry name), else None: exactly one vendor's
    words are in it. For a target list or a CMake backend option (``switch_role`` ``targets`` or
    ``gpu-on-cmake``) more words count (``CUDA`` names NVIDIA targets in ``TORCH_CUDA_ARCH_LIST``,
    while the PyTorch world's ``FORCE_CUDA`` builds ROCm code too)."""
    up = name.upper()
    targets = switch_role in ("targets", "gpu-on-cmake")
    owners = [n for n, sw in vendor_switches() if sw.owns_name(up, targets=targets)]
    return owners[0] if len(owners) == 1 else None
