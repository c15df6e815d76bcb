"""Which indexes ``index`` writes, and which devices a wheel must load on to be listed in each.

An index per target (``gfx942``, ``gfx90a_xnack-``), or with ``family=True`` per family as a
vendor's nightly indexes group them (``BuildVendor.index_families``: AMD's ``gfx94X-dcgpu``,
``gfx110X-all``, ...; a processor in no family is a family of its own name): a wheel appears in
a family's index only when it loads on every member, since anyone in the family may install
from it. Without named targets, the targets come from the wheels' own device code, each as the
device it is for (``BuildVendor.device_of``; a generic target as every processor it covers).

It reads no wheel and writes nothing: it maps names and records to a plan. It branches on no
vendor.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rocm_build_backend.errors import ConfigError, UnknownTargetError
from rocm_build_backend.gpu.targets import (
    GpuTarget,
    parse_target,
    parse_targets,
    vendor_name,
    sort_targets,
    split_targets,
    table,
)
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.gpu.vendor import vendors


def families() -> dict[str, tuple[str, ...]]:
    """Every vendor's family indexes, in registry order: family name -> its processors."""
    out: dict[str, tuple[str, ...]] = {}
    for vendor in vendors():
        out.update(build_side(vendor).index_families)
    return out


def family_of(processor: str) -> str:
    """The family index a processor belongs to (itself when it has none)."""
    for name, members in families().items():
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
                if t.is_generic:
                    found.update(GpuTarget(p) for p, row in table().items() if row.get("generic") == t.processor)
                else:
                    found.add(build_side(vendor_name(t)).device_of(t))
    return sort_targets(found)


def named_targets(value: str | Sequence[str | GpuTarget]) -> list[str]:
    """The names in a ``--targets`` value (``;``, ``,`` or spaces between them); ConfigError when
    it names none (``";;"``, ``""``), which would otherwise mean "do nothing" and succeed."""
    names = split_targets(value if isinstance(value, str) else [str(v) for v in value])
    if not names:
        raise ConfigError(
            [f"--targets {value!r} names no GPU target"], hint="name one or more, e.g. --targets gfx90a,gfx942"
        )
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
        known = families()
        for name in named_targets(targets):
            if name in known:
                plan[name] = [GpuTarget(p) for p in known[name]]
                continue
            try:
                chosen.append(parse_target(name))
            except UnknownTargetError as exc:
                problems.append(exc.message)
        if problems:
            raise ConfigError(problems, hint="name targets or families: " + ", ".join(known))
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
            plan.setdefault(fam, [GpuTarget(p) for p in families().get(fam, (t.processor,))])
        return dict(sorted(plan.items(), key=lambda kv: _family_order(kv[0])))
    for t in chosen:
        plan[str(t).replace(":", "_")] = [t]
    return plan


def _family_order(name: str) -> tuple[int, str]:
    order = list(families())
    return (order.index(name), name) if name in order else (len(order), name)
