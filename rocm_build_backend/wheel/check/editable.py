"""The files an editable install (PEP 660) imports from outside site-packages, for ``check --env``.

An editable install's RECORD lists a few small files that point at the sources; the code that
runs (a HIP extension built in place, say) is where they point. Three pointers are read:

- setuptools' finder ``__editable___<name>_<version>_finder.py``: its ``MAPPING`` literal maps
  each top-level package to its folder (or module file);
- a ``.pth`` file's path entries (lines that are not ``import`` lines) that lie outside
  site-packages: folders put on ``sys.path`` (setuptools' src layouts, hatchling, flit, pdm);
- ``direct_url.json`` with ``dir_info.editable`` (PEP 610): the project folder, used only when
  neither of the above names a place.

What Python can import from those places is followed: the files of a package folder and of the
folders below it whose names are identifiers (so ``build/lib.linux-x86_64-cpython-311/`` and
other copies that are not importable are left out), and, for a ``sys.path`` folder, the files in
it and its importable folders. Symbolic links to folders are not entered; the walk stops after
``MAX_FILES`` files. Import hooks that map modules elsewhere (meson-python's, scikit-build-core's
redirects of build-folder files) are not interpreted. The pointers come from RECORD entries
inside site-packages only (the caller drops the others) and are read as bounded regular files.
Reads; never writes or imports anything.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Sequence
from urllib.parse import unquote, urlparse

from rocm_build_backend.files import read_regular

MAX_FILES = 100_000
_MAX_POINTER = 1 << 20  # a finder, .pth or direct_url.json larger than this is not one


def _read(path: Path) -> str | None:
    """A pointer's text: a regular file of at most ``_MAX_POINTER`` bytes (``files.read_regular``:
    a FIFO or a link to ``/dev/zero`` is not read), else None."""
    try:
        return read_regular(path, _MAX_POINTER).decode("utf-8", errors="replace")
    except OSError:
        return None


def finder_mapping(path: Path) -> dict[str, str]:
    """The ``MAPPING`` literal of a setuptools editable finder (``{}`` when there is none)."""
    text = _read(path)
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError):
        return {}
    for node in tree.body:
        target = (
            node.target
            if isinstance(node, ast.AnnAssign)
            else (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        )
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id == "MAPPING" and value is not None:
            try:
                found = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                return {}
            if isinstance(found, dict):
                return {str(k): str(v) for k, v in found.items() if isinstance(v, str)}
    return {}


def pth_paths(path: Path, site: Path) -> list[Path]:
    """The folders a ``.pth`` file puts on ``sys.path`` that lie outside ``site``."""
    out = []
    for line in (_read(path) or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith(("import ", "import\t")):
            continue
        folder = (site / line).resolve() if not os.path.isabs(line) else Path(line).resolve()
        if folder.is_dir() and site.resolve() not in (folder, *folder.parents) and folder not in out:
            out.append(folder)
    return out


def editable_project(dist_info: Path) -> Path | None:
    """The project folder ``direct_url.json`` names for an editable install, or None."""
    text = _read(dist_info / "direct_url.json")
    try:
        data = json.loads(text or "null")
    except ValueError:
        return None
    if not isinstance(data, dict) or not (data.get("dir_info") or {}).get("editable"):
        return None
    url = urlparse(str(data.get("url", "")))
    folder = Path(unquote(url.path)) if url.scheme == "file" else None
    return folder if folder is not None and folder.is_dir() else None


def _importable(folder: Path, budget: list[int]) -> list[str]:
    """Files Python may import from ``folder`` (a package folder, or a sys.path folder: the
    files in it, and those of the folders below it whose names are identifiers)."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d.isidentifier() and d != "__pycache__" and not os.path.islink(os.path.join(dirpath, d))
        )
        for name in sorted(filenames):
            if budget[0] <= 0:
                return out
            budget[0] -= 1
            out.append(os.path.join(dirpath, name))
    return out


def editable_files(location: Path, dist_info: Path, record: Sequence[str]) -> list[str]:
    """Absolute paths of the files an editable install's pointers lead to ([] for a plain install)."""
    budget = [MAX_FILES]
    places: list[Path] = []  # package folders, module files, sys.path folders
    for rel in record:
        if "/" in rel.strip("/"):
            continue  # the pointers sit at the top of site-packages
        if rel.startswith("__editable__") and rel.endswith("_finder.py"):
            places += [Path(p) for p in finder_mapping(location / rel).values()]
        elif rel.endswith(".pth"):
            places += pth_paths(location / rel, location)
    if not places:
        project = editable_project(dist_info)
        if project is not None:
            places.append(project)
    out: list[str] = []
    seen: set[str] = set()
    for place in places:
        if place.is_file():
            files = [str(place)]
        elif place.is_dir():
            files = _importable(place.resolve(), budget)
        else:
            files = []
        for f in files:
            if f not in seen:
                seen.add(f)
                out.append(f)
    return out
