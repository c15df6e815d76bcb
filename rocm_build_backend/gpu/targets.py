"""GPU targets as data: parse target IDs, validate them against the shipped table.

A target ID is a processor plus optional features, written the way LLVM writes it:
``gfx942``, ``gfx90a:xnack-``, ``gfx90a:sramecc+:xnack-``, ``gfx11-generic``. NVIDIA
compute capabilities (``sm_90``, ``sm_90a``, ``compute_90``) use the same model; their
rows live in the same table (``data/gpu_targets.json``, made by ``tools/gen_targets.py``).
A new GPU is a new row in that file, not new code.

Vendor-neutral: which vendor a name belongs to, how it parses and sorts, is asked of the
vendor registry (``gpu/vendor.py``); this module must not spell any vendor's grammar.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from rocm_build_backend.errors import UnknownTargetError
from rocm_build_backend.gpu.products import product_targets
from rocm_build_backend.gpu.target import GpuTarget
from rocm_build_backend.gpu.table import table
from rocm_build_backend.gpu.vendor import claimant, rank, vendor_of, vendors

__all__ = [
    "GpuTarget",
    "vendor_name",
    "target_info",
    "table",
    "suggest",
    "meant",
    "parse_target",
    "parse_targets",
    "split_targets",
    "sort_targets",
    "join_targets",
]


_SPLIT = re.compile(r"[;,\s]+")


def vendor_name(t: GpuTarget) -> str:
    """The name of the vendor whose target ``t`` is (``"amd"``, ``"nvidia"``)."""
    return vendor_of(t.processor).name


def target_info(t: GpuTarget) -> dict[str, Any]:
    """The table row for ``t``'s processor (``{}`` for one the table does not list)."""
    return table().get(vendor_of(t.processor).table_key(t.processor), {})


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


def _parse_one(text: str, where: str = "") -> GpuTarget | str:
    """A GpuTarget, or a problem description (the vendor that claims the name parses it);
    ``where`` (" in --targets") follows the name."""
    found = claimant(text.split(":")[0])
    got = found.parse(text) if found is not None else None
    if got is None:
        return _unknown(text, where)
    return got + where if isinstance(got, str) else got


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
    (flags, environment, stamps, local version labels). A product name or a compute capability
    (``H100``, ``9.0``, ``Radeon RX 7900 XTX``) is refused too, its hint naming the target to give.
    """
    problems, bad, found = [], [], set()
    for text in split_targets(value):
        got = _parse_one(text.lower(), where)
        if isinstance(got, str):
            problems.append(got)
            bad.append(text)
        else:
            found.add(got)
    if problems:
        whole = " ".join(bad)
        if len(bad) > 1 and not found and meant(whole):  # "Radeon RX 7900 XTX": one product, split at spaces
            problems, bad = [f"unknown GPU target '{whole.lower()}'{where}"], [whole]
        raise UnknownTargetError("; ".join(problems), hint=_hint(bad))
    return sort_targets(found)


def meant(text: str) -> list[str]:
    """The targets a name that is not a target stands for: a product in the table's ``products``
    column (``MI300X``), or a vendor's other spelling (NVIDIA's compute capability ``9.0``)."""
    out = product_targets(text)
    for vendor in vendors():
        other = getattr(vendor, "meant", None)
        if other is not None:
            out += [t for t in other(text.strip().lower()) if t not in out]
    return out


def _hint(bad: Sequence[str]) -> str:
    said = []
    for text in bad:
        targets = meant(text)
        if targets:
            said.append(
                f"'{text}' is not a target name but {' or '.join(targets)} is: give "
                + ("that" if len(targets) == 1 else "the one for your GPU")
            )
    return (
        "; ".join(said + ["rocm-build-backend targets --all lists every target"])
        if said
        else "see the known targets: rocm-build-backend targets"
    )


def target_sort_key(t: GpuTarget) -> tuple[Any, ...]:
    """Vendors in registry order (AMD by major, minor, stepping with generic targets after
    their family; NVIDIA by compute capability), names no vendor can order last."""
    own = vendor_of(t.processor).sort_key(t.processor)
    if own is None:
        return (len(vendors()), (), str(t))
    return (rank(t.processor), own, str(t))


def sort_targets(targets: Iterable[GpuTarget]) -> list[GpuTarget]:
    return sorted(set(targets), key=target_sort_key)


def join_targets(targets: Iterable[GpuTarget], sep: str = ";") -> str:
    return sep.join(str(t) for t in targets)
