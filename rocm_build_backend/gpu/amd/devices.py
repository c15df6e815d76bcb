"""What AMD's target table says about a device a probe saw: its target ID, its kind, its product.

Shared by every AMD probe: turning ``gfx90a:sramecc+:xnack-`` into a target, deciding dGPU or
APU from every signal a probe has, matching a marketing name to a processor. Must not read
files or run programs.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

from rocm_build_backend.gpu.device import Device, plural
from rocm_build_backend.gpu.targets import GpuTarget, table


TINY_CUS = 4  # no discrete AMD GPU has this few compute units; 2-CU iGPUs are common


_TARGET = re.compile(r"(gfx[0-9a-f]+)((?::(?:sramecc|xnack)[+-])*)")


GENERIC = re.compile(r"gfx[0-9]+(?:-[0-9]+)?-generic")


FEATURE = re.compile(r"(sramecc|xnack)([+-])")


def target_id(text: str) -> GpuTarget | None:
    """A GpuTarget from ``gfx90a:sramecc+:xnack-`` (features the table rules out are dropped)."""
    m = _TARGET.fullmatch(text.strip().lower())
    if not m or m.group(1) == "gfx000":
        return None
    processor = m.group(1)
    row = table().get(processor, {})
    feats = {}
    for name, sign in FEATURE.findall(m.group(2)):
        if row.get(name) is not False:
            feats[name] = sign
    return GpuTarget(processor, sramecc=feats.get("sramecc"), xnack=feats.get("xnack"))


def _table_kind(processor: str) -> str | None:
    return table().get(processor, {}).get("kind")


def unknown_warning(probe: str, devices: Sequence[Device]) -> list[str]:
    unknown = sorted({d.processor for d in devices if d.processor not in table()})
    return [f"{probe}: {p} is not in the target table; the toolchain may not know it" for p in unknown]


@lru_cache(maxsize=None)
def _products() -> tuple[tuple[re.Pattern[str], str], ...]:
    """(pattern, processor) for every product name in the table, '/'-lists expanded:
    ``RX 7900 XTX/XT/GRE`` -> ``RX 7900 XTX``, ``RX 7900 XT``, ``RX 7900 GRE``."""
    out = []
    for processor, row in table().items():
        if row.get("kind") not in ("dgpu", "apu") or not processor.startswith("gfx"):
            continue
        text = re.sub(r"\([^)]*\)", "", row.get("products") or "")
        for item in text.split(","):
            parts = [p.strip() for p in item.split("/")]
            if not parts[0]:
                continue
            prefix = parts[0].rsplit(" ", 1)[0] + " " if " " in parts[0] else ""
            for i, part in enumerate(parts):
                name = part if i == 0 or part.startswith(prefix) else prefix + part
                if len(name) >= 4 and re.search(r"\d", name):
                    out.append((re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.I), processor))
    return tuple(out)


def product_processor(name: str) -> str | None:
    """The one processor whose product list names this marketing name, else None."""
    if not name:
        return None
    found = {processor for pattern, processor in _products() if pattern.search(name)}
    return found.pop() if len(found) == 1 else None


def kind_of(
    processor: str, *, cus: int | None = None, apu_memory: bool = False, cpu_name: bool = False, extra: str = ""
) -> tuple[str, str]:
    """("dgpu" | "apu", evidence) from every signal a probe has."""
    signals = []
    if apu_memory:
        signals.append("Memory Properties: APU")
    if _table_kind(processor) == "apu":
        signals.append(f"{processor} is an APU")
    if cus is not None and 0 < cus <= TINY_CUS:
        signals.append(plural(cus, "compute unit"))
    if cpu_name:
        signals.append("marketing name is the CPU's")
    if extra:
        signals.append(extra)
    return ("apu", "; ".join(signals)) if signals else ("dgpu", "")
