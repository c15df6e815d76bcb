"""Parse ``amd-smi`` output (the tool that replaces rocm-smi from ROCm 6): ``amd-smi static``
(``--asic`` or all sections) as text or ``--json``, and ``amd-smi list``.

``static`` names each GPU's target in ``TARGET_GRAPHICS_VERSION``; ``list`` names GPUs (BDF,
UUID, KFD node) but not their targets, which is reported as such, not guessed. The JSON comes
as a list of GPUs (amd-smi 24.x) or as ``{"gpu_data": [...]}`` (later), possibly after warning
lines. amd-smi reads the driver, so it shows physical GPUs (no HSA override applied). Must
not run the program: ``programs.py`` does.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rocm_build_backend.gpu.amd.devices import kind_of, unknown_warning
from rocm_build_backend.gpu.amd.output import clean_lines, error_code, first_line, plain
from rocm_build_backend.gpu.amd.tools import smi_gfx
from rocm_build_backend.gpu.device import MAX_DEVICES, Device, ProbeResult, counted, plural
from rocm_build_backend.gpu.targets import GpuTarget

PROBE = "amd-smi"
_BLOCK = re.compile(r"([A-Z][A-Z_]*):\s*([0-9]+)\s*")  # "GPU: 0", "AI_NIC: 0", "CPU: 0"
_FIELD = re.compile(r"\s+([A-Z][A-Z0-9_ ]*?):\s*(.*?)\s*")


def _text_gpus(text: str) -> list[dict[str, str]] | None:
    """Each ``GPU: N`` block's fields (the innermost key wins: ``BDF``, ``TARGET_GRAPHICS_VERSION``),
    or None when the text has no such block."""
    gpus: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    for line in clean_lines(text):
        block = _BLOCK.fullmatch(line)
        if block:
            current = {"gpu": block.group(2)} if block.group(1) == "GPU" else None
            if current is not None:
                gpus.append(current)
                if len(gpus) > MAX_DEVICES:
                    break
            continue
        field = _FIELD.fullmatch(line)
        if current is not None and field:
            current.setdefault(field.group(1).strip().lower(), field.group(2))
    return gpus if gpus else None


def _json_payload(text: str) -> Any:
    """The JSON document in the output, skipping warning lines before it; None if there is none."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"^[ \t]*[\[{]", text, re.M):
        try:
            value, _ = decoder.raw_decode(text, match.end() - 1)
        except ValueError:
            continue
        return value
    return None


def _json_gpus(data: Any) -> list[dict[str, str]] | None:
    """The GPUs of ``amd-smi static --json`` / ``amd-smi list --json`` as flat text fields."""
    if isinstance(data, dict) and isinstance(data.get("gpu_data"), list):
        data = data["gpu_data"]
    if not isinstance(data, list) or not all(isinstance(g, dict) and "gpu" in g for g in data):
        return None
    gpus: list[dict[str, str]] = []
    for entry in data[: MAX_DEVICES + 1]:
        flat = {"gpu": str(entry.get("gpu"))}
        for section in (entry, entry.get("asic"), entry.get("bus")):
            if isinstance(section, dict):
                for key, value in section.items():
                    if isinstance(value, (str, int)) and not isinstance(value, bool):
                        flat.setdefault(str(key).lower(), str(value))
        gpus.append(flat)
    return gpus


def _device(index: int, fields: dict[str, str], warnings: list[str]) -> Device | None:
    value = fields.get("target_graphics_version", "")
    processor = smi_gfx(value)
    if processor is None:
        warnings.append(f"amd-smi: GPU {fields.get('gpu', index)} has target {value!r}, not a known one; skipped")
        return None
    cus = int(fields["num_compute_units"]) if fields.get("num_compute_units", "").isdigit() else None
    kind, evidence = kind_of(processor, cus=cus)
    device_id = fields.get("device_id", "").lower()
    node = fields.get("node_id", "") or fields.get("gpu", "")  # the KFD node where known, else amd-smi's index
    return Device(
        target=GpuTarget(processor),
        physical=None,
        name=fields.get("market_name", "") if fields.get("market_name") != "N/A" else "",
        kind=kind,
        included=True,
        reason="",
        source=PROBE,
        node=int(node) if node.isascii() and node.isdigit() else index,
        device_id=device_id if re.fullmatch(r"0x[0-9a-f]{1,8}", device_id) else "",
        compute_units=cus,
        evidence=evidence,
    )


def parse_amd_smi(text: str) -> ProbeResult:
    """Parse ``amd-smi static`` / ``amd-smi list`` output, text or ``--json``."""
    text = plain(text)
    gpus = _json_gpus(_json_payload(text)) if "{" in text or "[" in text else None
    if gpus is None:
        gpus = _text_gpus(text)
    if gpus is None:
        error = error_code(text) or ("tool_failed" if text.strip() else None)
        return ProbeResult(PROBE, [], repr(first_line(text)) if text.strip() else "no GPU listed", error)
    if len(gpus) > MAX_DEVICES:
        return ProbeResult(
            PROBE, [], f"lists more than {MAX_DEVICES} GPUs, more than any machine has; output ignored", "tool_failed"
        )
    if not any("target_graphics_version" in g for g in gpus):
        return ProbeResult(
            PROBE,
            [],
            f"lists {plural(len(gpus), 'GPU')} but not their targets (amd-smi list); amd-smi static --asic shows them",
            "no_target_info",
        )
    warnings: list[str] = []
    devices = [d for i, g in enumerate(gpus) if (d := _device(i, g, warnings)) is not None]
    warnings += unknown_warning(PROBE, devices)
    summary = counted(devices) if devices else "no GPU with a known target"
    return ProbeResult(PROBE, devices, summary, None, warnings)
