"""The variables an AMD (HIP) build reads to pick its GPU code, computed from the targets.

Pure: targets in, names and values out; merging them with the user's environment is
``plan.py``'s work.

- ``PYTORCH_ROCM_ARCH`` (``torch.utils.cpp_extension``, PyTorch's CMake), ``GPU_TARGETS`` and
  ``AMDGPU_TARGETS`` (rocm-cmake, hip-config), ';'-joined target IDs; ``HCC_AMDGPU_TARGET``
  (hipcc without ``--offload-arch``), ','-joined; ``HIP_PLATFORM=amd``;
- ``HIPCC_COMPILE_FLAGS_APPEND``: one ``--offload-arch=`` per target, which hipcc appends to
  every compile;
- CMake: ``CMAKE_HIP_ARCHITECTURES``, ``GPU_TARGETS``, ``AMDGPU_TARGETS`` (through ``CMAKE_ARGS``
  and scikit-build-core's ``cmake.define``), in rocm-cmake's order of precedence.
"""

from __future__ import annotations

import re
from typing import Sequence

from rocm_build_backend.gpu.targets import GpuTarget, join_targets

# CMake variables that name HIP targets, in rocm-cmake's order of precedence.
CMAKE_VARS = ("CMAKE_HIP_ARCHITECTURES", "GPU_TARGETS", "AMDGPU_TARGETS")
ARCH_FLAG = re.compile(r"^--(?:offload-arch|amdgpu-target)=")
CMAKE_DEF = re.compile(r"^-D(" + "|".join(CMAKE_VARS) + r")(?::[A-Z]+)?=")
PLATFORM = "HIP_PLATFORM"


def target_variables(targets: Sequence[GpuTarget]) -> dict[str, str]:
    """The variables that name the targets (and ``HIP_PLATFORM``), in the order they are set."""
    semi, comma = join_targets(targets, ";"), join_targets(targets, ",")
    return {
        "PYTORCH_ROCM_ARCH": semi,
        "GPU_TARGETS": semi,
        "AMDGPU_TARGETS": semi,
        "HCC_AMDGPU_TARGET": comma,
        PLATFORM: "amd",
    }


def offload_flags(targets: Sequence[GpuTarget]) -> list[str]:
    """hipcc's and clang's flags for the targets: ``--offload-arch=gfx90a:xnack-``."""
    return [f"--offload-arch={t}" for t in targets]


def cmake_definitions(targets: Sequence[GpuTarget]) -> dict[str, str]:
    """The CMake cache variables that name the targets."""
    semi = join_targets(targets, ";")
    return {var: semi for var in CMAKE_VARS}
