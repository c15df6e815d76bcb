"""Step 6 of a build: the one place that sets ``os.environ``, for the wrapped backend's hook only.

``with applied(plan):`` sets the plan's variables (and puts the pinned tools first on PATH),
then restores the environment exactly as it was. Computes nothing: the plan is made before.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from rocm_build_backend.builder.pinned import pinned_env, write_pinned_tools
from rocm_build_backend.builder.plan import BuildPlan


@contextmanager
def applied(plan: BuildPlan | None) -> Iterator[None]:
    """Set the plan's variables (and pinned tools first on PATH) for the block; restore after.

    ``None`` (no plan) changes nothing.
    """
    saved = dict(os.environ)
    tools = None
    try:
        if plan is not None:
            os.environ.update(plan.env)
            if plan.pinned_tools:
                tools = tempfile.mkdtemp(prefix="rocm-build-backend-tools-")
                write_pinned_tools(Path(tools), plan.targets)
                os.environ.update(pinned_env(Path(tools), dict(os.environ)))  # PATH and CMAKE_PROGRAM_PATH
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if tools:
            shutil.rmtree(tools, ignore_errors=True)
