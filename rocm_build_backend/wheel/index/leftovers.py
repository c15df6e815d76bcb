"""What a killed run left in the output folder, found and removed by the next run.

Every temporary file the index writes is named ``.<name>.<pid>.<thread>.tmp`` beside its
target (``files.tmp_name``): pages, ``.metadata`` files, the state's probe; staging copies live
in ``OUT/files/.incoming/`` under the same pattern, a new index is built as a folder of that
name in OUT before it is moved into place, and ``index --split`` works in
``OUT/.split/.tmp-<pid>-*`` folders. Each run (under OUT's lock, so no other run is writing) looks at
the few places that are cheap to list: OUT itself, ``OUT/files/.incoming`` and ``OUT/.split``.
A run that finds its predecessor did not finish (the state's ``dirty`` mark) walks the whole
output folder once.

A temporary file is removed when the process named in it is gone or it is older than
``STAGE_AGE``; nothing is removed that does not have one of these names, and nothing outside
the output folder (symlinks are not followed). It writes nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from rocm_build_backend.files import leftover_pattern, pid_alive, remove_leftovers
from rocm_build_backend.wheel.index.files import FILES_DIR, INCOMING
from rocm_build_backend.wheel.index.split import SPLIT_DIR, SPLIT_WORK

TMP = re.compile(r"^\..+\.(\d+)\.\d+\.tmp$")
SPLIT_TMP = leftover_pattern(SPLIT_WORK, "")  # files.temp_folder's names for a split in progress
STAGE_AGE = 600  # seconds after which a temporary file counts as left, whoever named it


def _left(entry: os.DirEntry[str], now: float, *, tree: bool = False) -> bool:
    """Whether ``entry`` is a temporary file (``tree``: folder) of ours that a run left: its
    process is gone, or it is older than ``STAGE_AGE``."""
    m = TMP.match(entry.name)
    if not m:
        return False
    try:
        if not (entry.is_dir(follow_symlinks=False) if tree else entry.is_file(follow_symlinks=False)):
            return False
        old = now - entry.stat(follow_symlinks=False).st_mtime >= STAGE_AGE
    except OSError:
        return False
    return old or not pid_alive(int(m.group(1)))


def _sweep_dir(out_dir: Path, folder: Path, removed: list[str], now: float) -> list[os.DirEntry[str]]:
    """Remove the temporary files left in one folder; its subfolders (not symlinks) come back."""
    subdirs = []
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except OSError:
        return []
    for entry in entries:
        if _left(entry, now):
            try:
                os.unlink(entry.path)
                removed.append(os.path.relpath(entry.path, out_dir).replace(os.sep, "/"))
            except OSError:
                pass
        elif folder == out_dir and _left(entry, now, tree=True):  # a new index's tree, never moved into place
            shutil.rmtree(entry.path, ignore_errors=True)
            if not os.path.lexists(entry.path):
                removed.append(entry.name)
        else:
            try:
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(entry)
            except OSError:
                pass
    return subdirs


def _sweep_split(out_dir: Path, removed: list[str]) -> None:
    """``index --split``'s half-written folders (``OUT/.split/.tmp-<pid>-*``) of runs that are gone
    (under OUT's lock no other run is writing there)."""
    removed += [f"{SPLIT_DIR}/{name}" for name in remove_leftovers(out_dir / SPLIT_DIR, SPLIT_TMP, age=0)]


def sweep(out_dir: Path, *, everywhere: bool) -> list[str]:
    """Remove what killed runs left; the paths removed, relative to ``out_dir``.

    ``everywhere``: walk the whole output folder (after a run that did not finish), else only
    OUT, ``OUT/files``'s staging folder and ``OUT/.split``.
    """
    now = time.time()
    removed: list[str] = []
    if not everywhere:
        _sweep_dir(out_dir, out_dir, removed, now)
        _sweep_dir(out_dir, out_dir / FILES_DIR / INCOMING, removed, now)
    else:
        todo = [out_dir]
        while todo:
            folder = todo.pop()
            todo += [Path(e.path) for e in _sweep_dir(out_dir, folder, removed, now)]
    _sweep_split(out_dir, removed)
    return sorted(removed)
