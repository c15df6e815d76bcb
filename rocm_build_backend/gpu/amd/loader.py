"""Will AMD device code built for one target load on a device? The HIP runtime's rules.

- same processor; a feature built as "any" (no suffix) loads in either mode, a feature
  built ``+`` or ``-`` loads only when the device runs in that mode;
- a generic target (``gfx11-generic``) loads on each processor the table maps to it,
  from ROCm 6.4 on.

``covers`` says whether one kernel module's code serves a requested target (the audit's
``verify``): a bare request stands for the processor in each xnack/sramecc mode it has.

Rules only: both targets are AMD's (the vendor-neutral ``gpu/compat.py`` checks that first).
"""

from __future__ import annotations

from typing import Sequence

from rocm_build_backend.gpu.targets import GpuTarget, target_info


def why_not(code: GpuTarget, device: GpuTarget, *, generic_ok: bool = True) -> str | None:
    """None when AMD code built for ``code`` loads on ``device``; else the reason it does not."""
    if code.is_generic and code.processor != device.processor:
        if target_info(device).get("generic") != code.processor:
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


def configurations(request: GpuTarget) -> list[GpuTarget]:
    """The device configurations a requested target stands for: a bare ``gfx90a`` stands for
    the processor in each xnack/sramecc mode it has; ``gfx90a:xnack-`` for that mode only."""
    row = target_info(request)

    def modes(value: str | None, feature: str) -> list[str | None]:
        if value:
            return [value]
        return ["+", "-"] if row.get(feature, True) else [None]

    return [
        GpuTarget(request.processor, sramecc=s, xnack=x)
        for s in modes(request.sramecc, "sramecc")
        for x in modes(request.xnack, "xnack")
    ]


def _loads(code: GpuTarget, device: GpuTarget, generic_ok: bool) -> str | None:
    """None when ``code`` loads on the device configuration ``device``; else why not."""
    if code.processor == device.processor:
        for feat in ("sramecc", "xnack"):
            built, mode = getattr(code, feat), getattr(device, feat)
            if built and mode and built != mode:
                return f"{code} code does not load on {device.processor} running {feat}{mode}"
            if built and not mode:
                return f"{code} code does not load on {device.processor} running {feat}{'-' if built == '+' else '+'}"
        return None
    return why_not(code, device, generic_ok=generic_ok)


def covers(codes: Sequence[GpuTarget], request: GpuTarget, *, generic_ok: bool = True) -> str | None:
    """None when one kernel module's AMD code (``codes``) loads on every configuration the
    request stands for (``gfx90a`` code, or ``gfx90a:xnack+`` and ``gfx90a:xnack-`` together,
    meet ``gfx90a``; generic code meets a processor it covers unless ``generic_ok`` is False)."""
    for device in configurations(request):
        why = [_loads(c, device, generic_ok) for c in codes]
        if all(w is not None for w in why):
            # say why only when the module has code for this processor (a feature mode) or
            # generic code for it; "gfx908 is not gfx942" helps nobody
            same = [w for c, w in zip(codes, why) if c.processor == request.processor]
            generic = [w for w in why if w and "ROCm 6.4" in w]
            return (same or generic or [f"no code for {device}"])[0]
    return None
