"""AMD as a GPU vendor: the object the vendor registry (``gpu/vendor.py``) finds.

It ties AMD's target names (``names.py``), loader rules (``loader.py``), probes
(``detection.py``) and hints (``causes.py``) to the vendor interface. Must stay cheap to
import: the probes are imported only when detection runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from rocm_build_backend.gpu.amd import loader, names
from rocm_build_backend.gpu.targets import GpuTarget
from rocm_build_backend.gpu.vendor import RecordedOutput

if TYPE_CHECKING:
    from rocm_build_backend.gpu.device import Probing, VendorDetection


class _Amd:
    name = "amd"
    label = "AMD"
    example = "ROCM_BUILD_BACKEND_TARGETS=gfx942"
    # a HIP bundle without code for the device stops the program at its first use
    # ("hipErrorNoBinaryForGpu: Unable to find code object for all current devices"), and AMD's
    # libraries keep their per-GPU code in separate files, not in bundles of one library
    per_module_loading = False
    recorded_outputs = (
        RecordedOutput("rocminfo", "--rocminfo-output", "use this recorded rocminfo output"),
        RecordedOutput(
            "rocm_agent_enumerator", "--enumerator-output", "use this recorded rocm_agent_enumerator output"
        ),
        RecordedOutput(
            "amd-smi",
            "--amd-smi-output",
            "use this recorded 'amd-smi static' (text or --json) or 'amd-smi list' output",
        ),
        RecordedOutput("amdgpu-arch", "--amdgpu-arch-output", "use this recorded amdgpu-arch/offload-arch output"),
        RecordedOutput("rocm-smi", "--rocm-smi-output", "use this recorded 'rocm-smi --showproductname' output"),
    )

    def owns(self, processor: str) -> bool:
        return names.owns(processor)

    def parse(self, text: str) -> GpuTarget | str | None:
        return names.parse(text)

    def table_key(self, processor: str) -> str:
        return processor

    def sort_key(self, processor: str) -> tuple[object, ...] | None:
        return names.sort_key(processor)

    def why_not(self, code: GpuTarget, device: GpuTarget, *, generic_ok: bool = True) -> str | None:
        return loader.why_not(code, device, generic_ok=generic_ok)

    def detect(self, probing: Probing) -> VendorDetection:
        from rocm_build_backend.gpu.amd.detection import detect_amd

        return detect_amd(probing)

    def hints(self, causes: Sequence[str]) -> list[str]:
        from rocm_build_backend.gpu.amd.causes import hints

        return hints(causes)


AMD = _Amd()
