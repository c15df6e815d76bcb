"""How an NVIDIA profile variable names a code target: the placeholders of ``data/profiles.json``.

A profile variable of the ``nvidia`` section is a constant or a per-code-target template using
``{target}`` (``sm_90a``, ``compute_90``), ``{number}`` (``90a``: the SM number and suffix),
``{cc}`` (``9.0a``), ``{virtual}`` (``compute_90a``) or ``{cmake}`` (``90a-real`` /
``90a-virtual``); its ``code`` key says which code targets the template sees: ``sass`` (the
default: ``sm_``), ``ptx`` (``compute_``) or ``all``. The build layer (``builder/profiles.py``)
renders it, de-duplicating items and joining them with the variable's separator::

    values(GpuTarget("sm_90a"), {})   # {"target": "sm_90a", "number": "90a", "cc": "9.0a", ...}

Pure; the profile data is not read here.
"""

from __future__ import annotations

from typing import Mapping

from rocm_build_backend.gpu.nvidia.targets import parse_cuda_target
from rocm_build_backend.gpu.targets import GpuTarget

PLACEHOLDERS = frozenset({"target", "number", "cc", "virtual", "cmake"})
OPTIONS: Mapping[str, tuple[str, ...]] = {"code": ("sass", "ptx", "all")}


def values(target: GpuTarget, options: Mapping[str, str]) -> dict[str, str] | None:
    """The placeholder values for one code target; None when the variable's ``code`` does not see it."""
    t = parse_cuda_target(target.processor)
    code = options.get("code", "sass")
    if code != "all" and t.ptx != (code == "ptx"):
        return None
    return {
        "target": str(t),
        "number": f"{t.number}{t.suffix}",
        "cc": t.cc,
        "virtual": t.virtual,
        "cmake": f"{t.number}{t.suffix}-{'virtual' if t.ptx else 'real'}",
    }
