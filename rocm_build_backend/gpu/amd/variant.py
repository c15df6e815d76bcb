"""AMD's wheel-variant provider: ``amd :: gfx_arch :: <owner>``, as ``rocm-bootstrap`` speaks it.

The AMD provider in ``rocm-bootstrap`` 0.3.0 reports, for each detected GPU, its *package
owner* (``rocm_bootstrap/variant_provider.py`` lines 66-82, ``group_package_targets`` in
``rocm_bootstrap/package_metadata.py`` lines 44-58: features such as ``:xnack-`` are cut,
``gfx1250-strict`` is owned by ``gfx1250``). A wheel gets an owner when its code loads on every
device that owner stands for (the loader's rules), so ``gfx90a:xnack-`` code gives ``gfx90a``
and ``gfx11-generic`` code gives each gfx11 owner it loads on. Without rocm-bootstrap
installed, each AMD processor owns itself. Pure; ``wheel/variant/properties.py`` writes files.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping, Sequence

from rocm_build_backend.gpu.targets import table

_VALUE = re.compile(r"[a-z0-9_.]+")  # variantlib constants.py:33


def amd_owners() -> dict[str, list[str]]:
    """Owner -> the processors the AMD provider reports that owner for.

    From rocm-bootstrap's own mapping when it is installed (``group_package_targets`` over
    ``ALL_TARGETS``, as ``AMDVariantPlugin.get_all_configs`` does); else each AMD processor
    of this tool's target table owns itself. Owners that are not valid property values
    (``[a-z0-9_.]+``) are left out.
    """
    try:
        # rocm-bootstrap ships no type information
        from rocm_bootstrap.package_metadata import group_package_targets  # type: ignore[import-untyped]
        from rocm_bootstrap.targets import ALL_TARGETS  # type: ignore[import-untyped]
    except ImportError:
        groups = {
            name: [name]
            for name, row in table().items()
            if row.get("vendor") == "amd" and not name.endswith("-generic")
        }
    else:
        groups = {str(k): [str(n) for n in v] for k, v in group_package_targets(t.name for t in ALL_TARGETS).items()}
    return {owner: names for owner, names in groups.items() if _VALUE.fullmatch(owner)}


class AmdProvider:
    namespace = "amd"
    feature = "gfx_arch"
    # how an installer finds it: rocm-bootstrap's entry point (its entry_points.txt:
    # ``amd = rocm_bootstrap.variant_provider:AMDVariantPlugin``)
    provider: Mapping[str, Any] = {
        "requires": ["rocm-bootstrap>=0.3.0"],
        "plugin-api": "rocm_bootstrap.variant_provider:AMDVariantPlugin",
    }

    def values(self, codes: Sequence[str], serves_all: Callable[[Iterable[str]], bool]) -> list[str]:
        return sorted(owner for owner, devices in amd_owners().items() if serves_all(devices))
