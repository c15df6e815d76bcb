"""What the index may remove, how runs take turns, and the earlier JSON state file.

``remove_owned`` removes one path relative to OUT, and only a path this index could have
written (a page, a hosted wheel under ``files/``, a ``.metadata`` or variants JSON file) inside
the output folder; ``locked`` makes runs into one folder take turns.

The earlier state, ``OUT/.rocm-build-backend-index.json`` (one JSON file rewritten whole by
every run), is read once by ``load_state`` and moved into the database by ``migrate``
(``index_store.py``). It is trusted only when every path it names is one this index could have
written inside the output folder; otherwise it is damaged and set aside. It removes only inside
the output folder; it decides nothing about pages or plans.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.files import OutputError, check_output_name, kind_of
from rocm_build_backend.gpu.targets import parse_target
from rocm_build_backend.wheel.index.files import FILES_DIR, HASH_DIR, inside
from rocm_build_backend.wheel.index.pages import normalize
from rocm_build_backend.wheel.index.plan import families
from rocm_build_backend.wheel.index.store import Store, bucket_of

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
    None when it was removed, ``""`` when there was nothing to remove, else a warning (a path
    that is not one this index writes is left alone, with a warning).
    """
    path = owned_path(out_dir, rel, _PAGE_SUFFIXES) or hosted_path(out_dir, rel)
    if path is None:
        return f"the state names {rel!r}, which is not a file this index writes: left alone"
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


def _open_lock(path: Path) -> int:
    """The lock file, opened (created) as a regular file only: a symlink, FIFO, device or
    folder in its place is one OutputError and is left as it is (never followed, never
    waited on)."""
    hint = "remove it, or give another output folder"
    check_output_name(path)
    flags = (os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
             | getattr(os, "O_NOCTTY", 0))
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputError(f"{path} exists and is a symlink; it is not replaced", hint=hint) from None
        raise  # read-only or full: the caller's one error for a failed write
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OutputError(f"{path} exists and is {kind_of(st.st_mode)}; it is not replaced", hint=hint)
    return fd


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
    fd = _open_lock(out_dir / LOCK_NAME)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _index_devices(name: str) -> list[str] | None:
    """The devices an index of the earlier state was written for, from its name."""

    known = families()
    if name in known:
        return list(known[name])
    try:
        return [str(parse_target(name.replace("_", ":")))]
    except RocmBuildBackendError:
        return None


def _hosted_sha(rel: str, wheels: dict[str, Any]) -> tuple[str, str]:
    """(file name, sha256) a hosted path of the earlier state stands for; sha256 "" when unknown."""
    name = rel.rsplit("/", 1)[-1]
    fn = name[: -len(".metadata")] if name.endswith(".metadata") else name
    rec = wheels.get(fn)
    folder = rel.rsplit("/", 2)[-2] if rel.count("/") >= 2 else ""
    if isinstance(rec, dict) and (len(folder) != HASH_DIR or str(rec["sha256"]).startswith(folder)):
        return fn, str(rec["sha256"])
    return fn, ""


def migrate(store: Store, state: dict[str, Any], variants: bool) -> None:
    """Move an earlier JSON state into the database (inside the caller's transaction).

    Wheel records keep their facts (a wheel whose size and time still match is not read
    again); each index becomes one the database maintains, rebuilt in full by this run; every
    hosted file is checked once more (removed when no page links it), and every page the old
    state listed is removed unless this run writes it again.
    """

    wheels: dict[str, Any] = state["wheels"]
    for fn, rec in wheels.items():
        if rec.get("name") is None or ("variant" in rec and not variants):
            continue
        store.put_wheel(fn, normalize(rec["name"]), rec, f"legacy:{rec['size']}:{rec['mtime_ns']}", False,
                        bucket_of(fn))
    pages: list[str] = []
    kept: set[str] = set()
    other: set[str] = set()  # linked by an index this output no longer maintains: left as it is
    for name, index in state["indexes"].items():
        devices = [] if name == "variants" else _index_devices(name)
        if devices is None or (name == "variants" and not variants):
            other |= set(index.get("hosted", []))
            continue
        store.set_index(name, devices, True, False)
        pages += index.get("pages", [])
        kept |= set(index.get("hosted", []))
    if all("hosted" in index for index in state["indexes"].values()):  # else: what is linked is not known
        hosted = (kept | set(state.get("hosted", []))) - other
        store.add_hosted((rel, *_hosted_sha(rel, wheels)) for rel in sorted(hosted))
    store.conn.executemany("INSERT OR IGNORE INTO legacy_pages(path) VALUES(?)", ((p,) for p in pages))
