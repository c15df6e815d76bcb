"""Step 10 of a build with ``variant = true``: the stamped wheel becomes a variant wheel.

The properties come from the wheel's audit (``wheel.variant.properties``), never from the request. Only
frontends that take a variant wheel back get one (``frontend.variant_verdict``): ``python -m
build`` and ``uv build`` keep them; pip (26.3) rejects one after the whole build ("Invalid build
number") and uv, building to install (``uv pip install``, ``uv sync``), finds it "not
compatible"; there, and under a frontend not known to take them, the plain wheel is kept and a
warning says why: its bytes are the same but for ``variant.json``, and a project whose
pyproject asks for variants still installs from its sdist.
Touches no file but the wheel.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from rocm_build_backend.builder.frontend import variant_verdict
from rocm_build_backend.builder.log import log
from rocm_build_backend.wheel.variant.properties import make_variant_wheel


def under_pip(env: Mapping[str, str] | None = None) -> bool:
    """Whether pip runs this build: pip sets ``PIP_BUILD_TRACKER`` for every build it starts."""
    return bool((os.environ if env is None else env).get("PIP_BUILD_TRACKER"))


def variant_wheel(wheel: Path, directory: str | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The variant wheel made from ``wheel`` (which is removed), where the frontend takes it
    back (``frontend.variant_verdict``); ``wheel`` itself elsewhere, with the reason logged."""
    ok, why = variant_verdict(directory or wheel.parent, os.environ if env is None else env)
    if not ok:
        log(
            f"warning: variant = true, but {why}: keeping the plain wheel "
            "(variant wheels are made under `python -m build` and `uv build`)"
        )
        return wheel

    out = make_variant_wheel(wheel, keep_original=False)
    log(f"variant wheel {out.name} ({why})")
    return out
