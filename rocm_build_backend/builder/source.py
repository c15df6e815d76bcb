"""Step 1 of a build: the project being built, its settings and its wrapped backend.

Holds ``Project`` (the source folder, its parsed ``pyproject.toml``, our settings and the
config settings forwarded to the wrapped backend), how it is loaded, and the one cache of
wrapped backends per process. Reads files; sets nothing, builds nothing.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from rocm_build_backend.builder.backend import backend_kind, load_backend
from rocm_build_backend.builder.projectname import project_name
from rocm_build_backend.builder.settings import Settings, load_settings, split_config_settings
from rocm_build_backend.errors import ConfigError
from rocm_build_backend.files import read_regular

ConfigSettings = Mapping[str, Any]
_MAX_PYPROJECT = 4 << 20  # bytes: a pyproject.toml is a small text file


@dataclass
class Project:
    source_dir: Path
    pyproject: dict[str, Any]
    settings: Settings
    forward: dict[str, Any]  # config settings for the wrapped backend, ours removed

    @property
    def dist_name(self) -> str | None:
        return project_name(self.source_dir, self.pyproject)


def read_pyproject(source_dir: Path) -> dict[str, Any]:
    path = source_dir / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        data = read_regular(path, _MAX_PYPROJECT)  # a regular file, bounded, never blocking
    except OSError as exc:
        if str(exc.strerror or "").startswith("larger than"):
            raise ConfigError(
                [f"cannot read {path.name}: larger than {_MAX_PYPROJECT >> 20} MiB"],
                hint="a pyproject.toml is a small text file",
            ) from None
        raise ConfigError([f"cannot read {path.name}: {exc.strerror}"], hint="make it a readable file") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [f"cannot read {path.name}: it is not UTF-8 (byte {exc.start})"],
            hint="TOML files are UTF-8: save it as UTF-8",
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"cannot read {path.name}: {exc}"], hint="fix the TOML syntax") from None
    except RecursionError:
        raise ConfigError(
            [f"cannot read {path.name}: its arrays or tables are nested too deeply"],
            hint="a pyproject.toml nests a few levels; fix the file",
        ) from None


def load_project(
    config_settings: ConfigSettings | None, env: Mapping[str, str] | None = None, source_dir: Path | None = None
) -> Project:
    source_dir = Path(source_dir or os.getcwd())
    pyproject = read_pyproject(source_dir)
    settings = load_settings(pyproject, config_settings, os.environ if env is None else env)
    _, forward = split_config_settings(config_settings)
    return Project(source_dir, pyproject, settings, forward)


def backend_build_dirs(project: Project) -> list[Path]:
    """The wrapped backend's persistent build folders beyond build/ and _skbuild/: scikit-build-core's
    build-dir, only when that is the wrapped backend (no other backend reads it)."""
    if backend_kind(project.settings.backend) != "scikit-build-core":
        return []
    given = (
        project.forward.get("build-dir")
        or project.forward.get("skbuild.build-dir")
        or os.environ.get("SKBUILD_BUILD_DIR")
        or ((project.pyproject.get("tool") or {}).get("scikit-build") or {}).get("build-dir")
    )
    if isinstance(given, str) and given and "{" not in given:
        return [project.source_dir / given]
    return []


_BACKENDS: dict[tuple[str, tuple[str, ...]], Any] = {}


def wrapped_backend(project: Project) -> Any:
    """The wrapped backend's module (or object), loaded once per process."""
    key = (project.settings.backend, tuple(project.settings.backend_path))
    if key not in _BACKENDS:
        _BACKENDS[key] = load_backend(*key, source_dir=project.source_dir)
    return _BACKENDS[key]
