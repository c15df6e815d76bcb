"""The AMD detection names at their earlier import path, kept so that existing imports work.

New code imports ``detect``/``require_targets`` and the model from ``rocm_build_backend.gpu.detect``
(vendor-neutral) and the AMD parsers from their modules in this package. Holds no code.
"""

from __future__ import annotations

from rocm_build_backend.gpu.amd.amdsmi import parse_amd_smi
from rocm_build_backend.gpu.amd.detection import PROBES
from rocm_build_backend.gpu.amd.kfd import read_kfd
from rocm_build_backend.gpu.amd.rocminfo import parse_rocminfo
from rocm_build_backend.gpu.amd.tools import parse_amdgpu_arch, parse_enumerator, parse_rocm_smi
from rocm_build_backend.gpu.detect import Detection, Device, ProbeResult, detect, require_targets

__all__ = [
    "Device",
    "Detection",
    "ProbeResult",
    "PROBES",
    "detect",
    "require_targets",
    "parse_rocminfo",
    "parse_enumerator",
    "parse_amdgpu_arch",
    "parse_rocm_smi",
    "parse_amd_smi",
    "read_kfd",
]
