"""NVIDIA's wheel-variant provider: ``nvidia :: sm_arch :: <XY>_real | <X0>_virtual``.

NVIDIA's provider (package ``nvidia-variant-provider``, ``nvidia_variant_provider/plugin.py``
lines 85-95 and 238-241 at wheelnext/nvidia-variant-provider ffea5d3b; uv vendors the same
provider, namespace ``nvidia`` and feature ``sm_arch``, in ``uv-distribution`` 0.0.98
``src/variant/nvidia.rs``) offers a device sm_XY the values ``XY_real`` down to ``X0_real`` and
then ``X0_virtual``. SASS ``sm_XY`` (and family ``sm_XYf``) gives ``XY_real``, PTX
``compute_X0`` gives ``X0_virtual``; a value is kept only when the wheel loads on every known
device the provider offers it to (``sm_90a`` code gives ``90_real`` only while sm_90 is the
only 9.x device). Pure; ``wheel/variant/properties.py`` writes files.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping, Sequence

from rocm_build_backend.gpu.targets import table

_NV = re.compile(r"(sm|compute)_([0-9]+)([af]?)")


def nvidia_devices() -> list[tuple[int, int]]:
    """(major, minor) of every NVIDIA device in the target table."""
    out = []
    for name in table():
        m = _NV.fullmatch(name)
        if m and m.group(1) == "sm" and not m.group(3):
            n = int(m.group(2))
            out.append((n // 10, n % 10))
    return sorted(out)


def nvidia_value(target: str) -> str | None:
    """The ``sm_arch`` value a target's code stands for (``sm_90`` -> ``90_real``)."""
    m = _NV.fullmatch(target)
    if not m:
        return None
    return f"{m.group(2)}_real" if m.group(1) == "sm" else f"{m.group(2)}_virtual"


def nvidia_offered(value: str, devices: Iterable[tuple[int, int]]) -> list[str]:
    """The devices NVIDIA's provider offers ``value`` to (plugin.py lines 238-241)."""
    m = re.fullmatch(r"([0-9]+)_(real|virtual)", value)
    if not m:
        return []
    n = int(m.group(1))
    major, minor = n // 10, n % 10
    out = []
    for dmaj, dmin in devices:
        if dmaj != major:
            continue
        if (m.group(2) == "real" and dmin >= minor) or (m.group(2) == "virtual" and minor == 0):
            out.append(f"sm_{dmaj}{dmin}")
    return out


class NvidiaProvider:
    namespace = "nvidia"
    feature = "sm_arch"
    # how an installer finds it: the object uv's vendored provider matches (nvidia.rs:
    # PLUGIN_API, PACKAGE_NAME). The package index holds only nvidia-variant-provider 0.0.0a0
    # (a placeholder without the plugin): a requirement it can satisfy names that pre-release;
    # uv 0.13.9 matches its vendored provider by this plugin-api and package and installs
    # nothing (without them it ignores the variants: tested with empty requires, "builtin", and
    # no plugin-api)
    provider: Mapping[str, Any] = {
        "requires": ["nvidia-variant-provider>=0.0.0a0,<1.0.0"],
        "plugin-api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin",
    }

    def values(self, codes: Sequence[str], serves_all: Callable[[Iterable[str]], bool]) -> list[str]:
        found = sorted({v for v in (nvidia_value(t) for t in codes) if v})
        if not found:
            return []
        devices = nvidia_devices()
        return sorted(v for v in found if serves_all(nvidia_offered(v, devices)))
