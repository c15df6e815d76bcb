"""Will device code built for one target load on a device? Vendor-neutral entry points.

Each vendor's loader rules live with the vendor (``gpu/amd/loader.py``, NVIDIA's in its own
module); this module only checks that code and device are of one vendor and asks that vendor.
It must not hold any vendor's rules.
"""

from __future__ import annotations

from rocm_build_backend.gpu.targets import GpuTarget, parse_target, vendor_name
from rocm_build_backend.gpu.vendor import vendor_of


def _as_target(value: GpuTarget | str) -> GpuTarget:
    return value if isinstance(value, GpuTarget) else parse_target(value)


def why_not(code: GpuTarget | str, device: GpuTarget | str, *, generic_ok: bool = True) -> str | None:
    """None when code built for ``code`` loads on ``device``; else the reason it does not."""
    code, device = _as_target(code), _as_target(device)
    if vendor_name(code) != vendor_name(device):
        return f"{code} is {vendor_name(code)} code, the device is {vendor_name(device)}"
    return vendor_of(code.processor).why_not(code, device, generic_ok=generic_ok)


def loads_on(code: GpuTarget | str, device: GpuTarget | str, *, generic_ok: bool = True) -> bool:
    return why_not(code, device, generic_ok=generic_ok) is None
