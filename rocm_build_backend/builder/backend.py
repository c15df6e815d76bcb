"""Load the wrapped build backend the way pyproject-hooks does, and list its hooks."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

from rocm_build_backend.errors import BackendUnavailableError

MANDATORY = ("build_wheel", "build_sdist")
OPTIONAL = (
    "get_requires_for_build_wheel",
    "get_requires_for_build_sdist",
    "get_requires_for_build_editable",
    "prepare_metadata_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "build_editable",
)

# Where a backend's module usually comes from, for the hint.
_DISTRIBUTIONS = {
    "setuptools": "setuptools",
    "scikit_build_core": "scikit-build-core",
    "hatchling": "hatchling",
    "flit_core": "flit_core",
    "mesonpy": "meson-python",
    "pdm": "pdm-backend",
    "poetry": "poetry-core",
    "maturin": "maturin",
}


class BackendNotInstalledError(BackendUnavailableError):
    """The wrapped backend's module cannot be imported; ``distribution`` would bring it."""

    def __init__(self, message: str, *, hint: str | None = None, distribution: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.distribution = distribution


def _inside(path: Path, folders: Sequence[Path]) -> bool:
    return any(path == f or f in path.parents for f in folders)


def load_backend(spec: str, backend_path: Sequence[str] = (), source_dir: Path | None = None) -> Any:
    """Import ``module:object``; ``backend_path`` folders (inside the project) go first on sys.path."""
    source_dir = Path(source_dir or os.getcwd()).resolve()
    folders = []
    for entry in backend_path:
        folder = (source_dir / entry).resolve()
        if not _inside(folder, [source_dir]):
            raise BackendUnavailableError(
                f"backend-path entry '{entry}' is outside the project",
                hint="backend-path folders must be inside the project's folder (PEP 517)",
            )
        folders.append(folder)
    for folder in reversed(folders):
        sys.path.insert(0, str(folder))
    module_name, _, obj_path = spec.partition(":")
    top = module_name.split(".")[0]
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        dist = _DISTRIBUTIONS.get(top, top.replace("_", "-"))
        raise BackendNotInstalledError(
            f"cannot import the wrapped build backend '{spec}' ({exc})",
            hint=f'add "{dist}" to [build-system] requires, and with --no-build-isolation '
            f"install it first: pip install {dist}",
            distribution=dist if not folders else None,  # what would bring it, for get_requires
        ) from None
    for attr in filter(None, obj_path.split(".")):
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            raise BackendUnavailableError(
                f"the wrapped build backend '{spec}' has no attribute '{attr}'",
                hint="backend is 'module:object', e.g. 'setuptools.build_meta:__legacy__'",
            ) from None
    if folders:
        where = getattr(obj if isinstance(obj, ModuleType) else sys.modules.get(module_name), "__file__", None)
        if where and not _inside(Path(where).resolve(), folders):
            raise BackendUnavailableError(
                f"the wrapped build backend '{spec}' was loaded from {where}, not from backend-path",
                hint="rename the in-tree backend module so it does not clash with an installed one",
            )
    missing = [h for h in MANDATORY if not hasattr(obj, h)]
    if missing:
        raise BackendUnavailableError(
            f"'{spec}' is not a build backend: it has no {', '.join(missing)}",
            hint="backend names a PEP 517 backend, e.g. 'setuptools.build_meta', 'scikit_build_core.build'",
        )
    return obj


def backend_kind(spec: str) -> str:
    """A short name for the plan: setuptools, scikit-build-core, hatchling, or other."""
    top = spec.partition(":")[0].split(".")[0]
    if top == "scikit_build_core":
        # also scikit_build_core.setuptools.build_meta: it reads the same cmake.define.* settings
        return "scikit-build-core"
    return {"setuptools": "setuptools", "hatchling": "hatchling", "mesonpy": "meson-python"}.get(top, "other")
