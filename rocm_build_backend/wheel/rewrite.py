"""Rewriting a built wheel atomically: new version, added and patched members, a fresh RECORD.

``rewrite_members`` writes the new wheel to a temporary file in the same folder and moves it
over the old one with ``os.replace``, so an interrupted rewrite leaves the original untouched
(``clean_stale_temps`` removes what a killed one left). ``rewrite_metadata_dir`` gives a
prepared ``.dist-info`` folder the same version. ``set_metadata_version`` edits METADATA bytes.

It knows nothing of what a stamp says (``stamp.py`` hands its bytes in as a ``.dist-info``
file); it extracts nothing to disk and reads a member whole only up to ``archive.MAX_TEXT``.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import zipfile
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from packaging.version import InvalidVersion, Version

from rocm_build_backend.errors import RocmBuildBackendError, WheelError
from rocm_build_backend.files import leftover_pattern, remove_leftovers
from rocm_build_backend.wheel.archive import (
    MAX_MEMBERS,
    MAX_TEXT,
    dist_info_dir,
    open_wheel,
    read_member,
    wheel_name_parts,
)
from rocm_build_backend.wheel.record import hash_field, record_bytes
from rocm_build_backend.wheel.zipcopy import can_copy_raw, copy_raw, copy_stream, new_info
from rocm_build_backend.wheel.sbom import renamed_sbom

TMP_SUFFIX = ".rocm-build-backend.tmp"
_TMP_RE = leftover_pattern(".", TMP_SUFFIX)
_SIGNATURES = ("RECORD.jws", "RECORD.p7s")

Patch = Callable[[bytes], bytes]


def set_metadata_version(metadata: bytes, new_version: str) -> bytes:
    """METADATA bytes with the header's ``Version:`` field set to ``new_version``."""
    text = metadata.decode("utf-8", "surrogateescape")
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if not line.strip():
            break  # end of the header; the body (description) follows
        if line.lower().startswith("version:"):
            ending = line[len(line.rstrip("\r\n")) :]
            lines[i] = f"Version: {new_version}{ending}"
            return "".join(lines).encode("utf-8", "surrogateescape")
    raise WheelError("METADATA has no 'Version:' field", hint="rebuild the wheel with its build backend")


def _check_member_name(name: str, what: str) -> None:
    parts = name.split("/")
    if (
        not name
        or name.startswith("/")
        or "\\" in name
        or name.endswith("/")
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise WheelError(f"{what} {name!r} is not a valid path inside a wheel")


def clean_stale_temps(folder: Path) -> list[Path]:
    """Remove temporary wheels left in ``folder`` by a rewrite that was killed; return them.
    ``files.remove_leftovers``' rule, with no waiting: a rewrite's temporary lives only while its
    process does."""
    return [folder / name for name in remove_leftovers(folder, _TMP_RE, age=0)]


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def normalized_version(version: str) -> str:
    """``version`` normalised by PEP 440; WheelError when it is not a version."""
    try:
        return str(Version(version))
    except InvalidVersion:
        raise WheelError(f"new version {version!r} is not a valid PEP 440 version") from None


class _Job:
    """One rewrite, planned: what goes in, in which order, under which names.

    A plain class, not a dataclass: this module is imported by the build hooks, and
    ``dataclasses`` costs them several milliseconds.
    """

    def __init__(
        self,
        dist_info: str,
        record_info: "zipfile.ZipInfo",
        extra: dict[str, bytes],
        patches: dict[str, Patch],
        new_version: str | None,
        rename: dict[str, str],
    ) -> None:
        self.dist_info = dist_info
        self.record_info = record_info
        self.extra = extra
        self.patches = patches
        self.new_version = new_version
        self.rename = rename
        self.old_file = self.new_file = ""  # the wheel's file name before and after
        self.plan: list[tuple[str, "zipfile.ZipInfo | None"]] = []

    def renamed(self, name: str) -> str:
        top, sep, rest = name.partition("/")
        return self.rename.get(top, top) + sep + rest


def _inspect(
    zin: "zipfile.ZipFile", src: Path, extra: dict[str, bytes], patches: dict[str, Patch]
) -> tuple[list["zipfile.ZipInfo"], str]:
    """The wheel's members and its ``.dist-info``, after every check that refuses a rewrite."""
    infos = zin.infolist()
    if len(infos) > MAX_MEMBERS:
        raise WheelError(f"{src.name} has {len(infos)} members, more than {MAX_MEMBERS}")
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        dup = sorted(n for n, k in Counter(names).items() if k > 1)[:3]
        raise WheelError(
            f"{src.name} holds duplicate members: {', '.join(dup)}", hint="rebuild the wheel with its build backend"
        )
    dist_info = dist_info_dir(names, src.name)
    required = [f"{dist_info}/{n}" for n in ("METADATA", "WHEEL", "RECORD")]
    missing = [n for n in required if n not in names]
    if missing:
        raise WheelError(f"{src.name} lacks {', '.join(missing)}", hint="rebuild the wheel with its build backend")
    for name in extra:
        top = name.split("/", 1)[0]
        if top.endswith(".dist-info") and top != dist_info:
            raise WheelError(f"extra file {name!r} is not in the wheel's {dist_info}")
        if name in required:
            raise WheelError(f"extra file {name!r} would replace the wheel's own {name.rsplit('/', 1)[1]}")
    unknown = sorted(set(patches) - set(names))
    if unknown:
        raise WheelError(f"cannot patch {', '.join(unknown)}: not in {src.name}")
    return infos, dist_info


def _plan(job: _Job, infos: list["zipfile.ZipInfo"]) -> None:
    """The order: existing members (replaced in place), new package files before the first
    .data/.dist-info member, new dist-info files just before RECORD."""
    names = {i.filename for i in infos}
    added = [n for n in job.extra if n not in names]
    added_pkg = [n for n in added if not n.split("/", 1)[0].endswith((".dist-info", ".data"))]
    added_meta = [n for n in added if n not in added_pkg]
    inserted = False
    for info in infos:
        top = info.filename.split("/", 1)[0]
        if not inserted and top in job.rename:
            job.plan.extend((n, None) for n in added_pkg)
            inserted = True
        if info.filename == job.record_info.filename:
            continue
        if top == job.dist_info and info.filename.rsplit("/", 1)[-1] in _SIGNATURES:
            continue
        job.plan.append((info.filename, info))
    if not inserted:
        job.plan.extend((n, None) for n in added_pkg)
    job.plan.extend((n, None) for n in added_meta)


def rewrite_members(
    wheel_path: str | os.PathLike[str],
    *,
    dist_info_files: Mapping[str, bytes] | None = None,
    new_version: str | None = None,
    extra_files: Mapping[str, bytes] | None = None,
    patch_files: Mapping[str, Patch] | None = None,
) -> Path:
    """Rewrite a wheel in place; ``stamp.rewrite_wheel`` documents the arguments and the result.

    ``dist_info_files``: base name -> bytes, written into the wheel's ``.dist-info`` (under its
    new name when the version changes), replacing a member of that name.
    """
    src = Path(wheel_path)
    parts = wheel_name_parts(src.name)
    clean_stale_temps(src.parent)
    extra = dict(extra_files or {})
    patches = dict(patch_files or {})
    for name in extra:
        _check_member_name(name, "extra file")
        if not isinstance(extra[name], (bytes, bytearray)):
            raise WheelError(f"extra file {name!r} must be bytes")
    for name in patches:
        _check_member_name(name, "patched file")
    zin = open_wheel(src)
    try:
        with zin:
            infos, dist_info = _inspect(zin, src, extra, patches)
            base = dist_info[: -len(".dist-info")]
            new_parts, new_base = list(parts), base
            if new_version is not None:
                new_version = normalized_version(new_version)
                new_base = f"{base.rsplit('-', 1)[0]}-{new_version}"
                new_parts[1] = new_version
            for name, data in (dist_info_files or {}).items():
                extra[f"{dist_info}/{name}"] = data
            job = _Job(
                dist_info,
                zin.getinfo(f"{dist_info}/RECORD"),
                extra,
                patches,
                new_version,
                {f"{base}.dist-info": f"{new_base}.dist-info", f"{base}.data": f"{new_base}.data"},
            )
            job.old_file, job.new_file = src.name, "-".join(new_parts) + ".whl"
            _plan(job, infos)
            return _replace(src, job.new_file, zin, job)
    except RocmBuildBackendError:
        raise
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        OSError,
        EOFError,
        ValueError,
        KeyError,
        NotImplementedError,
        RuntimeError,
    ) as exc:
        raise WheelError(
            f"cannot rewrite {src.name}: {exc}", hint="the original wheel is unchanged; rebuild it if it is damaged"
        ) from None


def _replace(src: Path, new_name: str, zin: "zipfile.ZipFile", job: _Job) -> Path:
    """Write the new wheel beside ``src`` under a temporary name, then move it into place."""
    dst = src.with_name(new_name)
    fd, tmp = tempfile.mkstemp(prefix=f".{new_name}.{os.getpid()}.", suffix=TMP_SUFFIX, dir=src.parent)
    tmp_path: Path | None = Path(tmp)
    try:
        with os.fdopen(fd, "w+b") as fh, open(src, "rb") as raw:
            _write_members(zin, raw, fh, job)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.chmod(tmp, os.stat(src).st_mode & 0o7777)
        except OSError:
            pass
        os.replace(tmp, dst)
        tmp_path = None
        if dst != src:
            os.unlink(src)
        _fsync_dir(src.parent)
        return dst
    finally:
        if tmp_path is not None:
            try:
                os.unlink(tmp_path)
            except OSError:
                pass


def _new_bytes(zin: "zipfile.ZipFile", old_name: str, info: "zipfile.ZipInfo | None", job: _Job) -> bytes | None:
    """The member's new content when this rewrite changes it; None to copy it as it is."""
    if old_name in job.extra:
        return bytes(job.extra[old_name])
    assert info is not None  # a name not in ``extra`` is an existing member
    if old_name in job.patches:
        data = job.patches[old_name](read_member(zin, info, MAX_TEXT, "a patched file"))
        if not isinstance(data, (bytes, bytearray)):
            raise WheelError(f"the patch for {old_name} returned {type(data).__name__}, not bytes")
        return bytes(data)
    if old_name == f"{job.dist_info}/METADATA" and job.new_version is not None:
        return set_metadata_version(read_member(zin, info, MAX_TEXT, "METADATA"), job.new_version)
    if job.new_version is not None and old_name.startswith(f"{job.dist_info}/sboms/"):
        return renamed_sbom(read_member(zin, info, MAX_TEXT, "an SBOM"), job.old_file, job.new_file)
    return None


def _zinfo_for(name: str, info: "zipfile.ZipInfo | None", job: _Job) -> "zipfile.ZipInfo":
    if info is None:  # new members: mode 0644, deflate, the old RECORD's date
        zinfo = zipfile.ZipInfo(name, date_time=job.record_info.date_time)
        zinfo.compress_type = zipfile.ZIP_DEFLATED
        zinfo.create_system = 3
        zinfo.external_attr = 0o100644 << 16
        return zinfo
    return new_info(info, name)


def _write_members(zin: "zipfile.ZipFile", raw: IO[bytes], fh: IO[bytes], job: _Job) -> list[tuple[str, str, str]]:
    """Write the planned members and a fresh RECORD to ``fh``; return the RECORD rows."""
    rows: list[tuple[str, str, str]] = []
    raw_size = os.fstat(raw.fileno()).st_size
    with zipfile.ZipFile(fh, "w") as zout:
        for old_name, info in job.plan:
            name = job.renamed(old_name)
            zinfo = _zinfo_for(name, info, job)
            if old_name.endswith("/"):  # a directory entry: no RECORD row
                zout.writestr(zinfo, b"")
                continue
            data = _new_bytes(zin, old_name, info, job)
            digest = hashlib.sha256()
            if data is not None:
                zinfo.file_size = len(data)
                with zout.open(zinfo, "w") as w:
                    size = copy_stream(io.BytesIO(data), w, digest)
            elif info is not None and can_copy_raw(zout, info):
                size = copy_raw(raw, raw_size, info, zout, zinfo, digest.update)
            else:
                assert info is not None
                zinfo.file_size = info.file_size
                with zin.open(info) as r, zout.open(zinfo, "w") as w:
                    size = copy_stream(r, w, digest)
            rows.append((name, hash_field(digest), str(size)))
        record = job.record_info
        rows.append((job.renamed(record.filename), "", ""))
        rinfo = zipfile.ZipInfo(job.renamed(record.filename), date_time=record.date_time)
        rinfo.compress_type = record.compress_type
        rinfo.create_system = record.create_system
        rinfo.external_attr = record.external_attr or (0o100644 << 16)
        zout.writestr(rinfo, record_bytes(rows))
    return rows


def rewrite_metadata_dir(
    metadata_dir: str | os.PathLike[str],
    new_version: str,
    *,
    extra_files: Mapping[str, bytes] | None = None,
) -> str:
    """Give a prepared ``.dist-info`` directory the version the wheel will have.

    ``metadata_dir`` is the folder handed to ``prepare_metadata_for_build_*`` (holding one
    ``.dist-info``) or the ``.dist-info`` folder itself. METADATA ``Version:`` is set and the
    folder renamed ``<name>-<new version>.dist-info``; ``extra_files`` (file name -> bytes)
    are written into it. Returns the new folder's base name, which the hook must return.
    """
    path = Path(metadata_dir)
    if path.name.endswith(".dist-info"):
        dist_info = path
    else:
        found = sorted(p for p in path.glob("*.dist-info") if p.is_dir())
        if len(found) != 1:
            raise WheelError(f"{path} must hold exactly one .dist-info directory (found {len(found)})")
        dist_info = found[0]
    new_version = normalized_version(new_version)
    metadata = dist_info / "METADATA"
    try:
        old = metadata.read_bytes()
        new = set_metadata_version(old, new_version)
        if new != old:
            tmp = metadata.with_name(".METADATA" + TMP_SUFFIX)
            tmp.write_bytes(new)
            os.replace(tmp, metadata)
        for name, data in (extra_files or {}).items():
            if "/" in name or name in ("", ".", "..", "METADATA"):
                raise WheelError(f"extra metadata file {name!r} must be a plain file name")
            tmp = dist_info / f".{name}{TMP_SUFFIX}"
            tmp.write_bytes(bytes(data))
            os.replace(tmp, dist_info / name)
        target = dist_info.with_name(
            f"{dist_info.name[: -len('.dist-info')].rsplit('-', 1)[0]}-{new_version}.dist-info"
        )
        if target != dist_info:
            if target.exists():
                raise WheelError(f"cannot rename {dist_info.name}: {target.name} already exists")
            os.rename(dist_info, target)
    except FileNotFoundError as exc:
        raise WheelError(f"cannot update prepared metadata in {dist_info}: {exc.strerror}: {exc.filename}") from None
    except OSError as exc:
        raise WheelError(f"cannot update prepared metadata in {dist_info}: {exc}") from None
    return target.name
