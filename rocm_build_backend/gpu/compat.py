"""Will device code built for one target load on a device? The loader's rules, as data.

AMD (the HIP runtime's code object selection):
- same processor; a feature built as "any" (no suffix) loads in either mode, a feature
  built ``+`` or ``-`` loads only when the device runs in that mode;
- a generic target (``gfx11-generic``) loads on each processor the table maps to it,
  from ROCm 6.4 on.
NVIDIA: a cubin ``sm_XY`` loads on the same major version with minor >= Y; ``sm_XYa``
only on sm_XY itself; ``sm_XYf`` on the same family (same major, minor >= Y); PTX
``compute_XY`` is compiled at load time for any device >= XY.
"""

from __future__ import annotations

import re

from rocm_build_backend.gpu.targets import GpuTarget, parse_target

_NV = re.compile(r"(sm|compute)_([0-9]+)([af]?)")


def _as_target(value: GpuTarget | str) -> GpuTarget:
    return value if isinstance(value, GpuTarget) else parse_target(value)


def why_not(code: GpuTarget | str, device: GpuTarget | str, *, generic_ok: bool = True) -> str | None:
    """None when code built for ``code`` loads on ``device``; else the reason it does not."""
    code, device = _as_target(code), _as_target(device)
    if code.vendor != device.vendor:
        return f"{code} is {code.vendor} code, the device is {device.vendor}"
    if code.vendor == "nvidia":
        return _nvidia_why_not(code.processor, device.processor)
    if code.is_generic and code.processor != device.processor:
        if device.info.get("generic") != code.processor:
            return f"{code} does not cover {device.processor}"
        if not generic_ok:
            return f"{code} is a generic target; the HIP runtime loads those from ROCm 6.4 on"
    elif code.processor != device.processor:
        return f"{code} is for {code.processor}, the device is {device.processor}"
    for feat in ("sramecc", "xnack"):
        built, mode = getattr(code, feat), getattr(device, feat)
        if built and mode and built != mode:
            return f"{code} needs {feat}{built}, the device runs {feat}{mode}"
    return None


def loads_on(code: GpuTarget | str, device: GpuTarget | str, *, generic_ok: bool = True) -> bool:
    return why_not(code, device, generic_ok=generic_ok) is None


def _nvidia_why_not(code: str, device: str) -> str | None:
    c, d = _NV.fullmatch(code), _NV.fullmatch(device)
    assert c and d
    cv, dv = int(c.group(2)), int(d.group(2))
    if c.group(1) == "compute":
        return None if dv >= cv else f"PTX {code} needs a device of {cv} or newer"
    if c.group(3) == "a":
        return None if dv == cv else f"{code} loads only on sm_{cv}"
    if cv // 10 != dv // 10 or dv < cv:
        return f"{code} loads on sm_{cv // 10}x devices from sm_{cv} on"
    return None
