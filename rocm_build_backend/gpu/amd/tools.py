"""Parse the one-target-per-line tools (``rocm_agent_enumerator``, ``amdgpu-arch``,
``offload-arch``) and recorded ``rocm-smi --showproductname`` output (JSON or CSV).

Must not run the programs: ``programs.py`` does.
"""

from __future__ import annotations

import csv
import io
import json
import re

from rocm_build_backend.gpu.amd.devices import FEATURE, GENERIC, kind_of, product_processor, target_id, unknown_warning
from rocm_build_backend.gpu.amd.names import kfd_to_processor
from rocm_build_backend.gpu.amd.output import clean_lines, error_code, first_line
from rocm_build_backend.gpu.device import MAX_DEVICES, Device, ProbeResult, counted
from rocm_build_backend.gpu.targets import GpuTarget, table

_TARGET_WORD = re.compile(r"gfx[0-9a-z-]+(?::\S*)?", re.I)


def _records(text: str) -> list[list[str]]:
    """The words of each line that starts with a target ID, split again at every later target
    ID on that line (a list pasted with its line breaks lost: ``gfx000 gfx942 gfx942``)."""
    out: list[list[str]] = []
    for line in clean_lines(text):
        words = line.split()
        if not words or not _TARGET_WORD.fullmatch(words[0]):
            out.append(words)
            continue
        for word in words:
            if _TARGET_WORD.fullmatch(word) or not out or not out[-1]:
                out.append([word])
            else:
                out[-1].append(word)
        out.append([])  # the line's end closes its last record
    return out


def _line_devices(text: str, probe: str) -> tuple[list[Device], list[str], int]:
    """One device per line whose first word is a target ID; later words may carry
    features (``gfx906 sramecc- xnack-``) or a PCI ID (``1002:66AF``)."""
    devices: list[Device] = []
    placeholders = 0
    for words in _records(text):
        if not words:
            continue
        if len(devices) > MAX_DEVICES:
            break
        first = re.sub(r"-strict$", "", words[0].lower())
        if re.fullmatch(r"gfx0+", first):
            placeholders += 1
            continue
        if GENERIC.fullmatch(first.split(":")[0]):
            continue
        feats = "".join(f":{w.lower()}" for w in words[1:] if FEATURE.fullmatch(w.lower()))
        target = target_id(first + feats)
        if target is None:
            continue
        pci = next((w for w in words[1:] if re.fullmatch(r"1002:[0-9a-fA-F]{4}", w)), "")
        kind, evidence = kind_of(target.processor)
        devices.append(
            Device(
                target=target,
                physical=None,
                name="",
                kind=kind,
                included=True,
                reason="",
                source=probe,
                node=len(devices),
                device_id=f"0x{pci[5:].lower()}" if pci else "",
                evidence=evidence,
            )
        )
    return devices, unknown_warning(probe, devices), placeholders


def _line_result(text: str, probe: str) -> ProbeResult:
    devices, warnings, placeholders = _line_devices(text, probe)
    if len(devices) > MAX_DEVICES:
        return ProbeResult(
            probe, [], f"lists more than {MAX_DEVICES} GPUs, more than any machine has; output ignored", "tool_failed"
        )
    if devices:
        summary = counted(devices)
        if placeholders:
            summary += f" (and {placeholders} gfx000 placeholder line{'s' if placeholders > 1 else ''}, ignored)"
        return ProbeResult(probe, devices, summary, None, warnings)
    if placeholders:
        return ProbeResult(probe, [], "only the gfx000 placeholder: no GPU", None, warnings)
    if text.strip():
        error = error_code(text) or "tool_failed"
        return ProbeResult(probe, [], repr(first_line(text)), error, warnings)
    return ProbeResult(probe, [], "no GPU listed", None, warnings)


def parse_enumerator(text: str) -> ProbeResult:
    """Parse ``rocm_agent_enumerator`` (with or without the old leading ``gfx000``, or ``-name``)."""
    return _line_result(text, "rocm_agent_enumerator")


def parse_amdgpu_arch(text: str) -> ProbeResult:
    """Parse ``amdgpu-arch`` / ``offload-arch`` output (also the old ``offload-arch -v`` lines)."""
    return _line_result(text, "amdgpu-arch")


def smi_gfx(value: str) -> str | None:
    """rocm-smi's ``GFX Version``: ``gfx942`` as is, and its decimal ``gfx9010`` read as gfx90a."""
    value = value.strip().lower()
    if value in table():
        return value
    m = re.fullmatch(r"gfx([0-9]+)([0-9])([0-9][0-9])", value)
    if m:
        processor = kfd_to_processor(int(m.group(1)) * 10000 + int(m.group(2)) * 100 + int(m.group(3)))
        if processor in table():
            return processor
    return None


def parse_rocm_smi(text: str) -> ProbeResult:
    """Parse ``rocm-smi --showproductname`` as ``--json`` or ``--csv``.

    The JSON ``GFX Version`` is trusted (decoded properly); a card name alone (CSV from older
    rocm-smi) is matched against the table's product names and reported as low confidence.
    """
    cards: list[dict[str, str]] = []
    try:
        data = json.loads(text)
        if isinstance(data, dict):
            cards = [v for k, v in data.items() if k.startswith("card") and isinstance(v, dict)]
    except ValueError:
        try:
            rows = list(csv.DictReader(io.StringIO(text.strip(), newline="")))
        except csv.Error:
            rows = []
        cards = [r for r in rows if isinstance(r.get("device"), str) and r["device"].startswith("card")]
    if len(cards) > MAX_DEVICES:
        return ProbeResult(
            "rocm-smi",
            [],
            f"lists more than {MAX_DEVICES} cards, more than any machine has; output ignored",
            "tool_failed",
        )
    devices: list[Device] = []
    warnings: list[str] = []
    for index, card in enumerate(cards):
        fields = {k.lower(): v for k, v in card.items() if isinstance(k, str) and isinstance(v, str)}
        processor = smi_gfx(fields.get("gfx version", ""))
        series = fields.get("card series", "")
        if processor is None:
            processor = product_processor(series)
            if processor is None:
                warnings.append(f"rocm-smi: card{index} '{series}' matches no known product; skipped")
                continue
            warnings.append(f"rocm-smi: card{index} '{series}' read as {processor} by its name (low confidence)")
        kind, evidence = kind_of(processor)
        model = fields.get("card model", "")
        devices.append(
            Device(
                target=GpuTarget(processor),
                physical=None,
                name=series,
                kind=kind,
                included=True,
                reason="",
                source="rocm-smi",
                node=index,
                device_id=model.lower() if fields.get("gfx version") and model.startswith("0x") else "",
                evidence=evidence,
            )
        )
    if devices:
        return ProbeResult("rocm-smi", devices, counted(devices), None, warnings)
    if text.strip() and not cards:
        return ProbeResult("rocm-smi", [], repr(first_line(text)), "tool_failed", warnings)
    return ProbeResult("rocm-smi", [], "no GPU listed", None, warnings)
