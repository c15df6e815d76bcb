"""A ``variant.json`` someone else wrote, before anything of it is published (``index --variants``).

- ``check_shape``: the keys and types the format has (variantlib 0.2.2 ``constants.py``: namespace
  and feature names ``[a-z0-9_]+``, lines 31-32; values ``[a-z0-9_.]+``, line 33), exactly the
  variant its file name labels, every namespace it uses declared with a provider; anything else
  (a ``"default-priorities": [1]``, ``variants`` as a list, ``</script>`` as a value) is a
  WheelError for that wheel alone.
- ``check_claims``: the properties it claims must be the ones the wheel's audited binaries earn
  (``properties.properties_for``), and the provider of each namespace the one this package
  knows: a gfx90a:xnack+ wheel is not published as ``gfx942``, nor an installer sent to another
  plugin.
- ``merge_checked``: the ``variant.json`` of the wheels of one version merged in order; a wheel
  whose label was used before for other properties (or whose provider differs) is left out
  with the reason, the earlier ones kept.

It reads no file; ``properties.read_variant`` and ``index/variants.py`` call it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rocm_build_backend.errors import WheelError

if TYPE_CHECKING:  # pragma: no cover
    from rocm_build_backend.wheel.facts import WheelTargets

NAME_RE = re.compile(r"[a-z0-9_]+")  # variantlib constants.py:31-32
VALUE_RE = re.compile(r"[a-z0-9_.]+")  # variantlib constants.py:33
_MAX_VALUES = 1024


def _bad(where: str, why: str) -> WheelError:
    return WheelError(f"variant.json in {where} {why}", hint="rebuild the variant wheel with rocm-build-backend")


def _names(value: Any, where: str, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and NAME_RE.fullmatch(v) for v in value):
        raise _bad(where, f"has {what} that is not a list of names [a-z0-9_]")
    return list(value)


def _properties(props: Any, where: str) -> dict[str, dict[str, list[str]]]:
    """namespace -> feature -> values, every name and value of the allowed characters."""
    if not isinstance(props, dict):
        raise _bad(where, "describes its variant with something that is not a table")
    out: dict[str, dict[str, list[str]]] = {}
    count = 0
    for ns, features in props.items():
        if not NAME_RE.fullmatch(ns) or not isinstance(features, dict):
            raise _bad(where, f"names a namespace {ns!r} that is not [a-z0-9_] with a table of features")
        out[ns] = {}
        for feature, values in features.items():
            if not NAME_RE.fullmatch(feature) or not isinstance(values, list) or not values:
                raise _bad(where, f"names a feature {feature!r} that is not [a-z0-9_] with a list of values")
            for value in values:
                if not isinstance(value, str) or not VALUE_RE.fullmatch(value):
                    raise _bad(where, f"has a value {value!r} outside [a-z0-9_.]")
            count += len(values)
            out[ns][feature] = sorted(values)
    if count > _MAX_VALUES:
        raise _bad(where, f"has more than {_MAX_VALUES} values")
    return out


def check_shape(data: Any, label: str, where: str) -> dict[str, Any]:
    """``data`` when it is a ``variant.json`` of exactly the variant ``label``; else WheelError."""
    if not isinstance(data, dict):
        raise _bad(where, "is not a JSON object")
    variants = data.get("variants")
    if not isinstance(variants, dict) or list(variants) != [label]:
        raise _bad(where, f"does not describe exactly the variant {label!r}")
    props = _properties(variants[label], where)
    priorities = data.get("default-priorities")
    if not isinstance(priorities, dict):
        raise _bad(where, "has default-priorities that is not a table")
    order = _names(priorities.get("namespace"), where, "a namespace priority")
    providers = data.get("providers")
    if not isinstance(providers, dict) or not all(NAME_RE.fullmatch(ns) and isinstance(p, dict)
                                                  for ns, p in providers.items()):
        raise _bad(where, "has providers that are not a table of tables")
    missing = [ns for ns in props if ns not in order or ns not in providers]
    if missing:
        raise _bad(where, f"uses the namespace {missing[0]!r} without declaring it and its provider")
    if "$schema" in data and not isinstance(data["$schema"], str):
        raise _bad(where, "has a $schema that is not a string")
    return data


def check_claims(data: Mapping[str, Any], label: str, facts: "WheelTargets", where: str) -> None:
    """The claimed properties are what the audit earns; each provider is the known one."""
    from rocm_build_backend.wheel.variant.properties import properties_for, property_lines, providers

    claimed = _properties(data["variants"][label], where)
    earned = properties_for(facts)
    if claimed != earned:
        raise WheelError(f"{where}: its variant.json claims {', '.join(property_lines(claimed)) or 'no property'}; "
                         f"its binaries earn {', '.join(property_lines(earned)) or 'none'}",
                         hint="a variant wheel is published with the properties its device code earns; "
                              "make it with rocm-build-backend variant")
    known = {p.namespace: dict(p.provider) for _, p in providers()}
    for ns in claimed:
        if data["providers"].get(ns) != known.get(ns):
            raise WheelError(f"{where}: its variant.json names another provider for {ns!r} than this package knows",
                             hint="an installer would run that provider; rebuild the wheel with rocm-build-backend")


def merge_checked(entries: Sequence[tuple[str, Mapping[str, Any]]]) -> tuple[dict[str, Any], dict[str, str]]:
    """(the merged variants JSON, {wheel: why it was left out}) for the ``(wheel, variant.json)``
    of one version, in order: a wheel reusing a label for other properties, or declaring a
    provider differently, is left out; see ``properties.merge_variants`` for the rest."""
    from rocm_build_backend.wheel.variant.properties import merge_variants, property_lines

    kept: list[Mapping[str, Any]] = []
    labels: dict[str, Any] = {}
    providers: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for wheel, data in entries:
        conflict = next((f"its label {label!r} stands for {', '.join(property_lines(labels[label]))} in an "
                         f"earlier wheel, here for {', '.join(property_lines(props))}"
                         for label, props in data["variants"].items() if label in labels and labels[label] != props), None)
        conflict = conflict or next((f"it declares the provider of {ns!r} differently from an earlier wheel"
                                     for ns, info in data["providers"].items()
                                     if ns in providers and providers[ns] != info), None)
        if conflict:
            skipped[wheel] = conflict
            continue
        labels.update(data["variants"])
        providers.update(data["providers"])
        kept.append(data)
    return merge_variants(kept), skipped
