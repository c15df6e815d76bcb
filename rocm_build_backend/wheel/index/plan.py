"""Which indexes ``index`` writes, and which devices a wheel must load on to be listed in each.

An index per target (``gfx942``, ``gfx90a_xnack-``), or with ``family=True`` per AMD family as
AMD's nightly indexes group them (``gfx94X-dcgpu``, ``gfx110X-all``, ...): a wheel appears in a
family's index only when it loads on every member, since anyone in the family may install
from it. Without named targets, the targets come from the wheels' own device code.

It reads no wheel and writes nothing: it maps names and records to a plan.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from rocm_build_backend.errors import ConfigError, UnknownTargetError
from rocm_build_backend.gpu.targets import GpuTarget, parse_target, parse_targets, sort_targets, split_targets, table

# AMD's per-family nightly indexes (TheRock's families; the published indexes are gfx94X-dcgpu,
# gfx950-dcgpu, gfx110X-all, gfx1151 and gfx120X-all). A processor not listed here is a family
# of its own name, as in TheRock.
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


def family_of(processor: str) -> str:
    """The AMD family index a processor belongs to (itself when it has none)."""
    for name, members in FAMILIES.items():
        if processor in members:
            return name
    return processor


def _derive_targets(records: Iterable[dict[str, Any]]) -> list[GpuTarget]:
    """The device targets the wheels' code is for, as processors a machine can have."""
    found: set[GpuTarget] = set()
    for rec in records:
        for row in rec.get("files", []):  # [path, targets, complete, problems, (modules, unread)]
            for code in row[2]:
                try:
                    t = parse_target(code)
                except UnknownTargetError:
                    continue
                nv = re.fullmatch(r"(?:sm|compute)_([0-9]+)[af]?", t.processor)
                if nv:
                    found.add(GpuTarget(f"sm_{nv.group(1)}"))
                elif t.is_generic:
                    found.update(GpuTarget(p) for p, row in table().items() if row.get("generic") == t.processor)
                else:
                    found.add(GpuTarget(t.processor))
    return sort_targets(found)


def named_targets(value: str | Sequence[str | GpuTarget]) -> list[str]:
    """The names in a ``--targets`` value (``;``, ``,`` or spaces between them); ConfigError when
    it names none (``";;"``, ``""``), which would otherwise mean "do nothing" and succeed."""
    names = split_targets(value if isinstance(value, str) else [str(v) for v in value])
    if not names:
        raise ConfigError([f"--targets {value!r} names no GPU target"],
                          hint="name one or more, e.g. --targets gfx90a,gfx942")
    return names


def index_plan(
    targets: Sequence[str | GpuTarget] | str | None, family: bool, records: list[dict[str, Any]]
) -> dict[str, list[GpuTarget]]:
    """Index name -> the devices a wheel must load on to be listed there."""
    plan: dict[str, list[GpuTarget]] = {}
    if targets is None:
        chosen = _derive_targets(records)
        if not chosen:
            raise ConfigError(
                ["no GPU targets to index: none of the wheels holds device code"],
                hint="name the indexes to write: --targets gfx90a,gfx942",
            )
    elif family:
        chosen = []
        problems = []
        for name in named_targets(targets):
            if name in FAMILIES:
                plan[name] = [GpuTarget(p) for p in FAMILIES[name]]
                continue
            try:
                chosen.append(parse_target(name))
            except UnknownTargetError as exc:
                problems.append(exc.message)
        if problems:
            raise ConfigError(problems, hint="name AMD targets or families: " + ", ".join(FAMILIES))
    else:
        given = [targets] if isinstance(targets, str) else list(targets)
        if isinstance(targets, str) or not all(isinstance(t, GpuTarget) for t in given):
            chosen = parse_targets(named_targets(targets))
        else:
            chosen = [t for t in given if isinstance(t, GpuTarget)]
    if not chosen and not plan:
        raise ConfigError(["no GPU targets named"], hint="name one or more, e.g. targets=['gfx90a']")
    if family:
        for t in chosen:
            fam = family_of(t.processor)
            plan.setdefault(fam, [GpuTarget(p) for p in FAMILIES.get(fam, (t.processor,))])
        return dict(sorted(plan.items(), key=lambda kv: _family_order(kv[0])))
    for t in chosen:
        plan[str(t).replace(":", "_")] = [t]
    return plan


def _family_order(name: str) -> tuple[int, str]:
    order = list(FAMILIES)
    return (order.index(name), name) if name in order else (len(order), name)
