"""How an AMD profile variable names a target: the placeholders of ``data/profiles.json``.

A profile variable of the ``amd`` section is a constant or a per-target template using
``{target}`` (the full target ID, ``gfx90a:xnack-``) or ``{processor}`` (``gfx90a``: features
dropped, which several projects need). The build layer (``builder/profiles.py``) renders it for
the build's targets, de-duplicating items and joining them with the variable's separator.
Pure; the profile data is not read here.
"""

from __future__ import annotations

from typing import Mapping

from rocm_build_backend.gpu.targets import GpuTarget

PLACEHOLDERS = frozenset({"target", "processor"})
OPTIONS: Mapping[str, tuple[str, ...]] = {}  # no extra keys on AMD variables


def values(target: GpuTarget, options: Mapping[str, str]) -> dict[str, str]:
    """The placeholder values for one target (every AMD variable sees every AMD target)."""
    return {"target": str(target), "processor": target.processor}
