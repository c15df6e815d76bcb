"""rocm-build-backend: a PEP 517 build backend that wraps a project's real backend and
builds it for the right GPU targets, then proves it from the binaries.

    [build-system]
    requires = ["rocm-build-backend", "setuptools>=64"]
    build-backend = "rocm_build_backend"

    [tool.rocm-build-backend]
    backend = "setuptools.build_meta"

The hooks below are thin: the flow lives in ``build.py``. The optional hooks
(``build_editable``, ``prepare_metadata_for_build_*``, ``get_requires_for_build_*``)
exist on this module exactly when the wrapped backend has them. Importing this
module imports nothing else: every hook imports what it needs when it runs.
"""

from __future__ import annotations

from rocm_build_backend._version import __version__

__all__ = ["__version__", "build_wheel", "build_sdist"]


def _project(config_settings):  # type: ignore[no-untyped-def]
    from rocm_build_backend.build.flow import load_project

    return load_project(config_settings)


def build_sdist(sdist_directory, config_settings=None):  # type: ignore[no-untyped-def]
    """An sdist carries no GPU-specific content: the wrapped backend builds it as it is."""
    from rocm_build_backend.build.flow import reported, wrapped_backend

    with reported():
        project = _project(config_settings)
        return wrapped_backend(project).build_sdist(sdist_directory, project.forward)


def _build(hook, directory, config_settings, metadata_directory):  # type: ignore[no-untyped-def]
    import time
    from pathlib import Path

    from rocm_build_backend.build.flow import (PLAN_FILE, applied, audit_and_stamp, check_fresh, log, mark_fresh, prepare,
                        reported, show, wrapped_backend)
    from rocm_build_backend.errors import ConfigError

    with reported():
        project = _project(config_settings)
        backend = wrapped_backend(project)
        prepared = prepare(project)
        show(prepared)
        targets = [str(t) for t in prepared.plan.targets]
        if metadata_directory:
            # frontends pass the .dist-info that prepare_metadata made; our plan file is beside it
            where = Path(metadata_directory)
            decided = _read_plan(where.parent / PLAN_FILE) or _read_plan(where / PLAN_FILE)
            if decided is not None and decided.get("targets") != targets:
                raise ConfigError(
                    [f"the targets changed between preparing the metadata ({';'.join(decided['targets'])}) "
                     f"and building ({';'.join(targets)})"],
                    hint="keep the environment the same for the whole install",
                )
            if project.settings.local_version:
                metadata_directory = None  # we relabel the version ourselves, after the build
        check_fresh(prepared)
        start = time.time()
        try:
            with applied(prepared.plan):
                name = getattr(backend, hook)(directory, prepared.plan.config_settings, metadata_directory)
        finally:  # a failed compile leaves objects made for these targets: say so for the retry
            mark_fresh(prepared)
        out = audit_and_stamp(prepared, Path(directory) / name, editable=hook == "build_editable", since=start)
        log(f"built {out.name}")
        return out.name


def _read_plan(path):  # type: ignore[no-untyped-def]
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):  # type: ignore[no-untyped-def]
    return _build("build_wheel", wheel_directory, config_settings, metadata_directory)


def _build_editable(wheel_directory, config_settings=None, metadata_directory=None):  # type: ignore[no-untyped-def]
    return _build("build_editable", wheel_directory, config_settings, metadata_directory)


def _get_requires(hook):  # type: ignore[no-untyped-def]
    def get_requires(config_settings=None):  # type: ignore[no-untyped-def]
        from rocm_build_backend.build.flow import reported, wrapped_backend
        from rocm_build_backend.errors import BackendUnavailableError

        with reported():
            project = _project(config_settings)
            try:
                backend = wrapped_backend(project)
            except BackendUnavailableError as exc:
                if getattr(exc, "distribution", None):  # not installed yet: ask the frontend for it
                    return [exc.distribution]
                raise
            return list(getattr(backend, hook)(project.forward))

    get_requires.__name__ = hook
    return get_requires


def _prepare_metadata(hook):  # type: ignore[no-untyped-def]
    def prepare_metadata(metadata_directory, config_settings=None):  # type: ignore[no-untyped-def]
        import json
        from pathlib import Path

        from rocm_build_backend.build.flow import PLAN_FILE, applied, prepare, reported, wrapped_backend

        with reported():
            project = _project(config_settings)
            backend = wrapped_backend(project)
            prepared = prepare(project, check_compiler=False)
            with applied(prepared.plan):
                name = getattr(backend, hook)(metadata_directory, prepared.plan.config_settings)
            if project.settings.local_version:
                from rocm_build_backend.wheel.stamp import local_version, rewrite_metadata_dir

                version = name.removesuffix(".dist-info").rsplit("-", 1)[1]
                new = local_version(version, prepared.plan.targets)
                name = rewrite_metadata_dir(Path(metadata_directory) / name, new)
            targets = [str(t) for t in prepared.plan.targets]
            (Path(metadata_directory) / PLAN_FILE).write_text(json.dumps({"targets": targets}), encoding="utf-8")
            return name

    prepare_metadata.__name__ = hook
    return prepare_metadata


_OPTIONAL = {
    "get_requires_for_build_wheel": lambda: _get_requires("get_requires_for_build_wheel"),
    "get_requires_for_build_sdist": lambda: _get_requires("get_requires_for_build_sdist"),
    "get_requires_for_build_editable": lambda: _get_requires("get_requires_for_build_editable"),
    "prepare_metadata_for_build_wheel": lambda: _prepare_metadata("prepare_metadata_for_build_wheel"),
    "prepare_metadata_for_build_editable": lambda: _prepare_metadata("prepare_metadata_for_build_editable"),
    "build_editable": lambda: _build_editable,
}


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    """Optional hooks exist exactly when the wrapped backend has them (frontends use hasattr)."""
    if name not in _OPTIONAL:
        raise AttributeError(name)
    from rocm_build_backend.build.flow import wrapped_backend
    from rocm_build_backend.errors import RocmBuildBackendError

    try:
        has = hasattr(wrapped_backend(_project(None)), name)
    except RocmBuildBackendError as exc:
        # a wrapped backend that is not installed yet: get_requires_* asks the frontend for it;
        # anything else, build_wheel reports properly
        has = name.startswith("get_requires_") and bool(getattr(exc, "distribution", None))
    if not has:
        raise AttributeError(f"the wrapped build backend has no {name}")
    return _OPTIONAL[name]()


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_OPTIONAL))
