"""Where enforcement's programs live: one folder per user that no one else can write, checked on
every build, never given up on silently.

- ``bases``: the folders the programs may live in, first usable wins: the usual
  ``$XDG_CACHE_HOME/rocm-build-backend/enforce`` (``$HOME/.cache`` when ``XDG_CACHE_HOME`` is unset
  or relative; ``HOME`` from the environment, else the password database; no home at all gives no
  usual folder, never a relative path), then the fallback ``$TMPDIR/rocm-build-backend-<uid>/enforce``
  (``/tmp`` without an absolute ``TMPDIR``): stable from build to build, so build trees that cached a
  compiler path and compiler caches keep working;
- ``usable_base``: the first of them that can be made and passes ``chain_problem`` (every folder
  above it owned by the user or root and not writable by others unless sticky; the folders of ours
  owned by the user and mode 0700), else ``EnforcementError`` (the build stops; ``enforce = false``
  is the way out);
- ``place``: makes the programs' folder hold what the vendor says it holds (``Enforcer.contents``,
  computed in memory): a folder of that name is read and used as it is when it is the user's,
  nobody else can write any of it and its contents are exactly those (file bytes, executable bits,
  link targets: the content its name hashes), so a build with the folder in place writes nothing;
  else the folder is written afresh under a temporary name beside it, and a damaged or foreign one
  moved aside before the new one is renamed into place (atomic). Links are read, never followed.

It writes nothing but these folders; it knows no vendor.
"""

from __future__ import annotations

import errno
import os
import shutil
import secrets
import stat
import tempfile
from pathlib import Path
from typing import Mapping

from rocm_build_backend.errors import EnforcementError
from rocm_build_backend.files import read_regular
from rocm_build_backend.gpu.build import FolderEntry

HINT = (
    "point XDG_CACHE_HOME (or TMPDIR) at a folder you own that others cannot write, or build without "
    "enforcement: enforce = false under [tool.rocm-build-backend] (-C rocm-build-backend.enforce=false)"
)
_SNAPSHOT_LIMIT = 8 << 20  # bytes of file contents compared in one folder


def _passwd_home(uid: int) -> str:
    try:
        import pwd  # not on every platform

        return pwd.getpwuid(uid).pw_dir
    except (ImportError, KeyError):
        return ""


def usual(env: Mapping[str, str]) -> Path | None:
    """``$XDG_CACHE_HOME/rocm-build-backend/enforce`` (``~/.cache``); None without an absolute home."""
    xdg = env.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "rocm-build-backend" / "enforce"
    home = env.get("HOME", "") or _passwd_home(os.getuid())
    return Path(home) / ".cache" / "rocm-build-backend" / "enforce" if os.path.isabs(home) else None


def fallback(env: Mapping[str, str]) -> Path:
    tmp = env.get("TMPDIR", "")
    return Path(tmp if os.path.isabs(tmp) else "/tmp") / f"rocm-build-backend-{os.getuid()}" / "enforce"


def bases(env: Mapping[str, str]) -> list[tuple[Path | None, Path]]:
    """(folder, the first folder of ours in it, made 0700) for the usual place and the fallback."""
    out: list[tuple[Path | None, Path]] = []
    first = usual(env)
    out.append((first, first.parent if first is not None else Path("/")))
    second = fallback(env)
    out.append((second, second.parent))
    return out


def chain_problem(path: Path, ours: Path) -> str | None:
    """Why ``path`` is no safe home (None: it is). Folders above ``ours`` must be owned by the user
    or root and not writable by others unless sticky; ``ours`` and below must be the user's, 0700."""
    uid = os.getuid()
    real = Path(os.path.realpath(path))
    top = Path(os.path.realpath(ours))
    for folder in [*reversed(real.parents), real]:
        try:
            st = os.lstat(folder)
        except OSError as exc:
            return f"{folder}: {exc.strerror}"
        if not stat.S_ISDIR(st.st_mode):
            return f"{folder} is not a folder"
        mine = folder == top or top in folder.parents
        if mine and st.st_uid != uid:
            return f"{folder} belongs to user {st.st_uid}"
        if mine and st.st_mode & 0o077:
            try:
                os.chmod(folder, 0o700)  # our own folder, made with a loose umask
            except OSError as exc:
                return f"{folder} is mode {stat.S_IMODE(st.st_mode):o} ({exc.strerror})"
        elif st.st_uid not in (0, uid):
            return f"{folder} belongs to user {st.st_uid}"
        elif st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return f"{folder} can be written by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def usable_base(env: Mapping[str, str]) -> tuple[Path, list[str]]:
    """The folder for the programs and the log's notes on folders passed over; EnforcementError
    when none can be used."""
    why: list[str] = []
    for path, ours in bases(env):
        if path is None:
            why.append("no usual folder (no absolute XDG_CACHE_HOME or HOME, no home in the password database)")
            continue
        try:
            for folder in [*reversed(path.parents), path]:
                if not os.path.isdir(folder):
                    folder.mkdir(mode=0o700)  # each folder made here is the user's alone
        except OSError as exc:
            why.append(f"{path}: {exc.strerror or exc}")
            continue
        problem = chain_problem(path, ours)
        if problem is None:
            return path, [f"enforce: pinned compilers in {path} ({'; '.join(why)})"] if why else []
        why.append(problem)
    raise EnforcementError("no folder for the pinned compilers can be used: " + "; ".join(why), hint=HINT)


def tighten(folder: Path) -> None:
    """Take others' write permission off everything in a folder just written (a loose umask)."""
    for root, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            path = os.path.join(root, name)
            st = os.lstat(path)
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o022:
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o022)
    os.chmod(folder, 0o700)


def snapshot(folder: Path) -> dict[str, FolderEntry] | None:
    """Everything below ``folder``, by path inside it (``a/b``), as ``Enforcer.contents`` gives it:
    a folder's own mode bits are left out, a file's executable bits kept. None when something in
    it is not the user's, can be written by others, is not a file, folder or link, or the contents
    run over the limit. Links are read, never followed; ``OSError`` when something cannot be read."""
    uid = os.getuid()
    out: dict[str, FolderEntry] = {}
    budget = _SNAPSHOT_LIMIT
    todo = [("", str(folder))]
    while todo:
        prefix, path = todo.pop()
        with os.scandir(path) as entries:
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                rel = prefix + entry.name
                if st.st_uid != uid:
                    return None
                if stat.S_ISLNK(st.st_mode):
                    out[rel] = ("link", os.readlink(entry.path), 0)
                elif st.st_mode & 0o022:
                    return None
                elif stat.S_ISDIR(st.st_mode):
                    out[rel] = ("dir", "", 0)
                    todo.append((rel + "/", entry.path))
                elif stat.S_ISREG(st.st_mode):
                    budget -= st.st_size
                    if budget < 0:
                        return None
                    out[rel] = ("file", read_regular(entry.path, st.st_size, follow=False), st.st_mode & 0o111)
                else:
                    return None
    return out


def problem(final: Path, contents: Mapping[str, FolderEntry]) -> str | None:
    """What is wrong with the folder at ``final`` for ``contents`` (None: it is the user's alone,
    mode 0700, and holds exactly that); ``FileNotFoundError`` when there is none."""
    st = os.lstat(final)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return "not a folder"
    if st.st_uid != os.getuid():
        return f"it belongs to user {st.st_uid}"
    if st.st_mode & 0o022:
        return _FOREIGN
    try:
        found = snapshot(final)
    except OSError:
        found = {}  # something in it cannot be read: not what was written
    if found is None:
        return _FOREIGN
    return None if found == contents and stat.S_IMODE(st.st_mode) == 0o700 else _DAMAGED


_FOREIGN = "something in it is another user's or writable by others"
_DAMAGED = "its contents are not what its name says"


def write(folder: Path, contents: Mapping[str, FolderEntry]) -> None:
    """Write ``contents`` into the empty ``folder``: folders, then what is in them; a program's
    file gets the executable bits (as ``chmod u+rx,go+x``), links point where they say."""
    for rel in sorted(contents):
        kind, data, mode = contents[rel]
        path = os.path.join(folder, rel)
        if kind == "dir":
            os.mkdir(path)
        elif kind == "link":
            os.symlink(str(data), path)
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
            try:
                view = memoryview(data if isinstance(data, bytes) else data.encode())
                while view:
                    view = view[os.write(fd, view) :]
                if mode & 0o111:
                    os.fchmod(
                        fd,
                        stat.S_IMODE(os.fstat(fd).st_mode) | stat.S_IRUSR | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH,
                    )
            finally:
                os.close(fd)


def place(base: Path, final: Path, contents: Mapping[str, FolderEntry]) -> str | None:
    """Make ``final`` (in ``base``) hold exactly ``contents``: a folder there that already does and
    is the user's alone is used as it is, nothing written; else the contents are written into a
    temporary folder in ``base`` and put in place by ``settle``. Returns what was wrong with the
    folder replaced (None when none was). ``OSError`` when it cannot be put in place."""
    try:
        if problem(final, contents) is None:
            return None
    except FileNotFoundError:
        pass
    work = Path(tempfile.mkdtemp(prefix=".tmp-", dir=base))
    try:
        write(work, contents)
        tighten(work)
        return settle(work, final, contents)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def settle(work: Path, final: Path, contents: Mapping[str, FolderEntry]) -> str | None:
    """Put the freshly written ``work`` at ``final``: a folder there (made meanwhile by another
    build) is kept when it holds exactly ``contents`` and is the user's alone; else replaced
    atomically. Returns what was wrong with the one replaced (None when none was)."""
    try:
        os.rename(work, final)
        return None
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            raise
    st = os.lstat(final)
    found = problem(final, contents)
    if found is None:
        shutil.rmtree(work, ignore_errors=True)
        return None
    # moved aside within its own folder (moving another user's folder elsewhere needs its permission)
    aside = final.with_name(f".tmp-old-{os.getpid()}-{secrets.token_hex(4)}")
    os.rename(final, aside)
    os.rename(work, final)
    if stat.S_ISDIR(st.st_mode) and not stat.S_ISLNK(st.st_mode):
        shutil.rmtree(aside, ignore_errors=True)  # what cannot be removed goes with the leftovers
    else:
        aside.unlink()
    return found
