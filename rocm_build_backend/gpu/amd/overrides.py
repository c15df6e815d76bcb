"""``HSA_OVERRIDE_GFX_VERSION`` (and its per-node form) applied the way the ROCm runtime does.

The build list is what the runtime loads; the physical target is kept beside it, and a value
the runtime rejects or one that crosses GPU generations is a warning. Must not probe.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Mapping, Sequence

from rocm_build_backend.gpu.amd.names import kfd_to_processor
from rocm_build_backend.gpu.device import Device
from rocm_build_backend.gpu.targets import GpuTarget


OVERRIDE = "HSA_OVERRIDE_GFX_VERSION"


def parse_override(value: str) -> str | None:
    """``"10.3.0"`` -> ``gfx1030``; None for a value the runtime rejects (empty, garbage)."""
    m = re.fullmatch(r"\s*([0-9]+)\.([0-9]+)\.([0-9]+)\s*", value)
    if not m:
        return None
    major, minor, step = (int(g) for g in m.groups())
    if not 0 < major <= 63 or minor > 15 or step > 15:
        return None
    return kfd_to_processor(major * 10000 + minor * 100 + step)


def _override_for(node: int | None, env: Mapping[str, str]) -> tuple[str, str] | None:
    """(variable, value) of the override the runtime applies to this KFD node, if any."""
    if node is not None and f"{OVERRIDE}_{node}" in env:
        return f"{OVERRIDE}_{node}", env[f"{OVERRIDE}_{node}"]
    if OVERRIDE in env:
        return OVERRIDE, env[OVERRIDE]
    return None


def _major(processor: str) -> str:
    digits = processor[3:]
    return digits[:-2] if len(digits) >= 3 else digits


def apply_override(dev: Device, env: Mapping[str, str], warnings: list[str]) -> Device:
    got = _override_for(dev.node, env)
    if got is None:
        return dev
    var, value = got
    where = f"node {dev.node}" if dev.node is not None else dev.processor
    effective = parse_override(value)
    if not value.strip():
        warnings.append(
            f"{var} is set but empty: the ROCm runtime then fails to start ({where}); "
            f"unset it. Building for the physical GPU {dev.processor}"
        )
        return dev
    if effective is None:
        warnings.append(
            f"{var}={value!r} is not major.minor.stepping (e.g. 10.3.0): the ROCm runtime "
            f"rejects it ({where}); building for the physical GPU {dev.processor}"
        )
        return dev
    if effective == dev.processor:
        return dev
    if _major(effective) != _major(dev.processor):
        warnings.append(
            f"{var}={value} turns {dev.processor} ({where}) into {effective}, another GPU "
            f"generation: that can hang or crash the GPU driver"
        )
    else:
        warnings.append(f"{var}={value}: the runtime loads {effective} code on {dev.processor} ({where})")
    return replace(dev, target=GpuTarget(effective), physical=dev.target)


def stray_overrides(env: Mapping[str, str], gpu_nodes: Sequence[int]) -> list[str]:
    out = []
    for key in sorted(env):
        m = re.fullmatch(rf"{OVERRIDE}_([0-9]+)", key)
        if m and int(m.group(1)) not in gpu_nodes:
            nodes = ", ".join(str(n) for n in gpu_nodes) or "none"
            out.append(f"{key} names no GPU: the number is a KFD node (GPU nodes here: {nodes})")
    return out
