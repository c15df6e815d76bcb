"""What a project's ``setup.py`` imports that an isolated build environment will not have.

An isolated build (``pip install .``, ``python -m build``, ``uv build``) installs only
``[build-system] requires``; a ``setup.py`` that imports ``torch`` (a torch extension) fails there
with ``ModuleNotFoundError``. ``configure`` reads the imports with ``ast`` (nothing runs), adds
the requirements it knows (``BUILD_REQUIREMENTS``) and warns about the rest.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from rocm_build_backend.files import read_regular

# imported module -> the build requirement configure adds for it
BUILD_REQUIREMENTS = {"torch": "torch"}
# what every setuptools build has, or the shim brings: setuptools 71 and later put their vendored
# packaging and wheel on sys.path when imported
_PROVIDED = {"setuptools", "distutils", "pkg_resources", "wheel", "packaging", "rocm_build_backend"}
_MAX_SETUP_PY = 1 << 20


def imported_modules(setup_py: Path) -> list[str]:
    """The top-level modules ``setup_py`` imports, in order, once each; [] when it cannot be read."""
    try:
        tree = ast.parse(read_regular(setup_py, _MAX_SETUP_PY).decode("utf-8", "replace"))
    except (OSError, SyntaxError, ValueError, RecursionError):
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        else:
            continue
        found += [n.split(".")[0] for n in names if n.split(".")[0] not in found]
    return found


def _names(requires: Iterable[object]) -> set[str]:
    out: set[str] = set()
    for item in requires:
        try:
            out.add(canonicalize_name(Requirement(str(item)).name))
        except InvalidRequirement:
            continue
    return out


def missing(project: Path, requires: Iterable[object]) -> tuple[list[str], list[str]]:
    """(requirements to add, modules to warn about) for ``project``'s ``setup.py`` against ``requires``.

    A module of the project itself (a file or folder beside ``setup.py``, or one folder down,
    where a ``setup.py`` that extends ``sys.path`` finds it: CuPy's ``install/cupy_builder``) and
    the standard library are not missing."""
    setup_py = project / "setup.py"
    if not setup_py.is_file():
        return [], []
    have = _names(requires)
    add, warn = [], []
    for module in imported_modules(setup_py):
        if module in sys.stdlib_module_names or module in _PROVIDED:
            continue
        if any(any(project.glob(pattern)) for pattern in (module, f"{module}.py", f"*/{module}", f"*/{module}.py")):
            continue
        requirement = BUILD_REQUIREMENTS.get(module)
        if requirement is not None:
            if canonicalize_name(requirement) not in have:
                add.append(requirement)
        elif canonicalize_name(module) not in have:
            warn.append(module)
    return add, warn
