"""Step 6 of a build: the one place that sets ``os.environ``, for the wrapped backend's hook only.

``with applied(plan) as world:`` sets the plan's variables, puts the pinned tools first on PATH,
puts the pinned compilers in place (``enforce``), writes the merged setuptools configuration
(``parallel``), puts the compile pool in place (``pool``) and the compiler cache (``cache``: the
targets in its key, behind the pinned compilers, in front of setuptools' compiles), then restores the environment
exactly as it was, puts setuptools' ``compile`` back and removes its temporary folder. ``world.record`` is the file the pinned compilers append to (read it before the block
ends). Computes nothing: the plan is made before.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from rocm_build_backend.builder.apart import apart
from rocm_build_backend.builder.cache import cache_variables, hipcc_as_cxx, key_variables
from rocm_build_backend.builder.cachespawn import cached_spawn, pinned_under
from rocm_build_backend.builder.cachestats import watched
from rocm_build_backend.builder.enforce import RECORD_VAR, cache_dir, install
from rocm_build_backend.builder.log import log
from rocm_build_backend.builder.parallel import merged_config
from rocm_build_backend.builder.pinned import pinned_env, write_pinned_tools
from rocm_build_backend.builder.pool import pooled
from rocm_build_backend.builder.plan import BuildPlan


@dataclass
class World:
    """What ``applied`` put in place for the block."""

    record: Path | None = None  # the pinned compilers' record, when enforcement is on


@contextmanager
def applied(plan: BuildPlan | None, *, compiles: bool = True) -> Iterator[World]:
    """Set the plan's variables (and pinned tools first on PATH) for the block; restore after.

    ``None`` (no plan) changes nothing; ``compiles=False`` (a metadata hook) leaves the compiler
    cache out.
    """
    saved = dict(os.environ)
    tools = None
    world = World()
    stack = ExitStack()
    try:
        if plan is not None:
            os.environ.update(plan.env)
            tools = tempfile.mkdtemp(prefix="rocm-build-backend-tools-")
            if plan.pinned_tools:
                write_pinned_tools(Path(tools), plan.targets)
                os.environ.update(pinned_env(Path(tools), dict(os.environ)))  # PATH and CMAKE_PROGRAM_PATH
            if plan.enforce is not None:
                world.record = _enforce(plan, Path(tools) / "enforced.jsonl")
            at_once = _at_once(plan, stack)
            if compiles:  # after the pool: the cache's command method wraps the pool's
                _cache(plan, Path(tools), stack)
            if plan.build_ext_parallel > 1:
                os.environ["DIST_EXTRA_CONFIG"] = str(
                    merged_config(Path(tools), at_once, os.environ.get("DIST_EXTRA_CONFIG"))
                )
        yield world
    finally:
        stack.close()
        os.environ.clear()
        os.environ.update(saved)
        if tools:
            shutil.rmtree(tools, ignore_errors=True)


def _at_once(plan: BuildPlan, stack: ExitStack) -> int:
    """The extensions setuptools builds at once: the plan's, with the compile pool in place (on
    ``stack``) when the plan has one (only its gate when it steps aside), or each extension's own
    ``build_temp`` for torch's ninja builds; one at a time when it cannot be put in place."""
    if plan.ninja_apart:
        if not stack.enter_context(apart()):
            log("warning: no build_temp per extension (no setuptools): one extension at a time")
            return 1
        return plan.build_ext_parallel
    if not plan.compile_pool:
        return plan.build_ext_parallel
    if stack.enter_context(pooled(plan.compile_pool, side_by_side=not plan.compile_pool_aside)) is None:
        # side by side without the pool, extensions that share a source would write one object file
        log("warning: no compile pool (this setuptools' compiler classes are not known): one extension at a time")
        return 1
    return plan.build_ext_parallel


def _enforce(plan: BuildPlan, record: Path) -> Path:
    """Put the pinned compilers in place (``EnforcementError`` when they cannot be: the build stops)."""
    notes: list[str] = []
    variables = install(plan.vendor, [str(t) for t in plan.targets], dict(os.environ), record, notes)
    for note in notes:
        log(note)
    record.touch()
    os.environ.update(variables)
    shown = " ".join(f"{k}={v}" for k, v in variables.items() if k not in ("PATH", RECORD_VAR))
    log(f"enforce: {shown}")
    return record


def _cache(plan: BuildPlan, tools: Path, stack: ExitStack) -> None:
    """The compiler cache: the targets in every cache's key, the cache behind the pinned programs
    and in front of the other compiles, its counters read around the block (on ``stack``)."""
    if plan.targets:
        os.environ.update(key_variables([str(t) for t in plan.targets], os.environ, tools))
    pinned = pinned_under(str(cache_dir(os.environ)))
    changed = cache_variables(plan.cache, dict(os.environ), pinned, os.path.realpath(os.getcwd()))
    for var, value in changed.items():
        if value:
            os.environ[var] = value
        else:
            os.environ.pop(var, None)
    if changed:
        log("compiler cache: " + " ".join(f"{k}={v}" for k, v in changed.items()))
    if hipcc_as_cxx(plan.cache.kind, os.environ):
        log(
            "compiler cache: sccache is not put in front of CXX=hipcc (it would preprocess the .cpp files as C++): "
            'those compiles run uncached; ccache runs there (compiler-cache = "ccache")'
        )
    if plan.cache.program is None:
        return
    if plan.backend.startswith("setuptools") and not stack.enter_context(cached_spawn(plan.cache, pinned)):
        log("warning: compiler cache: this setuptools' compiler classes are not known: its compiles run uncached")
    stack.enter_context(watched(plan.cache))
