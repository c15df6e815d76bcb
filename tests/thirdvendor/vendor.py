"""ACME as a GPU vendor (detection and loading side): targets ``acme1`` .. ``acme9``.

Code loads only on its own processor; detection finds nothing (no such GPU exists).
"""

from __future__ import annotations

import re
from typing import Sequence

from rocm_build_backend.gpu.device import Probing, VendorDetection
from rocm_build_backend.gpu.targets import GpuTarget
from rocm_build_backend.gpu.vendor import RecordedOutput

_NAME = re.compile(r"acme([1-9])")


class _Acme:
    name = "acme"
    label = "ACME"
    example = "ROCM_BUILD_BACKEND_TARGETS=acme1"
    recorded_outputs: tuple[RecordedOutput, ...] = ()
    per_module_loading = False

    def owns(self, processor: str) -> bool:
        return _NAME.fullmatch(processor) is not None

    def parse(self, text: str) -> GpuTarget | str | None:
        processor, *features = text.split(":")
        if not self.owns(processor):
            return None
        return f"ACME target '{text}' takes no ':' features" if features else GpuTarget(processor)

    def table_key(self, processor: str) -> str:
        return processor

    def sort_key(self, processor: str) -> tuple[object, ...] | None:
        m = _NAME.fullmatch(processor)
        return (int(m.group(1)),) if m else None

    def why_not(self, code: GpuTarget, device: GpuTarget, *, generic_ok: bool = True) -> str | None:
        return None if code.processor == device.processor else f"{code} is for {code.processor}"

    def detect(self, probing: Probing) -> VendorDetection:
        return VendorDetection(vendor=self.name)

    def hints(self, causes: Sequence[str]) -> list[str]:
        return []


ACME = _Acme()
