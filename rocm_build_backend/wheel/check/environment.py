"""Every installed distribution of an environment, audited against this machine's GPUs.

``rocm-build-backend check --env [PYTHON]`` in library form: the case of an environment copied
to (or a container started on) a machine with another GPU. The environment's site-packages
folders come from the interpreter itself (``sysconfig``: purelib, platlib; the user site when
it is on; a PEP 405 venv's one folder is read from its layout, without starting it). A bare
command name is found on PATH, never in the working folder; the interpreter is asked with
``-I -S`` (none of the environment's ``.pth`` files or ``sitecustomize`` runs), its output
capped at 1 MiB and its time at 30 s, its answer checked for shape. Each ``*.dist-info/RECORD``
there (a regular file of at most 64 MiB, like METADATA and ``pyvenv.cfg``: a FIFO or a link to
``/dev/zero`` is not read) lists the files a distribution installed; paths that leave the
site folder (absolute, ``../``) are not opened, and a file reached under several spellings
(symlinked folders) is read once. An editable install's files are followed to its sources
(``editable.py``: setuptools' finder ``MAPPING``, ``.pth`` path entries, ``direct_url.json``,
each read as a bounded regular file), outside site-packages on purpose; RECORD entries that
leave the site folder still are not. Files that cannot hold
device code are skipped before anything is opened: by name (source, text, images, Python),
then by size (under 64 bytes), then by their first bytes (an ELF file, an offload bundle, a
CCOB, an offload binary or a CUDA fatbin; nothing else is read further); a host ELF library is
audited only when its section-name table names a device section.
What is left is audited (``binary.audit.audit_file``: section tables and device sections
only) and judged with ``check``'s rules: a distribution loads here when every file with device
code has code that loads on every device (for NVIDIA GPUs: some of its kernel modules do, the
others being for other GPUs, unless ``strict``; see ``facts.file_verdict``).

What the audit found in each file is kept between runs (``AuditCache``, keyed by path, size,
mtime, ctime and inode), so checking an unchanged environment before every job reads no binary.

Exit codes as for every verb: 0 every distribution with device code loads here, 1 one does
not, 3 cannot tell (no GPU found, a file that cannot be read).
"""

from __future__ import annotations

import csv
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from rocm_build_backend import progress
from rocm_build_backend.binary.audit import sorted_targets
from rocm_build_backend.errors import CANNOT_TELL, DEFINITE_NO
from rocm_build_backend.files import read_regular
from rocm_build_backend.wheel.check.audit_cache import AuditCache as AuditCache
from rocm_build_backend.wheel.check.audit_cache import default_cache_path as default_cache_path
from rocm_build_backend.wheel.check.candidates import device_candidates as device_candidates
from rocm_build_backend.wheel.check.candidates import elf_may_hold_device_code as elf_may_hold_device_code
from rocm_build_backend.wheel.check.candidates import may_hold_device_code as may_hold_device_code
from rocm_build_backend.wheel.check.editable import editable_files
from rocm_build_backend.wheel.check.interpreter import site_dirs as site_dirs
from rocm_build_backend.wheel.facts import DeviceFile, WheelTargets, modules_from_json
from rocm_build_backend.wheel.record import MAX_RECORD, parse_rows

SCHEMA_VERSION = 1
_MAX_METADATA_HEAD = 1 << 20  # Name and Version are in the header, before the description


# --------------------------------------------------------------------------- the environment


@dataclass(frozen=True)
class Distribution:
    name: str
    version: str
    location: Path  # the site-packages folder
    dist_info: Path
    files: tuple[str, ...]  # paths from RECORD, relative to ``location``; absolute: an editable install's sources


def _meta(dist_info: Path) -> tuple[str, str]:
    parts = dist_info.name[: -len(".dist-info")].rsplit("-", 1)
    name, version = parts[0], parts[1] if len(parts) > 1 else ""
    try:
        head = read_regular(dist_info / "METADATA", _MAX_METADATA_HEAD, head=True)
    except OSError:
        return name, version
    for line in head.decode("utf-8", errors="replace").split("\n"):
        if not line.strip():
            break
        key, _, value = line.partition(":")
        if key.lower() == "name":
            name = value.strip()
        elif key.lower() == "version":
            version = value.strip()
    return name, version


def _inside(rel: str) -> bool:
    """Whether a RECORD path stays inside its site-packages folder (not absolute, no ``..``
    leading out); others (scripts in ``../../bin``, planted paths) are never opened."""
    if not rel or os.path.isabs(rel) or rel.startswith(("/", "\\")):
        return False
    norm = os.path.normpath(rel)
    return not (norm == ".." or norm.startswith(".." + os.sep) or norm.startswith("../"))


def _record_file(record: Path) -> bool:
    """Whether RECORD is a regular file ``_record`` would read (stat only)."""
    try:
        st = os.stat(record)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size <= MAX_RECORD


def _record(dist_info: Path) -> tuple[str, ...] | None:
    """The paths RECORD lists inside the site folder; None when RECORD is missing, not a
    regular file (a FIFO, ``/dev/zero``) or larger than ``MAX_RECORD``."""
    try:
        text = read_regular(dist_info / "RECORD", MAX_RECORD).decode("utf-8", errors="replace")
    except OSError:
        return None
    try:
        rows = [row[0] for row in parse_rows(text)]
    except csv.Error:
        return None
    return tuple(rel for rel in rows if _inside(rel))


def distributions(location: Path) -> list[Distribution]:
    """The distributions installed in one site-packages folder, with the files RECORD lists."""
    out = []
    for dist_info in sorted(location.glob("*.dist-info")):
        paths = _record(dist_info)
        if paths is None:
            continue
        # an editable install's code is where its finder, .pth or direct_url.json points
        paths += tuple(editable_files(location, dist_info, paths))
        name, version = _meta(dist_info)
        out.append(Distribution(name, version, location, dist_info, paths))
    return out


# --------------------------------------------------------------------------- the report


@dataclass
class DistCheck:
    dist: Distribution
    files: dict[str, dict[str, list[str]]]  # path relative to the site folder -> targets/complete/problems
    status: str = "ok"
    reason: str | None = None
    notes: list[str] = field(default_factory=list)  # what an ``ok`` rests on (per-GPU kernel modules)

    @property
    def targets(self) -> list[str]:
        return sorted_targets(t for f in self.files.values() for t in f["targets"])

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.dist.name,
            "version": self.dist.version,
            "location": str(self.dist.location),
            "status": self.status,
            "reason": self.reason,
            "notes": list(self.notes),
            "targets": self.targets,
            "files": self.files,
        }


@dataclass
class EnvReport:
    python: str
    site_dirs: list[Path]
    devices: list[str]
    dists: list[DistCheck]
    notes: list[str] = field(default_factory=list)
    generic_ok: bool | None = True
    scanned: dict[str, int] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        statuses = {d.status for d in self.dists}
        if "fails" in statuses:
            return DEFINITE_NO
        if "unknown" in statuses:
            return CANNOT_TELL
        return 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "python": self.python,
            "site_packages": [str(p) for p in self.site_dirs],
            "devices": list(self.devices),
            "generic_targets": {True: "load", False: "do not load", None: "unknown"}[self.generic_ok],
            "notes": list(self.notes),
            "distributions": [d.to_json() for d in self.dists],
            "scanned": dict(self.scanned),
            "exit_code": self.exit_code,
        }


def _judge(
    dist: Distribution,
    paths: Sequence[Path],
    devices: Sequence[Any],
    generic_ok: bool | None,
    cache: AuditCache,
    strict: bool = False,
) -> DistCheck | None:
    files: dict[str, dict[str, Any]] = {}
    facts = WheelTargets(path=dist.dist_info, name=dist.name, version=dist.version, audited=True)
    for path in paths:
        entry = cache.audit(path)
        if not entry["targets"] and not entry.get("problems"):
            continue  # an ELF file without device code
        inside = Path(os.path.abspath(path)).is_relative_to(dist.location)
        rel = os.path.relpath(path, dist.location).replace(os.sep, "/") if inside else str(path)
        files[rel] = entry
        facts.files.append(
            DeviceFile(
                rel,
                tuple(entry["targets"]),
                tuple(entry["complete"]),
                tuple(entry.get("problems", ())),
                modules_from_json(entry.get("modules")),
                modules_from_json(entry.get("unread")) or (),
            )
        )
    if not files:
        return None
    check = DistCheck(dist, files)
    if not devices:
        check.status, check.reason = "unknown", "no GPU found to check against"
        return check
    worst, reasons = "ok", []
    for dev in devices:
        status, reason = facts.verdict(dev, generic_ok=generic_ok, strict=strict)
        if status == "fails" or (status == "unknown" and worst == "ok"):
            worst = status
        if status != "ok" and reason:
            reasons.append(f"{dev}: {reason}")
        elif reason:
            check.notes.append(f"{dev}: {reason}")
    check.status, check.reason = worst, "; ".join(reasons) or None
    if worst != "ok":
        check.notes = []
    return check


def check_environment(
    python: str | None,
    devices: Sequence[Any],
    *,
    generic_ok: bool | None = True,
    notes: Iterable[str] = (),
    locations: Sequence[Path] | None = None,
    cache_path: Path | None = None,
    strict: bool = False,
) -> EnvReport:
    """Audit every installed distribution of ``python``'s environment against ``devices``.

    ``locations`` replaces the interpreter's site-packages folders (tests, unpacked trees);
    ``cache_path``: where the audit results are kept between runs (None: not kept);
    ``strict``: every kernel module must load, also on NVIDIA GPUs (``facts.file_verdict``).
    """
    cache = AuditCache(cache_path)
    if locations is None:
        exe, dirs = site_dirs(python)
    else:
        exe, dirs = python or "", [Path(p) for p in locations]
    devs = [str(d) for d in devices]
    checks, n_dists, n_files, n_candidates, n_opened = [], 0, 0, 0, 0
    seen: set[tuple[int, int]] = set()  # (st_dev, st_ino): one file under many spellings is read once
    for location in dirs:
        for dist in distributions(location):
            n_dists += 1
            progress.step("checking distributions", n_dists)
            n_files += len(dist.files)
            paths, opened = device_candidates(dist, seen)
            n_candidates += len(paths)
            n_opened += opened
            check = _judge(dist, paths, devs, generic_ok, cache, strict)
            if check is not None:
                checks.append(check)
    progress.step("checking distributions", n_dists, n_dists)  # done
    cache.save()
    scanned = {
        "distributions": n_dists,
        "files": n_files,
        "opened": n_opened,
        "audited": n_candidates,
        "cached": cache.hits,
    }
    notes = list(notes)
    unlisted = unchecked(dirs)
    if unlisted:
        more = f" and {len(unlisted) - 5} more" if len(unlisted) > 5 else ""
        notes.append(f"not checked, no RECORD lists their files: {', '.join(unlisted[:5])}{more}")
    return EnvReport(exe, list(dirs), devs, checks, notes, generic_ok, scanned)


def unchecked(dirs: Iterable[Path]) -> list[str]:
    """Installed distributions whose files no RECORD lists (``.egg-info``, a missing or
    oversized RECORD): their names, sorted."""
    out = []
    for location in dirs:
        for meta in sorted(location.glob("*.egg-info")) + sorted(location.glob("*.dist-info")):
            if meta.suffix != ".dist-info" or not _record_file(meta / "RECORD"):
                out.append(meta.name[: -len(meta.suffix)].split("-", 1)[0])
    return sorted(out)
