"""Product names as users write them (``H100``, ``MI300X``, ``Radeon RX 7900 XTX``), looked up in
the ``products`` column of the target table, to name the target to type in a hint.

A product is never accepted as a target: a product can span targets and a target many products,
so the user is shown the target and types it. Vendor-neutral: it reads only the table's column.
"""

from __future__ import annotations

import re
from functools import lru_cache

from rocm_build_backend.gpu.table import table

# brand words people add or leave out; "pro" stays ("RTX PRO 6000" is not "Quadro RTX 6000")
_BRANDS = frozenset({"amd", "nvidia", "radeon", "instinct", "geforce", "tesla"})
_PARENS = re.compile(r"\([^)]*\)")


def normal(text: str) -> str:
    """A product name reduced for comparison: lower case, no brand words, no spaces or punctuation."""
    words = re.split(r"[^a-z0-9]+", _PARENS.sub(" ", text.lower()))
    return "".join(w for w in words if w and w not in _BRANDS)


def names(products: str) -> list[str]:
    """The product names of one ``products`` cell: ``"RX 7900 XTX/XT/GRE"`` is three of them,
    ``"RX 6800/6800 XT"`` two (a part that starts with a digit replaces the number and what follows,
    one that starts with a letter the last word)."""
    out = []
    for item in re.split(r"[,;]", _PARENS.sub("", products)):
        parts = [p.strip() for p in item.split("/") if p.strip()]
        if not parts:
            continue
        base = parts[0]
        out.append(base)
        for part in parts[1:]:
            if part[0].isdigit():
                out.append(re.sub(r"[0-9].*$", "", base) + part)
            else:
                out.append((base.rsplit(" ", 1)[0] + " " if " " in base else "") + part)
    return out


@lru_cache(maxsize=1)
def _index() -> dict[str, tuple[str, ...]]:
    found: dict[str, set[str]] = {}
    for target, row in table().items():
        if row.get("kind") == "generic" or not isinstance(row.get("products"), str):
            continue
        for name in names(row["products"]):
            key = normal(name)
            if len(key) >= 2 and key != "tba":
                found.setdefault(key, set()).add(target)
    return {key: tuple(sorted(targets)) for key, targets in found.items()}


def product_targets(text: str) -> list[str]:
    """The targets of the product ``text`` names (``"MI300X"`` -> ``["gfx942"]``); [] for none.
    A name matches whole, or as the end of a listed name when it holds a digit (``7900 XTX``)."""
    key = normal(text)
    if not key:
        return []
    index = _index()
    if key in index:
        return list(index[key])
    if len(key) < 4 or not any(c.isdigit() for c in key):
        return []
    return sorted({t for name, targets in index.items() if name.endswith(key) for t in targets})
