"""Files that someone else may have put where a command reads or writes: the rules, once.

- Reading: ``read_regular`` opens without blocking and reads a regular file only (a FIFO, a
  symlink to ``/dev/zero``, a folder are refused, not waited on or read forever), up to a byte
  limit. Every file the commands read that is not a wheel member goes through it (environment
  metadata, ``pyvenv.cfg``, ``pyproject.toml``, requirement files, sysfs via ``gpu/files.py``).
- Writing: ``output_folder`` checks (and creates) an output folder; ``check_output_name`` refuses
  a name that exists and is not a regular file (``regular_or_none`` and ``still_same`` also for a
  file opened by a library that takes a path, such as SQLite); results are written to a temporary name in the
  same folder (``temp_file``/``temp_folder``: the name carries the PID) and moved into place;
  ``replace_if_unchanged`` replaces a file only while it still holds what was read.
- Leftovers: ``remove_leftovers`` removes, from one folder, what a killed run of ours left:
  names of our pattern whose PID is not running and that nobody touched for ``LEFTOVER_AGE``.

Errors are ``OutputError`` (exit 2: choose another folder, free space) with the reason; reads
raise ``OSError`` like any other read. Nothing here knows wheels, stamps or GPUs, and nothing
prints. It imports only ``errors``.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

from rocm_build_backend.errors import RocmBuildBackendError

LEFTOVER_AGE = 600  # seconds a temporary name must have been left alone before it counts as abandoned
_KINDS = (
    (stat.S_ISLNK, "a symlink"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
)
NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class OutputError(RocmBuildBackendError):
    """An output folder or file that cannot be written: not a folder, read-only, full, or a
    name taken by something that is not a regular file."""


# --------------------------------------------------------------------------- reading


def read_regular(path: str | os.PathLike[str], limit: int, *, follow: bool = True, head: bool = False) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (symlinks followed unless
    ``follow`` is False: then a symlink fails to open, ``ELOOP``); with ``head``, the first
    ``limit`` bytes of a larger one.

    Raises OSError with ``strerror`` "not a regular file" or "larger than N bytes" for what it
    refuses, like any other read error; opening never blocks on a FIFO.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if st.st_size > limit and not head:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
        data = bytearray()
        while len(data) <= limit:
            chunk = os.read(fd, min(limit + 1 - len(data), 1 << 20))
            if not chunk:
                break
            data += chunk
        if len(data) > limit:
            if head:
                return bytes(data[:limit])
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
    finally:
        os.close(fd)
    return bytes(data)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words ("a symlink", "a FIFO", ...)."""
    for test, word in _KINDS:
        if test(mode):
            return word
    return "not a regular file"


# --------------------------------------------------------------------------- writing


def why_not_written(exc: OSError, where: str | os.PathLike[str]) -> OutputError:
    """One clear error for a write that failed in ``where`` (full disk, read-only, ...)."""
    if exc.errno in NO_SPACE:
        return OutputError(
            f"no space left in {where} ({exc.strerror}); nothing was written",
            hint="free some space or give another output folder",
        )
    return OutputError(
        f"cannot write in {where}: {exc.strerror or exc}; nothing was written",
        hint="give an output folder you can write to",
    )


def output_folder(out: Path) -> Path | None:
    """Check ``out`` is a folder (creating it and its parents when missing); return the
    topmost folder this created, if any. A file, a dangling symlink or an unwritable parent
    is one OutputError."""
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise why_not_written(exc, out) from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode) and not out.exists():
            raise OutputError(
                f"{out} is a symlink to {os.readlink(out)}, which does not exist",
                hint="give an existing folder, or one that can be created",
            )
        if not out.is_dir():
            raise OutputError(
                f"{out} is {kind_of(st.st_mode) if not stat.S_ISREG(st.st_mode) else 'a file'}, not a folder",
                hint="give a folder for the output",
            )
        return None
    top = None
    for folder in [out, *out.parents]:
        if os.path.lexists(folder):
            break
        top = folder
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise why_not_written(exc, out) from None
    return top


def check_output_name(path: Path) -> bool:
    """Whether ``path`` exists as a regular file; OutputError when it exists as anything
    else (a symlink, a FIFO, a folder, a device), which is never replaced or read."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise why_not_written(exc, path.parent) from None
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(
            f"{path} exists and is {kind_of(st.st_mode)}; it is not replaced",
            hint="remove it, or give another output folder",
        )
    return True


def regular_or_none(path: Path) -> tuple[int, int] | None:
    """(device, inode) of ``path`` when it is a regular file, None when nothing is there; an
    OutputError for anything else (a symlink, a FIFO, a device, a folder), which is opened
    with ``O_NOFOLLOW`` and ``O_NONBLOCK`` only, never followed, read or waited on."""
    if not check_output_name(path):
        return None
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:  # replaced by a symlink since (ELOOP), or gone
        raise OutputError(
            f"{path} cannot be opened: {exc.strerror or exc}", hint="remove it, or give another output folder"
        ) from None
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(
            f"{path} exists and is {kind_of(st.st_mode)}; it is not replaced",
            hint="remove it, or give another output folder",
        )
    return st.st_dev, st.st_ino


def still_same(path: Path, expect: tuple[int, int] | None) -> None:
    """``path`` is still the regular file ``regular_or_none`` saw (or, where there was none,
    nothing or a regular file); OutputError when something was swapped in since."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode) or (expect is not None and (st.st_dev, st.st_ino) != expect):
        raise OutputError(
            f"{path} was replaced while it was being opened; it is not used",
            hint="remove it, or give another output folder",
        )


def temp_file(folder: Path, name: str, suffix: str) -> tuple[int, str]:
    """(fd, path) of a new file ``.<name>.<pid>.<random><suffix>`` in ``folder``."""

    try:
        return tempfile.mkstemp(prefix=f".{name}.{os.getpid()}.", suffix=suffix, dir=folder)
    except OSError as exc:
        raise why_not_written(exc, folder) from None


def temp_folder(folder: Path, prefix: str) -> Path:
    """A new folder ``<prefix><pid>-<random>`` in ``folder``."""

    try:
        return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=folder))
    except OSError as exc:
        raise why_not_written(exc, folder) from None


def leftover_pattern(prefix: str, suffix: str) -> re.Pattern[str]:
    """The names ``temp_file``/``temp_folder`` give, with the PID as group ``pid``:
    ``temp_file(d, name, ".x.tmp")`` -> ``leftover_pattern(".", ".x.tmp")`` (any name),
    ``temp_folder(d, ".tmp-")`` -> ``leftover_pattern(".tmp-", "")``."""
    if prefix == ".":
        return re.compile(rf"^\..+\.(?P<pid>[0-9]+)\.[A-Za-z0-9_]+{re.escape(suffix)}$")
    return re.compile(rf"^{re.escape(prefix)}(?P<pid>[0-9]+)-[A-Za-z0-9_]+{re.escape(suffix)}$")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True  # someone else's, or cannot tell: keep it
    return True


def remove_leftovers(folder: Path, pattern: re.Pattern[str], *, age: float = LEFTOVER_AGE) -> list[str]:
    """Remove from ``folder`` the files or folders whose names match ``pattern`` (our own
    temporary names), whose PID is not running and that were left alone for ``age`` seconds;
    return their names. Symlinks are never followed or removed; nothing else is touched."""

    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    now, removed = time.time(), []
    for entry in entries:
        m = pattern.match(entry.name)
        try:
            if m is None or entry.is_symlink() or now - entry.stat(follow_symlinks=False).st_mtime < age:
                continue
            if pid_alive(int(m.group("pid"))):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            continue
        removed.append(entry.name)
    return sorted(removed)


def replace_if_unchanged(path: Path, data: bytes, expected: bytes | None, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` in one rename, only while ``path`` still holds ``expected``
    (None: while it does not exist). The mode is ``mode``, else the file's own, else 0666 less
    the umask. OutputError when the file changed, is not a regular file, or cannot be written;
    on any failure ``path`` is untouched."""
    folder = path.parent
    fd, tmp = temp_file(folder, path.name, ".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode if mode is not None else _new_mode())
        _still(path, expected)
        if expected is None:
            os.link(tmp, path)  # fails, and writes nothing, when someone created it meanwhile
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
        tmp = ""
    except FileExistsError:
        raise OutputError(
            f"{path} appeared while it was being written; it was left as it is", hint="run the command again"
        ) from None
    except OSError as exc:
        raise why_not_written(exc, folder) from None
    finally:
        if tmp:
            Path(tmp).unlink(missing_ok=True)


def _new_mode() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _still(path: Path, expected: bytes | None) -> None:
    """OutputError unless ``path`` holds ``expected`` right now (None: does not exist)."""
    if expected is None:
        if os.path.lexists(path):
            raise OutputError(
                f"{path} appeared while it was being written; it was left as it is", hint="run the command again"
            )
        return
    try:
        st = os.lstat(path)
        current = read_regular(path, len(expected)) if stat.S_ISREG(st.st_mode) else None
    except OSError:
        current = None
    if current != expected:
        raise OutputError(
            f"{path} changed while it was being edited; it was left as it is", hint="run the command again"
        )
