"""A ``variant.json`` someone else wrote, before anything of it is published (``index --variants``).

- ``shape.check_shape`` (re-exported): the keys, types and characters the format allows.
- ``check_claims``: the properties it claims must be the ones the wheel's audited binaries earn
  (``properties.properties_for``), and the provider of each namespace the one this package
  knows: a gfx90a:xnack+ wheel is not published as ``gfx942``, nor an installer sent to another
  plugin.
- ``merge_checked``: the ``variant.json`` of the wheels of one version merged in order; a wheel
  whose label was used before for other properties (or whose provider differs) is left out
  with the reason, the earlier ones kept.

It reads no file; ``index/variants.py`` calls it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rocm_build_backend.errors import WheelError
from rocm_build_backend.wheel.variant.shape import check_shape as check_shape
from rocm_build_backend.wheel.variant.shape import properties_of

if TYPE_CHECKING:  # pragma: no cover
    from rocm_build_backend.wheel.facts import WheelTargets
from rocm_build_backend.wheel.variant.properties import merge_variants, properties_for, property_lines, providers


def check_claims(data: Mapping[str, Any], label: str, facts: "WheelTargets", where: str) -> None:
    """The claimed properties are what the audit earns; each provider is the known one."""

    claimed = properties_of(data["variants"][label], where)
    earned = properties_for(facts)
    if claimed != earned:
        raise WheelError(
            f"{where}: its variant.json claims {', '.join(property_lines(claimed)) or 'no property'}; "
            f"its binaries earn {', '.join(property_lines(earned)) or 'none'}",
            hint="a variant wheel is published with the properties its device code earns; "
            "make it with rocm-build-backend variant",
        )
    known = {p.namespace: dict(p.provider) for _, p in providers()}
    for ns in claimed:
        if data["providers"].get(ns) != known.get(ns):
            raise WheelError(
                f"{where}: its variant.json names another provider for {ns!r} than this package knows",
                hint="an installer would run that provider; rebuild the wheel with rocm-build-backend",
            )


def merge_checked(entries: Sequence[tuple[str, Mapping[str, Any]]]) -> tuple[dict[str, Any], dict[str, str]]:
    """(the merged variants JSON, {wheel: why it was left out}) for the ``(wheel, variant.json)``
    of one version, in order: a wheel reusing a label for other properties, or declaring a
    provider differently, is left out; see ``properties.merge_variants`` for the rest."""

    kept: list[Mapping[str, Any]] = []
    labels: dict[str, Any] = {}
    providers: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for wheel, data in entries:
        conflict = next(
            (
                f"its label {label!r} stands for {', '.join(property_lines(labels[label]))} in an "
                f"earlier wheel, here for {', '.join(property_lines(props))}"
                for label, props in data["variants"].items()
                if label in labels and labels[label] != props
            ),
            None,
        )
        conflict = conflict or next(
            (
                f"it declares the provider of {ns!r} differently from an earlier wheel"
                for ns, info in data["providers"].items()
                if ns in providers and providers[ns] != info
            ),
            None,
        )
        if conflict:
            skipped[wheel] = conflict
            continue
        labels.update(data["variants"])
        providers.update(data["providers"])
        kept.append(data)
    return merge_variants(kept), skipped
