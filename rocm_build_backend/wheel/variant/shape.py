"""The shape of a ``variant.json`` someone else wrote: ``check_shape``.

The keys and types the format has (variantlib 0.2.2 ``constants.py``: namespace and feature names
``[a-z0-9_]+``, lines 31-32; values ``[a-z0-9_.]+``, line 33), exactly the variant its file name
labels, every namespace it uses declared with a provider; anything else (a
``"default-priorities": [1]``, ``variants`` as a list, ``</script>`` as a value) is a WheelError
for that wheel alone. Pure; it imports nothing of the variant modules (``properties`` and
``checks`` import it).
"""

from __future__ import annotations

import re
from typing import Any

from rocm_build_backend.errors import WheelError

NAME_RE = re.compile(r"[a-z0-9_]+")  # variantlib constants.py:31-32
VALUE_RE = re.compile(r"[a-z0-9_.]+")  # variantlib constants.py:33
_MAX_VALUES = 1024


def _bad(where: str, why: str) -> WheelError:
    return WheelError(f"variant.json in {where} {why}", hint="rebuild the variant wheel with rocm-build-backend")


def _names(value: Any, where: str, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and NAME_RE.fullmatch(v) for v in value):
        raise _bad(where, f"has {what} that is not a list of names [a-z0-9_]")
    return list(value)


def properties_of(props: Any, where: str) -> dict[str, dict[str, list[str]]]:
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
    props = properties_of(variants[label], where)
    priorities = data.get("default-priorities")
    if not isinstance(priorities, dict):
        raise _bad(where, "has default-priorities that is not a table")
    order = _names(priorities.get("namespace"), where, "a namespace priority")
    providers = data.get("providers")
    if not isinstance(providers, dict) or not all(
        NAME_RE.fullmatch(ns) and isinstance(p, dict) for ns, p in providers.items()
    ):
        raise _bad(where, "has providers that are not a table of tables")
    missing = [ns for ns in props if ns not in order or ns not in providers]
    if missing:
        raise _bad(where, f"uses the namespace {missing[0]!r} without declaring it and its provider")
    if "$schema" in data and not isinstance(data["$schema"], str):
        raise _bad(where, "has a $schema that is not a string")
    return data
