"""Which of the devices one probe saw does the build compile for?

GPUs hidden by ``ROCR_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES`` are left out the way the
runtime hides them; an integrated GPU is left out when a discrete GPU is visible. Must not probe.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from rocm_build_backend.gpu.device import Device


def _hide(devices: list[Device], var: str, value: str, warnings: list[str]) -> list[Device]:
    """The same devices, those ``var`` hides marked left out. Entries are indices into the
    GPUs still visible (so HIP_VISIBLE_DEVICES counts within ROCR_VISIBLE_DEVICES) or UUIDs;
    as in the runtime, the list ends at the first entry that matches no GPU."""
    visible = [d for d in devices if d.included]
    keep: list[Device] = []
    for entry in (v.strip() for v in value.split(",")):
        pick: Device | None
        if entry.isascii() and entry.isdigit() and int(entry) < len(visible):
            pick = visible[int(entry)]
        else:
            pick = next((d for d in visible if d.uuid and d.uuid.lower() == entry.lower()), None)
        if pick is None:
            warnings.append(f"{var}={value}: entry {entry!r} matches no GPU; it and later entries hide their GPUs")
            break
        if pick not in keep:
            keep.append(pick)
    shown = {id(d) for d in keep}
    return [
        d if (not d.included or id(d) in shown) else replace(d, included=False, reason=f"hidden by {var}={value}")
        for d in devices
    ]


def select(devices: list[Device], source: str, env: Mapping[str, str], warnings: list[str]) -> list[Device]:
    # rocminfo runs inside the runtime, which has already applied ROCR_VISIBLE_DEVICES.
    variables = ["HIP_VISIBLE_DEVICES"] if source == "rocminfo" else ["ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"]
    for var in variables:
        value = env.get(var)
        if value is None:
            continue
        if not value.strip():
            warnings.append(f"{var} is set but empty; ignored")
            continue
        devices = _hide(devices, var, value, warnings)
    has_dgpu = any(d.included and d.kind == "dgpu" for d in devices)
    out = []

    def why(d: Device) -> str:  # the strongest signal; all of them are in ``evidence``
        return d.evidence.split("; ")[0]

    for d in devices:
        if not d.included:
            out.append(d)
        elif d.kind == "dgpu":
            out.append(replace(d, reason="discrete GPU"))
        elif has_dgpu:
            out.append(replace(d, included=False, reason=f"integrated GPU ({why(d)}); a discrete GPU is present"))
        else:
            out.append(replace(d, reason=f"integrated GPU ({why(d)}), the only kind present"))
    return out
