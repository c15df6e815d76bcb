"""Step 10 of a build with ``variant = true``: the stamped wheel becomes a variant wheel.

The properties come from the wheel's audit (``wheel.variant.properties``), never from the request. pip
(26.3) rejects a variant wheel that a backend hands back ("Invalid build number"), after the
whole build, so under pip the plain wheel is kept and a warning says why: its bytes are the
same but for ``variant.json``, and a project whose pyproject asks for variants must still
install from its sdist with pip. ``python -m build`` and ``uv build`` keep variant wheels.
Touches no file but the wheel.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from rocm_build_backend.builder.log import log
from rocm_build_backend.wheel.variant.properties import make_variant_wheel


def under_pip(env: Mapping[str, str] | None = None) -> bool:
    """Whether pip runs this build: pip sets ``PIP_BUILD_TRACKER`` for every build it starts."""
    return bool((os.environ if env is None else env).get("PIP_BUILD_TRACKER"))


def variant_wheel(wheel: Path, env: Mapping[str, str] | None = None) -> Path:
    """The variant wheel made from ``wheel`` (which is removed); ``wheel`` itself under pip."""
    if under_pip(env):
        log("warning: variant = true, but pip rejects variant wheels: keeping the plain wheel "
            "(build variant wheels with `python -m build` or `uv build`)")
        return wheel

    out = make_variant_wheel(wheel, keep_original=False)
    log(f"variant wheel {out.name}")
    return out
