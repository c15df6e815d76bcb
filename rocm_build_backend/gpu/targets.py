"""GPU targets as data: parse target IDs, validate them against the shipped table.

A target ID is a processor plus optional features, written the way LLVM writes it:
``gfx942``, ``gfx90a:xnack-``, ``gfx90a:sramecc+:xnack-``, ``gfx11-generic``. NVIDIA
compute capabilities (``sm_90``, ``sm_90a``, ``compute_90``) use the same model; their
rows live in the same table (``data/gpu_targets.json``, made by ``tools/gen_targets.py``).
A new GPU is a new row in that file, not new code.
"""

from __future__ import annotations

from rocm_build_backend.data import path as data_path

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

from rocm_build_backend.errors import UnknownTargetError

_DATA = data_path("gpu_targets.json")
_FEATURES = ("sramecc", "xnack")  # LLVM's canonical order: alphabetical
_SPLIT = re.compile(r"[;,\s]+")
_AMD = re.compile(r"gfx[0-9a-f]+|gfx[0-9]+(?:-[0-9]+)?-generic")
_NVIDIA = re.compile(r"(sm|compute)_([0-9]+)([af]?)")


@lru_cache(maxsize=None)
def table() -> dict[str, dict]:
    """The target table: name -> facts (vendor, family, kind, xnack, sramecc, generic, kfd)."""
    with open(_DATA, encoding="utf-8") as fh:
        return json.load(fh)


@dataclass(frozen=True, order=True)
class GpuTarget:
    """One GPU target. ``xnack``/``sramecc`` are ``"+"``, ``"-"`` or ``None`` (any)."""

    processor: str
    sramecc: str | None = None
    xnack: str | None = None

    def __str__(self) -> str:
        out = self.processor
        if self.sramecc:
            out += f":sramecc{self.sramecc}"
        if self.xnack:
            out += f":xnack{self.xnack}"
        return out

    @property
    def bare(self) -> GpuTarget:
        """The same processor with every feature set to "any"."""
        return GpuTarget(self.processor)

    @property
    def vendor(self) -> str:
        return "nvidia" if _NVIDIA.fullmatch(self.processor) else "amd"

    @property
    def is_generic(self) -> bool:
        return self.processor.endswith("-generic")

    @property
    def info(self) -> dict:
        """The table row for this processor (``{}`` for one the table does not list)."""
        m = _NVIDIA.fullmatch(self.processor)
        key = f"sm_{m.group(2)}" if m else self.processor
        return table().get(key, {})


def _edit_distance(a: str, b: str) -> int:
    """Damerau-Levenshtein (optimal string alignment): a swap of two neighbours costs 1."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def suggest(name: str, *, limit: int = 3) -> list[str]:
    """The known target names closest to ``name``: swapped digits first (gfx924 -> gfx942)."""
    name = name.lower()
    scored = []
    for known in table():
        dist = _edit_distance(name, known)
        if dist <= 2:
            scored.append((dist, sorted(known) != sorted(name), known))
    return [known for *_, known in sorted(scored)[:limit]]


def _unknown(text: str, where: str) -> str:
    near = suggest(text.split(":")[0])
    msg = f"unknown GPU target '{text}'{where}"
    if near:
        msg += " (did you mean " + " or ".join(f"'{n}'" for n in near) + "?)"
    return msg


def _parse_one(text: str) -> GpuTarget | str:
    """A GpuTarget, or a problem description."""
    processor, *features = text.split(":")
    nv = _NVIDIA.fullmatch(processor)
    if nv:
        if f"sm_{nv.group(2)}" not in table() or features:
            return _unknown(text, "")
        return GpuTarget(processor)
    if not _AMD.fullmatch(processor) or processor not in table():
        return _unknown(text, "")
    row = table()[processor]
    values: dict[str, str] = {}
    for feat in features:
        m = re.fullmatch(r"(sramecc|xnack)([+-])", feat)
        if not m:
            return f"bad feature '{feat}' in GPU target '{text}' (expected xnack+, xnack-, sramecc+ or sramecc-)"
        if m.group(1) in values:
            return f"feature '{m.group(1)}' given twice in GPU target '{text}'"
        if row.get(m.group(1)) is False:
            return f"GPU target '{processor}' has no '{m.group(1)}' feature (in '{text}')"
        values[m.group(1)] = m.group(2)
    return GpuTarget(processor, sramecc=values.get("sramecc"), xnack=values.get("xnack"))


def parse_target(text: str) -> GpuTarget:
    """Parse one target ID; raise UnknownTargetError with suggestions."""
    got = _parse_one(text.strip().lower())
    if isinstance(got, str):
        raise UnknownTargetError(got, hint="see the known targets: rocm-build-backend targets")
    return got


def split_targets(value: str | Iterable[str]) -> list[str]:
    """Split the lists people write: ``"gfx90a;gfx942"``, ``"gfx90a,gfx942"``, spaces, or a list."""
    items = [value] if isinstance(value, str) else list(value)
    return [part for item in items for part in _SPLIT.split(item.strip()) if part]


def parse_targets(value: str | Sequence[str], *, where: str = "") -> list[GpuTarget]:
    """Parse a target list; every bad entry is reported in one UnknownTargetError.

    Duplicates are dropped; the order is the stable sorted order used everywhere
    (flags, environment, stamps, local version labels).
    """
    problems, found = [], set()
    for text in split_targets(value):
        got = _parse_one(text.lower())
        if isinstance(got, str):
            problems.append(got + where)
        else:
            found.add(got)
    if problems:
        raise UnknownTargetError(
            "; ".join(problems), hint="see the known targets: rocm-build-backend targets"
        )
    return sort_targets(found)


def _sort_key(t: GpuTarget) -> tuple:
    """AMD by (major, minor, stepping) with generic targets after their family, then NVIDIA."""
    p = t.processor
    nv = _NVIDIA.fullmatch(p)
    if nv:
        return (1, int(nv.group(2)), nv.group(1) == "compute", nv.group(3), 0, str(t))
    g = re.fullmatch(r"gfx([0-9]+)(?:-([0-9]+))?-generic", p)
    if g:
        return (0, int(g.group(1)), int(g.group(2) or 0), 99, 1, str(t))
    digits = p[3:]
    if len(digits) >= 3 and digits[:-2].isdigit() and all(c in "0123456789abcdef" for c in digits[-2:]):
        return (0, int(digits[:-2]), int(digits[-2], 16), int(digits[-1], 16), 0, str(t))
    return (2, 0, 0, 0, 0, str(t))


def sort_targets(targets: Iterable[GpuTarget]) -> list[GpuTarget]:
    return sorted(set(targets), key=_sort_key)


def join_targets(targets: Iterable[GpuTarget], sep: str = ";") -> str:
    return sep.join(str(t) for t in targets)


def kfd_to_processor(version: int) -> str | None:
    """Decode KFD ``gfx_target_version`` (90010 -> gfx90a, 90402 -> gfx942); None for 0 (CPU)."""
    if version <= 0:
        return None
    major, minor, stepping = version // 10000, (version // 100) % 100, version % 100
    if minor > 15 or stepping > 15:
        return None
    return f"gfx{major}{minor:x}{stepping:x}"
