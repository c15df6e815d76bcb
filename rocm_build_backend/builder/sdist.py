"""An sdist for ``build``: a file unpacked safely into a temporary folder, or a ``NAME==VERSION``
fetched through pip's configured index first (``pip download --no-deps --no-binary :all:``,
pip's public command line, with pip's own configuration: its index, ``--find-links``, caches).

``unpack`` takes a ``.tar.gz`` (``.tgz``, ``.tar.bz2``, ``.tar.xz``, ``.tar``) or ``.zip`` and
writes its members, one by one, into a folder of its own: a member whose name leaves that
folder (an absolute path, ``..``), a link whose target leaves it, a device file or FIFO, more
than ``MAX_MEMBERS`` members or more than ``MAX_TOTAL`` bytes stop it with one error (exit 2);
nothing is written outside the folder, and the folder goes when the build is done. The sdist
itself is never changed: the build wraps the backend it declares (``project.shim_settings``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any, Iterator, Mapping

from packaging.requirements import InvalidRequirement, Requirement

from rocm_build_backend import files
from rocm_build_backend.errors import USAGE, RocmBuildBackendError

MAX_MEMBERS = 200_000
MAX_TOTAL = 4 << 30  # bytes unpacked in all
_CHUNK = 1 << 20
ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip")
WORK_PREFIX = "rocm-build-backend-sdist-"  # + <pid>-<random>: a later run removes a killed run's
_HINT = "give an sdist (.tar.gz or .zip, as python -m build --sdist makes it), a project's folder, or NAME==VERSION"


class SdistError(RocmBuildBackendError):
    """An sdist that cannot be unpacked or fetched: nothing was built."""

    exit_code = USAGE


@dataclass
class Source:
    """What ``build`` builds: the project's folder, and the output folder when none is given."""

    folder: Path
    outdir: Path
    sdist: Path | None = None  # the sdist it was unpacked from


def requirement_of(text: str) -> Requirement | None:
    """``text`` as a ``NAME==VERSION`` requirement (one exact version, no URL), else None."""
    if os.sep in text or "/" in text or text.endswith(ARCHIVES):
        return None
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None
    specs = list(req.specifier)
    if req.url or len(specs) != 1 or specs[0].operator not in ("==", "===") or "*" in specs[0].version:
        return None
    return req


def _member_path(root: Path, name: str, archive: Path) -> Path:
    """Where member ``name`` goes under ``root``; SdistError when it would leave it."""
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("", ".")]
    bad = not parts or name.startswith(("/", "\\")) or ".." in parts or re.match(r"^[A-Za-z]:", name)
    if bad:
        raise SdistError(
            f"{archive.name}: the member {name!r} would be written outside the folder it is "
            "unpacked into; nothing was built",
            hint="this is not an sdist a build tool makes: get it again from its publisher",
        )
    return root.joinpath(*parts)


def _inside(root: Path, path: Path) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top + os.sep)


def _write(root: Path, dest: Path, data: IO[bytes], size: int, archive: Path, name: str) -> None:
    """Write ``size`` bytes of ``data`` to ``dest``, a new regular file inside ``root``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not _inside(root, dest.parent):
        raise SdistError(
            f"{archive.name}: the member {name!r} would be written through a link out of the folder "
            "it is unpacked into; nothing was built",
            hint="this is not an sdist a build tool makes: get it again from its publisher",
        )
    if dest.is_symlink() or dest.exists():
        if dest.is_dir() and not dest.is_symlink():
            raise SdistError(f"{archive.name}: the member {name!r} is a file and a folder", hint=_HINT)
        dest.unlink()
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "wb") as out:
        left = size
        while left > 0:
            chunk = data.read(min(_CHUNK, left))
            if not chunk:
                break
            out.write(chunk)
            left -= len(chunk)


def _link(root: Path, dest: Path, target: str, archive: Path, name: str) -> None:
    """A symbolic link inside ``root`` whose target stays inside it."""
    where = os.path.normpath(os.path.join(os.path.dirname(dest), target))
    if os.path.isabs(target) or not _inside(root, Path(where)):
        raise SdistError(
            f"{archive.name}: the member {name!r} links to {target!r}, out of the folder it is "
            "unpacked into; nothing was built",
            hint="this is not an sdist a build tool makes: get it again from its publisher",
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    os.symlink(target, dest)


class _Budget:
    def __init__(self, archive: Path) -> None:
        self.archive, self.members, self.total = archive, 0, 0

    def take(self, size: int) -> None:
        self.members += 1
        self.total += max(size, 0)
        if self.members > MAX_MEMBERS or self.total > MAX_TOTAL:
            raise SdistError(
                f"{self.archive.name} unpacks to more than {MAX_MEMBERS:,} members or "
                f"{MAX_TOTAL >> 30} GiB; nothing was built",
                hint="this is not an sdist a build tool makes: get it again from its publisher",
            )


def _untar(archive: Path, root: Path) -> None:
    budget = _Budget(archive)
    sizes: dict[str, int] = {}  # of the regular members so far: what a hard link repeats
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            size = member.size if member.isreg() else sizes.get(member.linkname, 0) if member.islnk() else 0
            budget.take(size)
            dest = _member_path(root, member.name, archive)
            if member.isdir():
                dest.mkdir(parents=True, exist_ok=True)
                if not _inside(root, dest):
                    raise SdistError(
                        f"{archive.name}: the folder {member.name!r} is reached through a link out "
                        "of the folder it is unpacked into; nothing was built",
                        hint=_HINT,
                    )
            elif member.issym():
                _link(root, dest, member.linkname, archive, member.name)
            elif member.isreg() or member.islnk():
                if member.islnk():
                    _member_path(root, member.linkname, archive)  # the file it repeats must be inside too
                data = tar.extractfile(member)
                if data is not None:
                    _write(root, dest, data, size, archive, member.name)
                    sizes[member.name] = size
            else:
                raise SdistError(
                    f"{archive.name}: the member {member.name!r} is a device file or FIFO; nothing was built",
                    hint="this is not an sdist a build tool makes",
                )


def _unzip(archive: Path, root: Path) -> None:
    budget = _Budget(archive)
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            budget.take(info.file_size)
            dest = _member_path(root, info.filename, archive)
            mode = info.external_attr >> 16
            if info.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
            elif (mode & 0o170000) == 0o120000:  # a symbolic link made on a Unix machine
                _link(root, dest, zf.read(info)[:4096].decode("utf-8", "replace"), archive, info.filename)
            else:
                with zf.open(info) as data:
                    _write(root, dest, data, info.file_size, archive, info.filename)


def _project_in(root: Path, archive: Path) -> Path:
    """The project's folder in an unpacked sdist: its one top folder (or the root itself)."""
    top = [p for p in root.iterdir()]
    for folder in [root] + (top if len(top) == 1 and top[0].is_dir() and not top[0].is_symlink() else []):
        if (folder / "pyproject.toml").is_file() or (folder / "setup.py").is_file():
            return folder
    raise SdistError(
        f"{archive.name} holds no pyproject.toml or setup.py in its top folder: it is not an sdist", hint=_HINT
    )


def unpack(archive: Path, into: Path) -> Path:
    """Unpack sdist ``archive`` into the empty folder ``into``; return the project's folder."""
    try:
        if zipfile.is_zipfile(archive):
            _unzip(archive, into)
        elif tarfile.is_tarfile(archive):
            _untar(archive, into)
        else:
            raise SdistError(f"{archive} is not an sdist: not a tar or zip archive", hint=_HINT)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, ValueError) as exc:
        raise SdistError(f"{archive} is not an sdist: a damaged archive ({exc})", hint=_HINT) from None
    except OSError as exc:
        if isinstance(exc, SdistError):
            raise
        raise SdistError(f"cannot unpack {archive}: {exc.strerror or exc}", hint=_HINT) from None
    return _project_in(into, archive)


def download(req: Requirement, into: Path, env: Mapping[str, str] | None = None) -> Path:
    """The sdist of ``req``, found through pip's configured index and downloaded into ``into``
    (pip's output goes to stderr); SdistError when pip finds none."""
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--dest", str(into), str(req)]
    try:
        to: Any = sys.stderr.fileno()  # pip's lines go to stderr: stdout is for the wheel's path
    except (AttributeError, OSError, ValueError):
        to = subprocess.DEVNULL
    proc = subprocess.run(
        argv, stdout=to, stdin=subprocess.DEVNULL, env=dict(os.environ if env is None else env), check=False
    )
    found = [p for p in into.iterdir() if p.is_file() and p.name.endswith(ARCHIVES)]
    if proc.returncode != 0 or len(found) != 1:
        raise SdistError(
            f"pip found no sdist of {req} (pip download exit {proc.returncode})",
            hint="see pip's lines above: pip download --no-deps --no-binary :all: "
            f"'{req}' must work with pip's configured index",
        )
    return found[0]


@contextmanager
def source(spec: str, outdir: Path | None) -> Iterator[Source]:
    """What ``build SPEC`` builds, for as long as the build runs: a folder as it is; an sdist
    file unpacked (the wheel goes beside it unless ``outdir``); ``NAME==VERSION`` downloaded
    and unpacked (the wheel goes to ``./dist``). The temporary folder goes afterwards."""
    path = Path(spec)
    req = None if path.exists() else requirement_of(spec)
    if req is None and not path.is_file():
        yield Source(path, outdir or path / "dist")
        return
    top = Path(tempfile.gettempdir())
    files.remove_leftovers(top, files.leftover_pattern(WORK_PREFIX, ""))
    work = files.temp_folder(top, WORK_PREFIX)
    try:
        if req is not None:
            (work / "download").mkdir()
            archive = download(req, work / "download")
            default = Path("dist")
        else:
            archive, default = path.resolve(), path.resolve().parent
        (work / "src").mkdir()
        folder = unpack(archive, work / "src")
        yield Source(folder, (outdir or default).resolve(), archive if req is None else None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
