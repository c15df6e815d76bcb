"""What the index may remove, and how runs take turns.

``remove_owned`` removes one path relative to OUT, and only a path this index could have
written (a page, a hosted wheel under ``files/``, a ``.metadata`` or variants JSON file) inside
the output folder; ``locked`` makes runs into one folder take turns. It removes only inside
the output folder; it decides nothing about pages or plans.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rocm_build_backend.files import OutputError, check_output_name, kind_of
from rocm_build_backend.wheel.index.files import FILES_DIR, inside


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
    flags = (
        os.O_RDWR
        | os.O_CREAT
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_NONBLOCK", 0)
        | getattr(os, "O_NOCTTY", 0)
    )
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
