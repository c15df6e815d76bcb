"""``build_index(..., split=True)``: fat wheels are split per target on the way in.

A wheel in WHEEL_DIR whose device code is for several targets (``split.units_for``) is split
with ``split.split_wheel`` into ``OUT/.split/<name>-<size>-<mtime_ns>/``, and those wheels
(``1.0+gfx942``, ...) are indexed instead of the fat one; a wheel with code for one target, or
none, is indexed as it is. The folder is named after the fat wheel's size and time, so a later
run reuses it when the wheel has not changed; it is written under a temporary name
(``.tmp-<pid>-<random>``, removed by a later run once its process is gone) and moved into place
whole, with a marker file listing what it holds. A wheel whose file name holds characters
outside ``[A-Za-z0-9_.+!-]`` is not split (skipped with the reason): its folder could not be
told from a folder of someone else's. A split folder no wheel maps to any more is removed at the
end of a run (after the pages), only the files its marker lists (a
folder without a readable marker is not one this index made and is left alone). Splitting goes through
``thin``, so its inflating is bounded by the same budget. A full or read-only output stops the
run with one error (no other wheel could be split either), instead of skipping every wheel.

It renders no page; ``index.py`` strings it into the run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from rocm_build_backend.binary.audit import audit_wheel
from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.files import OutputError, leftover_pattern, remove_leftovers, temp_folder
from rocm_build_backend.wheel.index.files import WRITE_ERRORS, write_failed
from rocm_build_backend.wheel.index.variants import variant_label
from rocm_build_backend.wheel.thin.split import split_wheel, units_for

SPLIT_DIR = ".split"
MARKER = ".rocm-build-backend-split.json"
_NAME = re.compile(r"[A-Za-z0-9_.+!-]+-[0-9]+-[0-9]+")
_SAFE_NAME = re.compile(r"[A-Za-z0-9_.+!-]+\.whl")
SPLIT_WORK = ".tmp-"  # files.temp_folder's prefix for a split in progress


def _units(path: Path) -> int:
    """How many split wheels ``path`` would give (0: no device code; 1 for a variant wheel,
    which is indexed as it is)."""
    if variant_label(path.name)[1] is not None:
        return 1

    return len(units_for(list(audit_wheel(path).targets), "target"))


def _read_marker(folder: Path) -> list[str] | None:
    try:
        names = json.loads((folder / MARKER).read_text(encoding="utf-8"))["wheels"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(names, list) or not all(
        isinstance(n, str) and "/" not in n and n.endswith(".whl") for n in names
    ):
        return None
    return names


def _split_one(path: Path, final: Path) -> list[str]:
    """Split ``path`` into ``final`` (written under a temporary name, moved in whole)."""
    work = temp_folder(final.parent, SPLIT_WORK)
    try:
        result = split_wheel(path, work)
        names = sorted(r.output.name for r in result.wheels)
        (work / MARKER).write_text(json.dumps({"source": path.name, "wheels": names}), encoding="utf-8")
        os.replace(work, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return names


def split_sources(
    wheel_dir: Path, out_dir: Path, skipped: dict[str, str], known: Callable[[str, os.stat_result], bool] | None = None
) -> tuple[dict[str, Path], set[str]]:
    """File name -> path of every wheel to index, fat wheels replaced by their split wheels;
    and the split folders in use (for ``prune``). A fat wheel that cannot be split is skipped.
    ``known(name, stat)``: whether the index already holds that very file as it is (then it is
    not opened to count its targets again)."""
    try:
        listing = sorted(p for p in wheel_dir.iterdir() if p.name.endswith(".whl") and p.is_file())
    except OSError as exc:
        raise RocmBuildBackendError(f"cannot list {wheel_dir}: {exc.strerror or exc}") from None
    top = out_dir / SPLIT_DIR
    sources: dict[str, Path] = {}
    used: set[str] = set()
    for path in listing:
        if not _SAFE_NAME.fullmatch(path.name):
            skipped[path.name] = "cannot be split: its file name holds characters outside [A-Za-z0-9_.+!-]"
            continue
        try:
            st = path.stat()
            folder = top / f"{path.name[: -len('.whl')]}-{st.st_size}-{st.st_mtime_ns}"
            names = _read_marker(folder)
            if names is None:
                if (known is not None and known(path.name, st)) or _units(path) < 2:
                    sources[path.name] = path
                    continue
                top.mkdir(exist_ok=True)
                names = _split_one(path, folder)
        except OutputError:  # the output is full or read-only: no other wheel can be split either
            raise
        except RocmBuildBackendError as exc:
            skipped[path.name] = f"cannot be split: {exc.message}"
            continue
        except OSError as exc:
            if exc.errno in WRITE_ERRORS:
                raise write_failed(exc, out_dir) from None
            skipped[path.name] = f"cannot be split: {exc.strerror or exc}"
            continue
        used.add(folder.name)
        for name in names:
            sources[name] = folder / name
    return sources, used


def prune(out_dir: Path, used: set[str]) -> list[str]:
    """Remove the split folders no wheel maps to any more (only what their markers list)."""
    top = out_dir / SPLIT_DIR
    removed = [f"{SPLIT_DIR}/{name}" for name in remove_leftovers(top, leftover_pattern(SPLIT_WORK, ""))]
    try:
        folders = [p for p in top.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return removed
    for folder in sorted(folders):
        if folder.name in used or not _NAME.fullmatch(folder.name):
            continue
        names = _read_marker(folder)
        if names is None:
            continue
        for name in [*names, *(n + ".metadata" for n in names), MARKER]:
            try:
                (folder / name).unlink()
                if name != MARKER:
                    removed.append(f"{SPLIT_DIR}/{folder.name}/{name}")
            except FileNotFoundError:
                pass
            except OSError:
                break
        try:
            folder.rmdir()
        except OSError:
            pass
    return removed
