"""AMD's family indexes: the groups of processors AMD's nightly package indexes serve together.

TheRock's families; the published indexes are gfx94X-dcgpu, gfx950-dcgpu, gfx110X-all, gfx1151
and gfx120X-all. A processor not listed here is a family of its own name, as in TheRock.
``index --family`` and ``split --per family`` use them through ``BuildVendor.index_families``.
Data only.
"""

from __future__ import annotations

FAMILIES: dict[str, tuple[str, ...]] = {
    "gfx90X-dcgpu": ("gfx906", "gfx908", "gfx90a"),
    "gfx94X-dcgpu": ("gfx942",),
    "gfx950-dcgpu": ("gfx950",),
    "gfx101X-dgpu": ("gfx1010", "gfx1011", "gfx1012"),
    "gfx103X-dgpu": ("gfx1030", "gfx1032"),
    "gfx103X-igpu": ("gfx1035", "gfx1036"),
    "gfx110X-all": ("gfx1100", "gfx1101", "gfx1102", "gfx1103"),
    "gfx1150": ("gfx1150",),
    "gfx1151": ("gfx1151",),
    "gfx1152": ("gfx1152",),
    "gfx1153": ("gfx1153",),
    "gfx120X-all": ("gfx1200", "gfx1201"),
}
