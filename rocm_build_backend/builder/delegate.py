"""The hooks that only pass through to the wrapped backend: ``build_sdist``,
``get_requires_for_build_*``, whether an optional hook exists at all (``has_hook``), and
``prepare_metadata_for_build_*`` of a project that declares no GPU code (``plain_metadata``).

They need the settings and the wrapped backend, nothing of the build's steps, so the hooks
module loads this module, not ``flow.py``, for them: a frontend asking for the requirements
does not import the planner, the audit or the stamp. It decides nothing and prints only
through ``log.reported``.
"""

from __future__ import annotations

from typing import Mapping

from rocm_build_backend.builder.backend import BackendNotInstalledError
from rocm_build_backend.builder.log import reported
from rocm_build_backend.builder.source import ConfigSettings, load_project, wrapped_backend
from rocm_build_backend.errors import RocmBuildBackendError

__all__ = ["build_sdist", "get_requires", "has_hook", "plain_metadata"]


def build_sdist(sdist_directory: str, config_settings: ConfigSettings | None) -> str:
    """An sdist carries no GPU-specific content: the wrapped backend builds it as it is."""
    with reported():
        project = load_project(config_settings)
        return str(wrapped_backend(project).build_sdist(sdist_directory, project.forward))


def plain_metadata(hook: str, metadata_directory: str, config_settings: ConfigSettings | None) -> str | None:
    """prepare_metadata_for_build_*: the wrapped backend's own, with its own config settings, for a
    project that declares no GPU code (``verify = "off"``) and no target label
    (``local-version = false``): its metadata does not depend on the targets, so no plan is made
    and no plan file written. None for any other project (``flow.prepare_metadata`` then)."""
    with reported():
        project = load_project(config_settings)
        if project.settings.verify != "off" or project.settings.local_version:
            return None
        return str(getattr(wrapped_backend(project), hook)(metadata_directory, project.forward))


def get_requires(hook: str, config_settings: ConfigSettings | None) -> list[str]:
    """get_requires_for_build_*: the wrapped backend's answer, or the backend itself when missing."""
    with reported():
        project = load_project(config_settings)
        try:
            backend = wrapped_backend(project)
        except BackendNotInstalledError as exc:
            if exc.distribution:  # not installed yet: ask the frontend for it
                return [exc.distribution]
            raise
        return list(getattr(backend, hook)(project.forward))


def has_hook(name: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether the shim offers the optional hook ``name``: exactly when the wrapped backend has it."""
    try:
        return hasattr(wrapped_backend(load_project(None, env)), name)
    except BackendNotInstalledError as exc:
        # not installed yet: get_requires_* asks the frontend for it
        return name.startswith("get_requires_") and bool(exc.distribution)
    except RocmBuildBackendError:  # anything else, build_wheel reports properly
        return False
