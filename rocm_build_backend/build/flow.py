"""The flow of one build, step by step (the PEP 517 hooks in ``__init__`` call these).

    1. settings   pyproject [tool.rocm-build-backend] + config settings + environment
    2. targets    explicit settings, else PYTORCH_ROCM_ARCH, else detect() on this machine
    3. toolchain  the compiler must accept every target, before anything compiles
    4. plan       make_plan(): the variables and config settings the build gets (pure)
    5. freshness  build trees made for other targets stop the build (or are cleaned)
    6. apply      `with applied(plan):` the one place that touches os.environ
    7. delegate   the wrapped backend's own hook
    8. audit      which device code did the wheel really get? verify it against the targets
    9. stamp      the targets into .dist-info/rocm_build.json; RECORD rewritten atomically
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from rocm_build_backend.errors import ConfigError, RocmBuildBackendError, TargetMismatchError
from rocm_build_backend.build.settings import Settings, load_settings, split_config_settings

LOG_PREFIX = "rocm-build-backend: "
PLAN_FILE = "rocm-build-backend-plan.json"  # beside the .dist-info that prepare_metadata made


def log(line: str) -> None:
    print(LOG_PREFIX + line, file=sys.stderr, flush=True)


@contextmanager
def reported() -> Iterator[None]:
    """Turn our errors into `error:` / `hint:` lines and a non-zero exit, never a traceback."""
    try:
        yield
    except RocmBuildBackendError as exc:
        for line in exc.lines():
            log(line)
        raise SystemExit(exc.exit_code) from None


# ---------------------------------------------------------------------- 1. settings

@dataclass
class Project:
    source_dir: Path
    pyproject: dict[str, Any]
    settings: Settings
    forward: dict[str, Any]  # config settings for the wrapped backend, ours removed

    @property
    def dist_name(self) -> str | None:
        from rocm_build_backend.build.projectname import project_name  # [project], PKG-INFO, setup.cfg, setup.py

        return project_name(self.source_dir, self.pyproject)


def read_pyproject(source_dir: Path) -> dict[str, Any]:
    path = source_dir / "pyproject.toml"
    if not path.is_file():
        return {}
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError([f"cannot read {path.name}: {exc}"], hint="fix the TOML syntax") from None


def load_project(config_settings: Mapping[str, Any] | None, env: Mapping[str, str] | None = None,
                 source_dir: Path | None = None) -> Project:
    source_dir = Path(source_dir or os.getcwd())
    pyproject = read_pyproject(source_dir)
    settings = load_settings(pyproject, config_settings, os.environ if env is None else env)
    _, forward = split_config_settings(config_settings)
    return Project(source_dir, pyproject, settings, forward)


_BACKENDS: dict[tuple[str, tuple[str, ...]], Any] = {}


def wrapped_backend(project: Project) -> Any:
    from rocm_build_backend.build.backend import load_backend

    key = (project.settings.backend, tuple(project.settings.backend_path))
    if key not in _BACKENDS:
        _BACKENDS[key] = load_backend(*key, source_dir=project.source_dir)
    return _BACKENDS[key]


# ----------------------------------------------------------------------- 2. targets

def _where(settings: Settings) -> str:
    return {"-C": "-C rocm-build-backend.targets", "env": "ROCM_BUILD_BACKEND_TARGETS",
            "pyproject": "[tool.rocm-build-backend] targets"}.get(settings.source_of("targets"), "targets")


def resolve_targets(settings: Settings, env: Mapping[str, str]) -> tuple[list, str, Any]:
    """(targets, where they came from, the Detection or None). Never a default list."""
    from rocm_build_backend.gpu.targets import join_targets, parse_targets

    user_arch = env.get("PYTORCH_ROCM_ARCH", "").strip()
    if settings.targets != "auto":
        targets = parse_targets(settings.targets)
        where = _where(settings)
        if user_arch and parse_targets(user_arch, where=" in PYTORCH_ROCM_ARCH") != targets:
            raise ConfigError(
                [f"{where} asks for {join_targets(targets)} but PYTORCH_ROCM_ARCH={user_arch} is set"],
                hint="unset PYTORCH_ROCM_ARCH, or make both name the same targets",
            )
        return targets, f"from {where}", None
    if user_arch:
        return parse_targets(user_arch, where=" in PYTORCH_ROCM_ARCH"), "from PYTORCH_ROCM_ARCH", None
    from rocm_build_backend.gpu.amd.detect import detect, require_targets

    found = detect(root=Path(settings.sysfs_root), env=env, keep_features=settings.features)
    return require_targets(found), f"detected by {found.source}", found


# --------------------------------------------------------------------- 3-4. plan

def host_facts() -> Any:
    from rocm_build_backend.build.plan import Host

    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        cpus = os.cpu_count() or 1
    mem = None
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    mem = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError):
        pass
    return Host(cpus=cpus, mem_available=mem)


@dataclass
class Prepared:
    project: Project
    plan: Any  # BuildPlan
    compiler: Any  # toolchain.Compiler | None
    detection: Any  # detect.Detection | None


def prepare(project: Project, env: Mapping[str, str] | None = None, *, check_compiler: bool = True) -> Prepared:
    """Steps 2-4: targets, toolchain check, plan. Reads the world, changes nothing."""
    from rocm_build_backend.build.backend import backend_kind
    from rocm_build_backend.build.plan import make_plan

    env = os.environ if env is None else env
    settings = project.settings
    targets, source, detection = resolve_targets(settings, env)
    compiler = None
    # a project that declares it has no GPU code (verify = "off") compiles nothing for the targets
    if check_compiler and settings.compiler_check and settings.verify != "off":
        from rocm_build_backend.build.toolchain import find_compiler, require_supported

        compiler = find_compiler(settings.compiler, env=env)
        if compiler is not None:
            require_supported(compiler, targets, env=env)
    plan = make_plan(targets, source, settings, env, backend_kind=backend_kind(settings.backend),
                     config_settings=project.forward, host=host_facts(), dist_name=project.dist_name)
    return Prepared(project, plan, compiler, detection)


def show(prepared: Prepared) -> None:
    plan = prepared.plan
    for line in plan.summary():
        log(line)
    if prepared.compiler is not None:
        log(f"compiler {prepared.compiler.describe()} accepts {' '.join(str(t) for t in plan.targets)}")
    elif prepared.project.settings.compiler_check and prepared.project.settings.verify != "off":
        log("compiler: no HIP compiler found to check the targets with (hipcc, amdclang++, clang)")


# ---------------------------------------------------------------------- 6. apply

@contextmanager
def applied(plan: Any) -> Iterator[None]:
    """Set the plan's variables (and pinned tools first on PATH) for the block; restore after."""
    import shutil
    import tempfile

    saved = dict(os.environ)
    tools = None
    try:
        os.environ.update(plan.env)
        if plan.pinned_tools:
            from rocm_build_backend.build.pinned import pinned_env, write_pinned_tools

            tools = tempfile.mkdtemp(prefix="rocm-build-backend-tools-")
            write_pinned_tools(Path(tools), plan.targets)
            os.environ.update(pinned_env(Path(tools), os.environ))  # PATH and CMAKE_PROGRAM_PATH
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if tools:
            shutil.rmtree(tools, ignore_errors=True)


# --------------------------------------------------------------------- 5. freshness

def _skbuild_dir(project: Project) -> list[Path]:
    given = (project.forward.get("build-dir") or project.forward.get("skbuild.build-dir")
             or os.environ.get("SKBUILD_BUILD_DIR")
             or ((project.pyproject.get("tool") or {}).get("scikit-build") or {}).get("build-dir"))
    if isinstance(given, str) and given and "{" not in given:
        return [project.source_dir / given]
    return []


def check_fresh(prepared: Prepared) -> None:
    from rocm_build_backend.build.freshness import check_fresh as _check

    project = prepared.project
    cleaned = _check(project.source_dir, [str(t) for t in prepared.plan.targets],
                     stale=project.settings.stale, extra=_skbuild_dir(project))
    for path in cleaned:
        log(f"removed stale build tree {path} (stale = \"clean\")")


def mark_fresh(prepared: Prepared) -> None:
    from rocm_build_backend.build.freshness import mark_fresh as _mark

    project = prepared.project
    _mark(project.source_dir, [str(t) for t in prepared.plan.targets], extra=_skbuild_dir(project))


# ------------------------------------------------------------------- 8-9. audit, stamp

_NOT_SOURCES = {".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__", "build", "dist"}


def _libraries_since(source_dir: Path, since: float) -> list[Path]:
    """Shared libraries written into the source tree since ``since`` (an editable build's)."""
    found = []
    for root, dirs, names in os.walk(source_dir):
        dirs[:] = [d for d in dirs if d not in _NOT_SOURCES and not d.endswith(".egg-info")]
        for name in names:
            if name.endswith(".so") or ".so." in name:
                path = Path(root, name)
                try:
                    if path.stat().st_mtime >= since:
                        found.append(path)
                except OSError:
                    pass
    return found


def audit_and_stamp(prepared: Prepared, wheel: Path, *, editable: bool = False, since: float = 0.0) -> Path:
    """Verify the wheel's device code against the targets, then stamp it (atomically)."""
    from rocm_build_backend.binary.audit import audit_paths, audit_wheel, verify

    project, plan = prepared.project, prepared.plan
    settings = project.settings
    report = audit_wheel(wheel)
    if editable:
        # the compiled code of an editable install stays in the source tree
        fresh = _libraries_since(project.source_dir, since)
        if fresh:
            extra = audit_paths(fresh)
            report.files.extend(extra.files)
    if settings.verify != "off":
        problems = verify(report, plan.targets)
        if problems:
            message = f"{wheel.name}: " + "; ".join(problems)
            if settings.verify == "error":
                hint = "the build ignored the targets (a hard-coded --offload-arch, or a script that picks its own)"
                if plan.profile:
                    from rocm_build_backend.build.profiles import profile_for

                    prof = profile_for(project.dist_name)
                    if prof is not None and prof.no_device_code_hint:
                        hint = prof.no_device_code_hint
                hint += "; a project meant to have no GPU code sets verify = \"off\""
                wheel.unlink(missing_ok=True)
                raise TargetMismatchError(message, hint=hint)
            log("warning: " + message)
        else:
            log("audit: " + (", ".join(f"{f.path} holds {' '.join(f.targets)}" for f in report.files if f.targets)
                             or "no device code"))
    from rocm_build_backend import _version
    from rocm_build_backend.wheel.stamp import local_version, make_stamp, rewrite_wheel

    host = [str(d.target) for d in prepared.detection.devices] if prepared.detection else []
    toolchain = prepared.compiler.to_json() if prepared.compiler else {}
    stamp = make_stamp(
        requested=[str(t) for t in plan.targets], source=plan.source,
        audit_files={f.path: {"targets": list(f.targets), "complete": list(f.complete)}
                     for f in report.files if f.targets},
        host_gpus=host, toolchain=toolchain, version=_version.__version__,
    )
    new_version = None
    if settings.local_version:
        from packaging.utils import parse_wheel_filename

        new_version = local_version(str(parse_wheel_filename(wheel.name)[1]), plan.targets)
    extra_files, patch_files = {}, {}
    if settings.guard and not editable:
        import zipfile

        from rocm_build_backend.wheel.guard import guard_files

        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
        dist = project.dist_name or wheel.name.split("-")[0]
        extra_files, patch_files = guard_files(names, [str(t) for t in plan.targets], dist)
    out = rewrite_wheel(wheel, stamp=stamp, new_version=new_version,
                        extra_files=extra_files or None, patch_files=patch_files or None)
    log(f"stamped {out.name}")
    return out
