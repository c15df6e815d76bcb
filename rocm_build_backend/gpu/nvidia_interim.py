"""NVIDIA's target names and loader rules, until the sub-package ``gpu/nvidia/`` holds them.


INTERIM: move this module's contents into ``gpu/nvidia/`` (names, loader rules, probes), point
the registry entry in ``gpu/vendor.py`` at the new module, and delete this file. It has no
detection probes yet: ``detect`` reports nothing and runs nothing.

Loader rules: a cubin ``sm_XY`` loads on the same major version with minor >= Y; ``sm_XYa``
only on sm_XY itself; ``sm_XYf`` on the same family (same major, minor >= Y); PTX
``compute_XY`` is compiled at load time for any device >= XY.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

from rocm_build_backend.gpu.targets import GpuTarget, table
from rocm_build_backend.gpu.vendor import RecordedOutput

if TYPE_CHECKING:
    from rocm_build_backend.gpu.device import Probing, VendorDetection


_NV = re.compile(r"(sm|compute)_([0-9]+)([af]?)")


class _Nvidia:
    name = "nvidia"
    label = "NVIDIA"
    recorded_outputs: tuple[RecordedOutput, ...] = ()

    def owns(self, processor: str) -> bool:
        return _NV.fullmatch(processor) is not None

    def parse(self, text: str) -> GpuTarget | str | None:
        processor, *features = text.split(":")
        nv = _NV.fullmatch(processor)
        if nv is None or f"sm_{nv.group(2)}" not in table() or features:
            return None
        return GpuTarget(processor)

    def table_key(self, processor: str) -> str:
        nv = _NV.fullmatch(processor)
        return f"sm_{nv.group(2)}" if nv else processor

    def sort_key(self, processor: str) -> tuple[object, ...] | None:
        nv = _NV.fullmatch(processor)
        if nv is None:
            return None
        return (int(nv.group(2)), nv.group(1) == "compute", nv.group(3), 0)

    def why_not(self, code: GpuTarget, device: GpuTarget, *, generic_ok: bool = True) -> str | None:
        c, d = _NV.fullmatch(code.processor), _NV.fullmatch(device.processor)
        if c is None or d is None:
            return f"{code} or {device} is not an NVIDIA target"
        cv, dv = int(c.group(2)), int(d.group(2))
        if c.group(1) == "compute":
            return None if dv >= cv else f"PTX {code.processor} needs a device of {cv} or newer"
        if c.group(3) == "a":
            return None if dv == cv else f"{code.processor} loads only on sm_{cv}"
        if cv // 10 != dv // 10 or dv < cv:
            return f"{code.processor} loads on sm_{cv // 10}x devices from sm_{cv} on"
        return None

    def detect(self, probing: Probing) -> VendorDetection:
        from rocm_build_backend.gpu.device import VendorDetection

        return VendorDetection(self.name)

    def hints(self, causes: Sequence[str]) -> list[str]:
        return []


NVIDIA = _Nvidia()
