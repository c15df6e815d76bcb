"""What GPU code a wheel, a shared library or a code object really contains: the public
entry of the binary layer.

Setting an arch variable is not proof; the binary is. The audit finds device code
containers by ELF section (``.hip_fatbin``, ``.llvm.offloading``, ``.nv_fatbin``,
``__nv_relfatbin``, see ``sections``) and standalone files by their magic bytes, reads each
container's targets with the readers (``bundle``, ``ccob``, ``offload_binary``, ``fatbin``,
``cubin``, ``amdgpu``), and reports per file (``report``):

- ``targets``: every target that any container holds;
- ``complete``: the targets that *every* container with kernels holds. A library whose
  second translation unit was built for gfx90a only does not fully support gfx908, even
  though gfx908 appears in its first bundle.

Wheels are read in place, member by member, nothing is extracted (``members``).
``verify(report, requested)`` compares the result with the targets a build asked for
(``verify``). This module opens files and zips and dispatches; it parses no format itself.
"""

from __future__ import annotations

import os
import stat
import zipfile
from typing import Iterable, Union

from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary import magic
from rocm_build_backend.binary.budget import BudgetSource, budget_for
from rocm_build_backend.binary.container import Container
from rocm_build_backend.binary.elf import BytesSource, FileSource, FormatError, Source, msg
from rocm_build_backend.binary.fatbin import walk_fatbins
from rocm_build_backend.binary.members import ZIP_MAGIC, member_source
from rocm_build_backend.binary.report import AuditReport, FileReport, sorted_targets
from rocm_build_backend.binary.sections import audit_elf
from rocm_build_backend.binary.verify import HINT, mismatch_error, verify
from rocm_build_backend.binary.walk import walk_hip_fatbin, walk_offloading

__all__ = [
    "HINT",
    "AuditReport",
    "Container",
    "FileReport",
    "audit_bytes",
    "audit_file",
    "audit_paths",
    "audit_wheel",
    "mismatch_error",
    "sorted_targets",
    "verify",
]

PathLike = Union[str, "os.PathLike[str]"]


def _audit_source(src: Source, name: str, archive: str = "", stored: int | None = None) -> FileReport:
    """One file's report; its work is bounded by a budget set from ``stored`` (the bytes it
    really has: its size, or a zip member's compressed size)."""
    r = FileReport(path=name, archive=archive, size=src.size)
    with budget_for(src.size if stored is None else stored) as budget:
        _read_by_magic(BudgetSource(src, budget), r)
    damaged = getattr(src, "damaged", "")
    if damaged:
        r.problems.append(damaged)
    r.finish()
    if budget.exceeded:
        r.problems = [p for p in r.problems if budget.exceeded not in p] + [budget.exceeded]
        r.readable = False
    return r


def _read_by_magic(src: Source, r: FileReport) -> None:
    head = src.read(0, 64)
    try:
        if head[:4] == _elf.ELF_MAGIC:
            audit_elf(src, r)
        elif head[:24] == magic.BUNDLE or head[:4] == magic.CCOB:
            r.kind = "bundle" if head[:4] == magic.BUNDLE[:4] else "ccob"
            found, problems = walk_hip_fatbin(src, "file", cut=True)
            r.containers.extend(found)
            r.problems.extend(problems)
        elif head[:4] == magic.OFFLOAD:
            r.kind = "offload-binary"
            found, problems = walk_offloading(src, "file")
            r.containers.extend(found)
            r.problems.extend(problems)
        elif head[:4] == magic.FATBIN:
            r.kind = "fatbin"
            found, problems = walk_fatbins(src, "file", cut=True)
            r.containers.extend(found)
            r.problems.extend(problems)
    except FormatError as exc:  # the readers catch their own; this is a last line of defence
        r.problems.append(msg(exc))


def audit_bytes(data: bytes, name: str) -> FileReport:
    """One file's bytes. The kind of file is decided by its magic bytes, not by ``name``."""
    return _audit_source(BytesSource(data), name)


NOT_REGULAR = "not a regular file (a FIFO, device or socket is not read)"


def audit_file(path: PathLike) -> FileReport:
    """One regular file on disk, read at the offsets the formats point to (not read whole).

    Opened without blocking and checked before any read: a FIFO or a device is reported,
    never read (it could block forever or never end).
    """
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        return FileReport(path=path, problems=[f"cannot read: {exc.strerror or exc}"], readable=False)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return FileReport(path=path, problems=[NOT_REGULAR], readable=False)
        with os.fdopen(fd, "rb") as fh:
            return _audit_source(FileSource(fh), path)
    except OSError as exc:
        return FileReport(path=path, problems=[f"cannot read: {exc.strerror or exc}"], readable=False)


def _is_listed(r: FileReport) -> bool:
    return r.kind != "other" or bool(r.problems)


def audit_wheel(path: PathLike) -> AuditReport:
    """Every member of a wheel (any zip), read in place; nothing is extracted."""
    path = os.fspath(path)
    report = AuditReport(source=path)
    name = os.path.basename(path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            report.problems.append(f"{name}: {NOT_REGULAR}")
            return report
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        report.problems.append(f"{name}: cannot be read as a wheel ({exc})")
        return report
    with zf, open(path, "rb") as raw:
        size = os.fstat(raw.fileno()).st_size
        for info in zf.infolist():
            if info.is_dir():
                continue
            try:
                src = member_source(zf, raw, info)
                r = _audit_source(src, info.filename, archive=path, stored=_stored_size(info, size))
            except FormatError as exc:
                r = FileReport(info.filename, archive=path, problems=[msg(exc)], readable=False)
            except (OSError, zipfile.BadZipFile, NotImplementedError, RuntimeError) as exc:
                r = FileReport(info.filename, archive=path, problems=[f"cannot be read ({exc})"], readable=False)
            if _is_listed(r):
                report.files.append(r)
            else:
                report.skipped += 1
    return report.finish()


def _stored_size(info: "zipfile.ZipInfo", archive_size: int) -> int:
    """The bytes a member really takes in the archive (its header may claim more)."""
    return max(0, min(info.compress_size, archive_size))


def _is_zip(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == ZIP_MAGIC
    except OSError:
        return False


def _files_under(p: str) -> list[str]:
    files: list[str] = []
    for root, dirs, names in os.walk(p):
        dirs.sort()
        files.extend(os.path.join(root, n) for n in sorted(names))
    return files


def audit_paths(paths: PathLike | Iterable[PathLike]) -> AuditReport:
    """Wheels (any zip), libraries, code objects and directories (walked recursively)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    given = [os.fspath(p) for p in paths]
    report = AuditReport(source=", ".join(given))
    for p in given:
        if os.path.isdir(p):
            for f in _files_under(p):
                _audit_one_path(f, report)
        elif os.path.exists(p):
            _audit_one_path(p, report, given=True)
        else:
            report.problems.append(f"{p}: no such file or directory")
    return report.finish()


def _audit_one_path(f: str, report: AuditReport, *, given: bool = False) -> None:
    """One file; in a folder only regular files are read (a FIFO there would block)."""
    try:
        mode = os.stat(f).st_mode
    except OSError:
        return  # a dangling link, or gone since the folder was listed
    if not stat.S_ISREG(mode):
        if given:
            report.problems.append(f"{f}: {NOT_REGULAR}")
        else:
            report.skipped += 1
        return
    if f.endswith(".whl") and not _is_zip(f):  # named as a wheel, is none: say so
        report.problems.append(f"{f}: not a wheel (not a zip archive)")
        return
    if _is_zip(f):
        sub = audit_wheel(f)
        report.files.extend(sub.files)
        report.problems.extend(sub.problems)
        report.skipped += sub.skipped
        return
    r = audit_file(f)
    if _is_listed(r):
        report.files.append(r)
    else:
        report.skipped += 1
