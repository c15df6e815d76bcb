"""NVIDIA as a GPU vendor: the object the vendor registry (``gpu/vendor.py``) finds.

It ties NVIDIA's target names (``targets.py``), the driver's loader rules (``loader.py``) and
detection (``detect.py``: NVML, then ``nvidia-smi``, then ``CUDA_VISIBLE_DEVICES``) to the
vendor interface. Cheap to import: detection is imported only when it runs. Recorded outputs
replay under the probe names ``nvidia-smi`` (``--query-gpu=index,name,compute_cap,uuid
--format=csv,noheader``) and ``nvidia-smi -L``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

from rocm_build_backend.gpu.nvidia import loader
from rocm_build_backend.gpu.nvidia.targets import CUDA_TARGET_NAME, CudaTarget, parse_cuda_target
from rocm_build_backend.gpu.targets import GpuTarget
from rocm_build_backend.gpu.vendor import RecordedOutput

if TYPE_CHECKING:
    from rocm_build_backend.gpu.device import Probing, VendorDetection

_CC = re.compile(r"([0-9]{1,2})\.([0-9])([af]?)(?:\+ptx)?")
_SM = re.compile(r"sm([0-9]{2,3})([af]?)")
_HINTS = {
    "nvidia_not_found": "on an NVIDIA machine, check the driver with nvidia-smi",
    "cuda_visible_devices": "fix CUDA_VISIBLE_DEVICES (GPU indices or UUIDs as nvidia-smi -L prints them)",
}


class _Nvidia:
    name = "nvidia"
    label = "NVIDIA"
    example = "ROCM_BUILD_BACKEND_TARGETS=sm_90 (or TORCH_CUDA_ARCH_LIST=9.0)"
    # CUDA loads modules lazily (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2) and a
    # kernel without an image fails alone, at its launch (error 209); cuBLAS, cuDNN, cuSPARSE
    # and cuSPARSELt ship kernel modules per GPU and pick them by the device (seen on an H200)
    per_module_loading = True
    recorded_outputs: tuple[RecordedOutput, ...] = (
        RecordedOutput(
            "nvidia-smi",
            "--nvidia-smi-output",
            "use this recorded output of `nvidia-smi --query-gpu=index,name,compute_cap,uuid --format=csv,noheader`",
        ),
        RecordedOutput(
            "nvidia-smi -L",
            "--nvidia-smi-list-output",
            "use this recorded `nvidia-smi -L` output (MIG devices for CUDA_VISIBLE_DEVICES)",
        ),
    )

    def owns(self, processor: str) -> bool:
        return CUDA_TARGET_NAME.fullmatch(processor) is not None

    def parse(self, text: str) -> GpuTarget | str | None:
        processor, *features = text.split(":")
        if not self.owns(processor):
            return None
        if features:
            return f"NVIDIA target '{text}' takes no ':' features"
        try:
            return GpuTarget(str(parse_cuda_target(processor)))
        except Exception as exc:  # noqa: BLE001 - UnknownTargetError: an unknown number suggests names
            message = getattr(exc, "message", str(exc))
            return None if "unknown NVIDIA compute capability" in message else message

    def meant(self, text: str) -> list[str]:
        """The target a compute capability stands for: ``9.0`` (PyTorch's, nvidia-smi's spelling),
        ``9.0a``, ``sm90`` -> ``sm_90``, ``sm_90a``; [] for anything else."""
        m = _CC.fullmatch(text) or _SM.fullmatch(text)
        if m is None:
            return []
        name = f"sm_{m.group(1)}{m.group(2) or ''}{m.group(3)}" if m.re is _CC else f"sm_{m.group(1)}{m.group(2)}"
        return [name] if isinstance(self.parse(name), GpuTarget) else []

    def table_key(self, processor: str) -> str:
        m = CUDA_TARGET_NAME.fullmatch(processor)
        return f"sm_{m.group(2)}" if m else processor

    def sort_key(self, processor: str) -> tuple[object, ...] | None:
        m = CUDA_TARGET_NAME.fullmatch(processor)
        if m is None:
            return None
        return (int(m.group(2)), m.group(1) == "compute", "_af".index(m.group(3) or "_"), 0)

    def why_not(self, code: GpuTarget, device: GpuTarget, *, generic_ok: bool = True) -> str | None:
        dev = parse_cuda_target(device.processor)
        if dev.ptx:
            return f"{device} is PTX, not a device; a device is sm_XY"
        return loader.why_not(code.processor, CudaTarget(dev.number))

    def detect(self, probing: Probing) -> VendorDetection:
        from rocm_build_backend.gpu.nvidia.probe import detect_vendor

        return detect_vendor(probing)

    def hints(self, causes: Sequence[str]) -> list[str]:
        return [_HINTS[c] for c in causes if c in _HINTS]


NVIDIA = _Nvidia()
