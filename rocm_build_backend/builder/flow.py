"""The flow of one build, step by step: the body of every PEP 517/660 hook in ``__init__``.

    1. settings   pyproject [tool.rocm-build-backend] + config settings + environment (source.py)
    2. targets    explicit settings, else PYTORCH_ROCM_ARCH / TORCH_CUDA_ARCH_LIST, else detect() on
                  this machine; one vendor per build (prepare.py)
    3. toolchain  the compiler (HIP's, or nvcc) must accept every target, before anything compiles (prepare.py)
    4. plan       make_plan(): the variables and config settings the build gets, pure (plan.py)
    5. freshness  build trees made for other targets stop the build, or are cleaned (freshness.py)
    6. apply      `with applied(plan):` the one place that touches os.environ; the pinned compilers
                  and setuptools' parallel build_ext are put in place there (environment.py)
    7. delegate   the wrapped backend's own hook
    8. audit      which device code did the wheel really get? verify it against the targets (verify.py)
    9. stamp      the targets into .dist-info/rocm_build.json; RECORD rewritten atomically (verify.py)
   10. variant    with `variant = true`, the stamped wheel becomes a variant wheel (variant.py)

This module strings the steps together; each step lives in the module named beside it. The
hooks that only pass through to the wrapped backend (``build_sdist``, ``get_requires_*``,
``has_hook``) live in ``delegate.py`` and are re-exported here.
"""

from __future__ import annotations

import time
from pathlib import Path

from rocm_build_backend.builder.delegate import build_sdist, get_requires, has_hook
from rocm_build_backend.builder.diagnose import explain, skipped_for_missing
from rocm_build_backend.builder.enforce import Enforced, read_record, uncounted
from rocm_build_backend.builder.environment import applied
from rocm_build_backend.builder.freshness import check_fresh as _check
from rocm_build_backend.builder.freshness import existing_trees
from rocm_build_backend.builder.freshness import mark_fresh as _mark
from rocm_build_backend.builder.frontend import NAMES, cache_note, frontend_copy
from rocm_build_backend.builder.interrupt import terminated_as_exit
from rocm_build_backend.builder.log import log, reported, teed
from rocm_build_backend.builder.planfile import check_plan_file, write_plan_file
from rocm_build_backend.builder.prepare import Prepared, prepare, show
from rocm_build_backend.builder.source import ConfigSettings, Project, backend_build_dirs, load_project, wrapped_backend
from rocm_build_backend.builder.variant import variant_wheel
from rocm_build_backend.builder.verify import audit_and_stamp
from rocm_build_backend.errors import NoGpuDetectedError, StaleBuildTreeError, TargetMismatchError
from rocm_build_backend.wheel.label import local_version
from rocm_build_backend.wheel.stamp import rewrite_metadata_dir

__all__ = [
    "build",
    "build_sdist",
    "get_requires",
    "has_hook",
    "prepare_metadata",
    "check_fresh",
    "mark_fresh",
    "load_project",
    "prepare",
    "show",
    "wrapped_backend",
]


# --------------------------------------------------------------------- 5. freshness


def check_fresh(prepared: Prepared) -> list[Path]:
    """Stop on (or clean) stale trees; returns the trees that are not ours, for ``mark_fresh``.

    In a frontend's own copy of an sdist (``frontend.frontend_copy``: pip's or build's temporary
    folder, uv's cache) a stale tree is that frontend's leftover: it is cleaned, not refused
    (still only a tree provably made by a build of this source)."""
    project = prepared.project
    if not prepared.plan.targets:  # a build without GPU targets: no tree is stale for it
        return existing_trees(project.source_dir, backend_build_dirs(project))
    copy = frontend_copy(project.source_dir)
    stale = "clean" if copy else project.settings.stale
    why = f"the copy of the sources {NAMES[copy]} unpacked" if copy else 'stale = "clean"'
    try:
        cleaned = _check(
            project.source_dir, [str(t) for t in prepared.plan.targets], stale=stale, extra=backend_build_dirs(project)
        )
    except StaleBuildTreeError as exc:
        if copy:
            exc.message += f" (in {why}: {project.source_dir})"
        raise
    for path in cleaned:
        log(f"removed stale build tree {path} ({why})")
    return existing_trees(project.source_dir, backend_build_dirs(project))


def mark_fresh(prepared: Prepared, skip: list[Path]) -> None:
    project = prepared.project
    _mark(project.source_dir, [str(t) for t in prepared.plan.targets], extra=backend_build_dirs(project), skip=skip)


def _cache_note(prepared: Prepared) -> None:
    """Warn when the frontend caches this wheel under a key without its targets."""
    plan, settings = prepared.plan, prepared.project.settings
    origin = settings.source_of("targets") if plan.source == "settings" else plan.source
    note = cache_note(prepared.project.source_dir, origin)
    if note:
        log(f"warning: {note}")


# ------------------------------------------------------------------------ the hooks


def _explain(exc: BaseException) -> None:
    try:
        cause = explain(exc)
    except Exception:  # naming the cause must never hide the failure itself
        return
    if cause is not None:
        for line in cause.lines():
            log(line)


def _said_why(exc: TargetMismatchError, printed: str) -> TargetMismatchError:
    """A wheel without device code from a build that said it skipped its GPU code for want of
    a requirement (torch): that is the cause and the hint, not the project's switches."""
    if " holds no " not in exc.message:
        return exc
    cause = skipped_for_missing(printed)
    if cause is None:
        return exc
    return TargetMismatchError(f"{exc.message}: {cause.what}", hint=cause.todo)


def _enforced(prepared: Prepared, record: Path | None) -> Enforced | None:
    """The pinned compilers' record, in the build log; None when enforcement was off."""
    if record is None:
        return None
    done = read_record(record)
    for line in done.lines([str(t) for t in prepared.plan.targets], uncounted(prepared.plan.vendor)):
        log(line)
    return done


def build(hook: str, directory: str, config_settings: ConfigSettings | None, metadata_directory: str | None) -> str:
    """build_wheel and build_editable: steps 1-9; returns the wheel's file name."""
    with reported():
        project = load_project(config_settings)
        backend = wrapped_backend(project)
        prepared = prepare(project)
        show(prepared)
        _cache_note(prepared)
        if metadata_directory:
            check_plan_file(metadata_directory, [str(t) for t in prepared.plan.targets])
            if project.settings.local_version:
                metadata_directory = None  # we relabel the version ourselves, after the build
        not_ours = check_fresh(prepared)
        start = time.time()
        enforced = None
        try:
            with terminated_as_exit(), applied(prepared.plan) as world, teed() as printed:
                try:
                    name = getattr(backend, hook)(directory, prepared.plan.config_settings, metadata_directory)
                finally:  # what the pinned compilers did, also when the build failed
                    enforced = _enforced(prepared, world.record)
        except (Exception, SystemExit) as exc:  # the wrapped backend failed: say why when we know
            _explain(exc)
            raise
        finally:  # a failed or stopped compile leaves objects made for these targets: say so for the retry
            mark_fresh(prepared, not_ours)
        try:
            out = audit_and_stamp(
                prepared, Path(directory) / name, editable=hook == "build_editable", since=start, enforced=enforced
            )
        except TargetMismatchError as exc:
            raise _said_why(exc, printed.text()) from None
        if project.settings.variant and hook == "build_wheel":
            out = variant_wheel(out, directory)
        log(f"built {out.name}")
        return out.name


def _prepare_for_metadata(project: Project) -> Prepared | None:
    """The plan for prepare_metadata; None when no GPU is found and the metadata does not need
    the targets (they go into it only with local-version). build_* still requires them."""
    try:
        return prepare(project, check_compiler=False)
    except NoGpuDetectedError:
        if project.settings.local_version:
            raise
        log("no GPU found and no targets given: preparing the metadata without them (the build needs them)")
        return None


def prepare_metadata(hook: str, metadata_directory: str, config_settings: ConfigSettings | None) -> str:
    """prepare_metadata_for_build_*: the wrapped backend's .dist-info, and our plan file beside it."""
    with reported():
        project = load_project(config_settings)
        backend = wrapped_backend(project)
        prepared = _prepare_for_metadata(project)
        plan = prepared.plan if prepared else None
        with applied(plan, compiles=False):
            name: str = getattr(backend, hook)(metadata_directory, plan.config_settings if plan else project.forward)
        if plan is None:
            return name
        if project.settings.local_version:
            version = name.removesuffix(".dist-info").rsplit("-", 1)[1]
            new = local_version(version, plan.targets)
            name = rewrite_metadata_dir(Path(metadata_directory) / name, new)
        write_plan_file(metadata_directory, [str(t) for t in plan.targets])
        return name
