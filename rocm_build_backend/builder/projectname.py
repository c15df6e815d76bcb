"""A project folder's distribution name, read from its files without running anything.

The order, first found wins::

    pyproject.toml  [project] name
    PKG-INFO        Name:            (an sdist, whatever its build system)
    setup.cfg       [metadata] name
    setup.py        a literal name= in a setup(...) call, read with ``ast`` (never executed)

``project_name(source_dir, pyproject)`` returns the name, ``find_name`` also says where it came
from. Every file is read under a size budget; a file that is too large, unreadable or does not
parse gives no name rather than an error: the name only picks a profile. This module must not
import setuptools or run project code.
"""

from __future__ import annotations

import ast
import configparser
from pathlib import Path
from typing import Any, Mapping

MAX_BYTES = 2 << 20  # setup.py files of real projects are up to ~100 KiB; PKG-INFO headers far less


def _read(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_BYTES:
        return None
    return raw.decode("utf-8", errors="replace")


def _from_pyproject(pyproject: Mapping[str, Any]) -> str | None:
    project = pyproject.get("project")
    name = project.get("name") if isinstance(project, Mapping) else None
    return name.strip() or None if isinstance(name, str) else None


def name_from_pkg_info(text: str) -> str | None:
    """The ``Name:`` header of core metadata (headers end at the first empty line)."""
    for line in text.splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "name":
            return value.strip() or None
    return None


def name_from_setup_cfg(text: str) -> str | None:
    """``[metadata] name`` of a setup.cfg; None for ``attr:``/``file:`` directives."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    name = parser.get("metadata", "name", fallback="").strip()
    if not name or name.startswith(("attr:", "file:")):
        return None
    return name


def _literal(node: ast.expr, constants: Mapping[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if _is_getenv(node):  # os.getenv("TORCHVISION_PACKAGE_NAME", "torchvision"): the default
        assert isinstance(node, ast.Call)
        return _literal(node.args[1], constants)
    if isinstance(node, ast.JoinedStr):  # f"bitsandbytes": only constant parts
        parts = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
        return "".join(parts) if len(parts) == len(node.values) else None
    return None


def _is_getenv(node: ast.expr) -> bool:
    """``os.getenv(NAME, DEFAULT)`` or ``os.environ.get(NAME, DEFAULT)``."""
    if not isinstance(node, ast.Call) or len(node.args) != 2 or node.keywords:
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id == "getenv"
    if isinstance(func, ast.Attribute):
        owner = func.value
        return (func.attr == "getenv" and isinstance(owner, ast.Name) and owner.id == "os") or (
            func.attr == "get" and isinstance(owner, ast.Attribute) and owner.attr == "environ"
        )
    return False


def _is_setup_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == "setup") or (
        isinstance(func, ast.Attribute) and func.attr == "setup"
    )


def _dict_name(node: ast.expr, constants: Mapping[str, str]) -> str | None:
    """The name in ``dict(name=...)`` or ``{"name": ...}``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return next((_literal(kw.value, constants) for kw in node.keywords if kw.arg == "name"), None)
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values):
            if isinstance(key, ast.Constant) and key.value == "name":
                return _literal(value, constants)
    return None


def name_from_setup_py(text: str) -> str | None:
    """A literal ``name=`` in a ``setup(...)`` call, or one reached through a module-level
    string constant (``name=PACKAGE_NAME``, also ``os.getenv("X", "name")``: its default) or
    dict (``setup(**setup_info)``)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    constants: dict[str, str] = {}
    dicts: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            target = stmt.targets[0].id
            value = _literal(stmt.value, constants)
            if value is not None:
                constants[target] = value
            named = _dict_name(stmt.value, constants)
            if named is not None:
                dicts[target] = named
    for node in ast.walk(tree):
        if not _is_setup_call(node):
            continue
        assert isinstance(node, ast.Call)
        for kw in node.keywords:
            name = None
            if kw.arg == "name":
                name = _literal(kw.value, constants)
            elif kw.arg is None:
                name = dicts.get(kw.value.id) if isinstance(kw.value, ast.Name) else _dict_name(kw.value, constants)
            if name and name.strip():
                return name.strip()
    return None


def find_name(source_dir: Path, pyproject: Mapping[str, Any] | None = None) -> tuple[str | None, str | None]:
    """(distribution name, the file it was read from), or (None, None) when no file names it."""
    name = _from_pyproject(pyproject or {})
    if name:
        return name, "pyproject.toml"
    readers = (("PKG-INFO", name_from_pkg_info), ("setup.cfg", name_from_setup_cfg), ("setup.py", name_from_setup_py))
    for filename, reader in readers:
        path = source_dir / filename
        if path.is_file():
            text = _read(path)
            name = reader(text) if text is not None else None
            if name:
                return name, filename
    return None, None


def project_name(source_dir: Path, pyproject: Mapping[str, Any] | None = None) -> str | None:
    """The distribution name of the project in SOURCE_DIR (see the module docstring for the order)."""
    return find_name(source_dir, pyproject)[0]
