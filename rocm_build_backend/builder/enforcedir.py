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
- ``settle``: puts a freshly written folder in place: an existing folder of the same name is used
  only when it is the user's, nobody else can write any of it and its contents are exactly the
  fresh ones (the content its name hashes); a damaged or foreign one is moved aside and the fresh
  one renamed into place (atomic).

It writes nothing but these folders; it knows no vendor.
"""

from __future__ import annotations

import errno
import os
import shutil
import secrets
import stat
from pathlib import Path
from typing import Mapping

from rocm_build_backend.errors import EnforcementError

HINT = ("point XDG_CACHE_HOME (or TMPDIR) at a folder you own that others cannot write, or build without "
        "enforcement: enforce = false under [tool.rocm-build-backend] (-C rocm-build-backend.enforce=false)")
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


def snapshot(folder: Path) -> dict[str, tuple[str, bytes | str, int]] | None:
    """Everything in ``folder``: path -> (kind, contents or link target, mode); None when something
    in it is not the user's, can be written by others, is not a file, folder or link, or the
    contents run over the limit."""
    uid = os.getuid()
    out: dict[str, tuple[str, bytes | str, int]] = {}
    budget = _SNAPSHOT_LIMIT
    for root, dirs, files in os.walk(folder):
        for name in [".", *dirs, *files]:
            path = os.path.normpath(os.path.join(root, name))
            st = os.lstat(path)
            rel = os.path.relpath(path, folder)
            if st.st_uid != uid:
                return None
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path), 0)
            elif st.st_mode & 0o022:
                return None
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", "", stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                budget -= st.st_size
                if budget < 0:
                    return None
                out[rel] = ("file", Path(path).read_bytes(), stat.S_IMODE(st.st_mode) & 0o111)
            else:
                return None
    return out


def settle(work: Path, final: Path) -> str | None:
    """Put the freshly written ``work`` at ``final``: kept when ``final`` already holds exactly the
    same and is the user's alone; else replaced atomically. Returns what was wrong with the one
    replaced (None when none was). ``OSError`` when it cannot be put in place."""
    try:
        os.rename(work, final)
        return None
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            raise
    st = os.lstat(final)
    problem: str | None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        problem = "not a folder"
    elif st.st_uid != os.getuid():
        problem = f"it belongs to user {st.st_uid}"
    else:
        found = snapshot(final)
        problem = (None if found == snapshot(work) else
                   "something in it is another user's or writable by others" if found is None else
                   "its contents are not what its name says")
    if problem is None:
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
    return problem
