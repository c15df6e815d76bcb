"""Will AMD device code built for one target load on a device? The HIP runtime's rules.

- same processor; a feature built as "any" (no suffix) loads in either mode, a feature
  built ``+`` or ``-`` loads only when the device runs in that mode;
- a generic target (``gfx11-generic``) loads on each processor the table maps to it,
  from ROCm 6.4 on.

Rules only: both targets are AMD's (the vendor-neutral ``gpu/compat.py`` checks that first).
"""

from __future__ import annotations

from rocm_build_backend.gpu.targets import GpuTarget


def why_not(code: GpuTarget, device: GpuTarget, *, generic_ok: bool = True) -> str | None:
    """None when AMD code built for ``code`` loads on ``device``; else the reason it does not."""
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
