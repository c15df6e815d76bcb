"""The index's state file, ``OUT/.rocm-build-backend-index.json``: what earlier runs wrote.

It records, per wheel, the facts read from it (so an unchanged wheel is not read again), the
pages of each index and the files hosted in OUT (and which index links to which); a later run
removes what it no longer produces, and only that. ``remove_owned`` removes one such path
relative to OUT; ``locked`` makes runs into one folder take turns.

A state file is trusted only when every path it names is one this index could have written
(a page, a hosted wheel, ``.metadata`` or variants JSON file) inside the output folder; otherwise it is damaged
and set aside. It removes only inside the output folder; it decides nothing about pages or plans.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rocm_build_backend.wheel.index.files import FILES_DIR, inside

STATE_NAME = ".rocm-build-backend-index.json"
STATE_VERSION = 1
MAX_STATE = 256 << 20  # a state file for some hundred thousand wheels


def empty_state() -> dict[str, Any]:
    """A state that says this index has written nothing yet."""
    return {"version": STATE_VERSION, "wheels": {}, "indexes": {}, "hosted": []}


def owned_path(out_dir: Path, rel: object, suffixes: tuple[str, ...]) -> Path | None:
    """``out_dir/rel`` when ``rel`` is a path this index could have written; None otherwise.

    It must be a relative POSIX path without ``.``/``..`` parts, end with one of ``suffixes``,
    and resolve (through any symlink on the way) inside ``out_dir``.
    """
    if not isinstance(rel, str) or not rel.endswith(suffixes) or "\\" in rel or "\0" in rel:
        return None
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return None
    path = out_dir / rel
    try:
        real_out = os.path.realpath(out_dir)
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    if os.path.commonpath([real_out, real]) != real_out or real == real_out:
        return None
    return path


_PAGE_SUFFIXES = ("/index.html", "/index.json")
_HOSTED_SUFFIXES = (".whl", ".whl.metadata", "-variants.json")


def hosted_path(out_dir: Path, rel: object) -> Path | None:
    """``owned_path`` for a hosted file: a wheel copy under ``files/`` (never a wheel elsewhere,
    such as one served in place), or a ``.whl.metadata`` file."""
    if isinstance(rel, str) and rel.endswith(".whl") and not rel.startswith(FILES_DIR + "/"):
        return None
    return owned_path(out_dir, rel, _HOSTED_SUFFIXES)


def _str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _record_problem(fn: object, rec: object) -> str | None:
    """What makes one wheel's record unusable; None when its fields have the types we read."""
    if not isinstance(fn, str) or not isinstance(rec, dict):
        return f"the record of {fn!r} is not an object"
    for key, kind in (("sha256", str), ("metadata_sha256", str), ("size", int), ("mtime_ns", int)):
        if not isinstance(rec.get(key), kind):
            return f"the record of {fn} has no {key}"
    for key in ("name", "version", "requires_python"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            return f"the record of {fn} has a {key} that is not a string"
    files = rec.get("files", [])
    if not isinstance(files, list) or not all(
        isinstance(f, list) and len(f) in (4, 6) and isinstance(f[0], str) and all(_str_list(x) for x in f[1:4])
        and all(x is None or isinstance(x, list) for x in f[4:])
        for f in files
    ):
        return f"the record of {fn} has a malformed files list"
    if not _str_list(rec.get("problems", [])):
        return f"the record of {fn} has a malformed problems list"
    if "variant" in rec and not (isinstance(rec["variant"], dict) and isinstance(rec["variant"].get("variants"), dict)):
        return f"the record of {fn} has a malformed variant"
    return None


def state_problem(state: dict[str, Any], out_dir: Path) -> str | None:
    """Why a loaded state cannot be trusted (a path outside OUT, a wrong type); None when fine."""
    if not isinstance(state.get("wheels"), dict) or not isinstance(state.get("indexes"), dict):
        return "its wheels or indexes are not objects"
    for fn, rec in state["wheels"].items():
        why = _record_problem(fn, rec)
        if why:
            return why
    for name, index in state["indexes"].items():
        if not isinstance(index, dict) or not _str_list(index.get("pages", [])) or not _str_list(
                index.get("wheels", [])):
            return f"the index {name!r} has no list of pages and wheels"
        for rel in index.get("pages", []):
            if owned_path(out_dir, rel, _PAGE_SUFFIXES) is None:
                return f"it lists {rel!r}, which is not a page inside the output folder"
        if "hosted" in index and not _str_list(index["hosted"]):
            return f"the index {name!r} has no list of hosted files"
        for rel in index.get("hosted", []):
            if hosted_path(out_dir, rel) is None:
                return f"it lists {rel!r}, which is not a hosted wheel or .metadata file inside the output folder"
    if not _str_list(state.get("hosted")):
        return "its hosted files are not a list of paths"
    for rel in state["hosted"]:
        if hosted_path(out_dir, rel) is None:
            return f"it lists {rel!r}, which is not a hosted wheel or .metadata file inside the output folder"
    return None


def load_state(path: Path) -> tuple[dict[str, Any], str | None]:
    """The state file's contents, and why it was set aside when it is damaged.

    A missing file is an empty state; a damaged one (not JSON, another version, a path outside
    the output folder, a value of the wrong type) is an empty state and a reason: the run then
    rebuilds the state from the folder and removes nothing the old file listed.
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_STATE + 1)
    except FileNotFoundError:
        return empty_state(), None
    except OSError as exc:
        return empty_state(), f"it cannot be read ({exc.strerror or exc})"
    if len(raw) > MAX_STATE:
        return empty_state(), f"it is larger than {MAX_STATE} bytes"
    try:
        state = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return empty_state(), "it is not valid JSON"
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        return empty_state(), f"it is not a version {STATE_VERSION} state"
    state.setdefault("wheels", {})
    state.setdefault("indexes", {})
    state.setdefault("hosted", [])
    why = state_problem(state, path.parent)
    if why:
        return empty_state(), why
    return state, None


def remove_owned(out_dir: Path, rel: str) -> str | None:
    """Remove ``out_dir/rel`` and the folders it leaves empty (up to ``out_dir``).

    ``rel`` must pass ``owned_path`` (checked again here, just before the removal). Returns
    None when it was removed, ``""`` when there was nothing to remove, else a warning.
    """
    path = owned_path(out_dir, rel, _PAGE_SUFFIXES) or hosted_path(out_dir, rel)
    if path is None and _STAGE.match(rel.removeprefix(FILES_DIR + "/")) and rel.count("/") == 1:
        path = owned_path(out_dir, rel, (".tmp",))
    if path is None:
        return ""
    try:
        path.unlink()
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"could not remove {rel}: {exc.strerror or exc}"
    parent = path.parent
    while parent != out_dir and inside(parent, out_dir):
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent
    return None


LOCK_NAME = ".rocm-build-backend-index.lock"


@contextmanager
def locked(out_dir: Path) -> Iterator[None]:
    """Hold OUT's lock file for the length of a run: runs into one folder take turns.

    ``flock`` on ``OUT/.rocm-build-backend-index.lock`` (created once, never removed: removing a
    lock file lets two runs hold two different files). Without ``fcntl`` (Windows) runs are
    not serialised; each still writes every file atomically.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    fd = os.open(out_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


_STAGE = re.compile(r"^\..+\.whl\.(\d+)\.\d+\.tmp$")
STAGE_AGE = 600  # seconds a staging copy must have been left alone before it counts as abandoned


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True  # exists (someone else's), or cannot tell: keep the file
    return True


def abandoned_stages(out_dir: Path) -> list[str]:
    """Staging copies in OUT/files that a killed run left: our own name pattern
    (``.<wheel>.<pid>.<thread>.tmp``), a process that is gone, untouched for ``STAGE_AGE``."""
    files = out_dir / FILES_DIR
    try:
        entries = list(os.scandir(files))
    except OSError:
        return []
    now, out = time.time(), []
    for entry in entries:
        m = _STAGE.match(entry.name)
        try:
            if not m or not entry.is_file(follow_symlinks=False) or now - entry.stat().st_mtime < STAGE_AGE:
                continue
        except OSError:
            continue
        if not _pid_alive(int(m.group(1))):
            out.append(f"{FILES_DIR}/{entry.name}")
    return sorted(out)
