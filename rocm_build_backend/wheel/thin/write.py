"""The member loop of ``thin``: every member of the source wheel, in order, written to the
new wheel thinned, copied, renamed or left out (with a new version: METADATA's version and the
SBOMs' names of the wheel updated); then the stamp and a rebuilt RECORD.

One member is in memory (or in a mapped temporary file) at a time. Every member's bytes are
held against the source wheel's RECORD as they are read (``wheel.record``): a wheel whose
RECORD does not match is refused, not written out with a clean one. Nothing prints here,
and nothing is written outside the open output file handed in by ``thin.thin_wheel``.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from typing import IO, Any, Callable

from rocm_build_backend._version import __version__
from rocm_build_backend.binary.audit import audit_bytes
from rocm_build_backend.binary.report import sorted_targets
from rocm_build_backend.binary.rewrite import (
    FileResult,
    might_hold_device_code,
    thin_buffer,
)
from rocm_build_backend.binary.rewrite_plan import CannotThin, Selector
from rocm_build_backend.errors import FormatError
from rocm_build_backend.gpu.targets import GpuTarget
from rocm_build_backend.wheel.archive import MAX_METADATA, MAX_TEXT, read_member, read_named
from rocm_build_backend.wheel.record import MAX_RECORD, RecordCheck, hash_field, record_bytes
from rocm_build_backend.wheel.sbom import is_sbom, renamed_sbom
from rocm_build_backend.wheel.stamp import make_stamp, set_metadata_version, stamp_bytes
from rocm_build_backend.wheel.thin import stream as thin_zip
from rocm_build_backend.wheel.thin.result import (
    COMPRESS_LEVEL,
    STAMP_NAME,
    MemberResult,
    ThinResult,
)

MAX_STAMP = 1 << 20


def _renamer(dist_info: str, new_version: str | None) -> Callable[[str], str]:
    base = dist_info[: -len(".dist-info")]
    if new_version is None:
        return lambda name: name
    new_base = f"{base.rsplit('-', 1)[0]}-{new_version}"
    rename = {f"{base}.dist-info": f"{new_base}.dist-info", f"{base}.data": f"{new_base}.data"}

    def renamed(name: str) -> str:
        top, sep, rest = name.partition("/")
        return rename.get(top, top) + sep + rest

    return renamed


class _Writer:
    def __init__(
        self,
        zf: zipfile.ZipFile,
        raw: IO[bytes],
        zout: zipfile.ZipFile,
        sel: Selector,
        result: ThinResult,
        tmpdir: str,
        record: RecordCheck,
        compact: bool = True,
    ) -> None:
        self.zf, self.raw, self.zout, self.sel, self.record = zf, raw, zout, sel, record
        self.compact = compact
        self.total = os.fstat(raw.fileno()).st_size
        self.result, self.tmpdir = result, tmpdir
        self.rows: list[tuple[str, str, str]] = []
        self.audit: dict[str, dict[str, list[str]]] = {}

    def add_row(self, name: str, digest: Any, size: int) -> None:
        self.rows.append((name, hash_field(digest), str(size)))
        self.result.installed_after += size

    def plain(self, info: zipfile.ZipInfo, name: str) -> None:
        digest = self.record.digest_for(info.filename)
        size = thin_zip.copy_raw(self.zf, self.raw, self.total, info, self.zout, thin_zip.new_info(info, name), digest)
        self.record.verify(info.filename, digest)
        self.add_row(name, digest, size)

    def original(self, info: zipfile.ZipInfo, limit: int, *, larger_ok: bool = False) -> bytes:
        """A small member's bytes as they are, checked against RECORD. Past ``limit``: with
        ``larger_ok`` b"" (hashed, not kept), else WheelError."""
        if info.file_size > limit and larger_ok:
            digest = self.record.digest_for(info.filename)
            thin_zip.hash_member(self.zf, self.raw, info, self.total, digest)
            self.record.verify(info.filename, digest)
            return b""
        thin_zip.charge_member(info)
        data = read_member(self.zf, info, limit, info.filename)
        self.record.verify_bytes(info.filename, data)
        return data

    def data(self, info: zipfile.ZipInfo, name: str, data: bytes) -> None:
        digest = hashlib.sha256()
        zinfo = thin_zip.new_info(info, name)
        thin_zip.write_buffer(self.zout, zinfo, data, len(data), digest)
        self.add_row(name, digest, len(data))

    def binary(self, info: zipfile.ZipInfo, name: str) -> None:
        buf = thin_zip.read_member(self.zf, self.raw, info, self.total, self.tmpdir)
        try:
            self.record.verify_bytes(info.filename, buf)
            try:
                res = thin_buffer(buf, self.sel, info.filename, compact=self.compact)
            except FormatError as exc:  # the same kind (damaged, or past the budget), naming the member
                raise type(exc)(f"{info.filename}: {exc.message}") from None
            if res.restore:
                thin_zip.release(buf)
                buf = thin_zip.read_member(self.zf, self.raw, info, self.total, self.tmpdir)
            self._settle(info, name, res, buf)
        finally:
            thin_zip.release(buf)

    def _settle(self, info: zipfile.ZipInfo, name: str, res: FileResult, buf: thin_zip.Buffer) -> None:
        m = MemberResult(
            info.filename,
            res.action,
            list(res.kept),
            list(res.dropped),
            res.reason,
            size_before=info.file_size,
            layout=res.layout,
            layout_reason=res.layout_reason,
        )
        digest = hashlib.sha256()
        zinfo = thin_zip.new_info(info, name)
        if res.action == "dropped":
            self.result.members.append(m)
            self.result.had.extend(res.dropped)
            return
        if res.data is not None:  # a compacted library: smaller on disk too
            buf = res.data
        if res.action == "thinned":
            size = res.new_size if res.new_size is not None else len(buf)
            zinfo.compress_type = zipfile.ZIP_DEFLATED
            thin_zip.write_buffer(self.zout, zinfo, buf, size, digest)
        else:
            size = thin_zip.copy_compressed(self.raw, self.total, info, self.zout, zinfo, buf, digest)
        self.add_row(name, digest, size)
        if res.action == "none":
            return
        m.size_after = size
        self._audit(name, memoryview(buf)[:size], m)
        self.result.members.append(m)

    def _audit(self, name: str, view: memoryview, m: MemberResult) -> None:
        report = audit_bytes(view, name)  # type: ignore[arg-type]  # any buffer works
        self.audit[name] = {"targets": list(report.targets), "complete": list(report.complete)}
        if m.action == "kept-whole":
            m.kept = [t for t in report.targets if _keeps(self.sel, t)]
            self.result.had.extend(report.targets)
        else:
            self.result.had.extend(m.kept + m.dropped)
        view.release()


def _keeps(sel: Selector, target: str) -> bool:
    try:
        return sel.keeps(target)
    except CannotThin:
        return False


def write(
    zf: zipfile.ZipFile,
    raw: IO[bytes],
    fh: IO[bytes],
    dist_info: str,
    targets: list[GpuTarget],
    result: ThinResult,
    new_version: str | None,
    tmpdir: str,
    *,
    compact: bool = True,
) -> None:
    """Write the thinned wheel to ``fh``; fills ``result``. ``compact``: thinned libraries are
    compacted (smaller installed), else rewritten in place only."""

    renamed = _renamer(dist_info, new_version)
    record = f"{dist_info}/RECORD"
    stamp_name = f"{dist_info}/{STAMP_NAME}"
    old_stamp: bytes | None = None
    check = _record_check(zf, record, result.source.name)
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED, allowZip64=True, compresslevel=COMPRESS_LEVEL) as zout:
        w = _Writer(zf, raw, zout, Selector(targets), result, tmpdir, check, compact)
        for info in zf.infolist():
            name = renamed(info.filename)
            if info.is_dir():
                zout.writestr(thin_zip.new_info(info, name), b"")
                continue
            result.installed_before += info.file_size
            if info.filename == record:
                continue
            if info.filename == stamp_name:
                old_stamp = w.original(info, MAX_STAMP, larger_ok=True)
                continue
            if info.filename == f"{dist_info}/METADATA" and new_version is not None:
                w.data(info, name, set_metadata_version(w.original(info, MAX_METADATA), new_version))
                continue
            if new_version is not None and is_sbom(info.filename, dist_info):
                sbom = w.original(info, MAX_TEXT)
                w.data(info, name, renamed_sbom(sbom, result.source.name, result.output.name))
                continue
            head = thin_zip.head_of(zf, info) if info.file_size else b""
            if might_hold_device_code(head):
                w.binary(info, name)
            else:
                w.plain(info, name)
        check.finish()
        rinfo = zf.getinfo(record)
        stamp = _stamp(old_stamp, targets, w.audit, result)
        sinfo = zipfile.ZipInfo(renamed(stamp_name), date_time=rinfo.date_time)
        sinfo.external_attr = 0o100644 << 16
        sinfo.create_system = 3
        sinfo.compress_type = zipfile.ZIP_DEFLATED
        w.data(sinfo, sinfo.filename, stamp)
        rows = w.rows + [(renamed(record), "", "")]
        written = record_bytes(rows)
        result.installed_after += len(written)
        zout.writestr(thin_zip.new_info(rinfo, renamed(record)), written)


def _record_check(zf: zipfile.ZipFile, record: str, wheel: str) -> RecordCheck:
    return RecordCheck(read_named(zf, record, MAX_RECORD, "RECORD"), wheel, record)


def _stamp(
    old: bytes | None, targets: list[GpuTarget], audit: dict[str, dict[str, list[str]]], result: ThinResult
) -> bytes:
    """The new stamp: the targets thinned to, the audit of the new files, where it came from;
    the build host and toolchain are kept from the old stamp when it has them."""
    prior: dict[str, Any] = {}
    if old:
        try:
            loaded = json.loads(old.decode("utf-8"))
            prior = loaded if isinstance(loaded, dict) else {}
        except (UnicodeDecodeError, ValueError):
            prior = {}
    host = prior.get("host", {}).get("gpus", []) if isinstance(prior.get("host"), dict) else []
    tool = prior.get("toolchain") if isinstance(prior.get("toolchain"), dict) else {}
    stamp = make_stamp(
        requested=targets,
        source="thin",
        audit_files=audit,
        host_gpus=[g for g in host if isinstance(g, str)],
        toolchain=tool or {},
        version=__version__,
    )
    stamp["thinned_from"] = {
        "wheel": result.source.name,
        "sha256": result.sha256,
        "targets": sorted_targets(result.had),
    }
    return stamp_bytes(stamp)
