"""What GPU code a wheel, a shared library or a code object really contains.

Setting an arch variable is not proof; the binary is. This module finds device code
containers by ELF section (``.hip_fatbin``, ``.llvm.offloading``, ``.nv_fatbin``,
``__nv_relfatbin``) and standalone files by their magic bytes, reads each container's
targets with the readers in ``_offload`` and ``_cuda``, and reports per file:

- ``targets``: every target that any container holds;
- ``complete``: the targets that *every* container with kernels holds. A library whose
  second translation unit was built for gfx90a only does not fully support gfx908, even
  though gfx908 appears in its first bundle.

Wheels are read in place, member by member, nothing is extracted: a stored member is read
at its offsets, a deflated one is inflated on demand with restart points every few MiB, so
the section table at the end of a library costs one pass and the device sections after it
only what they need (``InflateSource``).

``verify(report, requested)`` compares the result with the targets a build asked for.
Matching rule (the loader's, see ``compat``): a requested target is covered by a file when
each of the file's containers with kernels holds code that loads on every device
configuration the request stands for. A bare request such as ``gfx90a`` stands for the
processor in each xnack/sramecc mode it supports, so it is met by ``gfx90a`` code (built
for "any") or by ``gfx90a:xnack+`` and ``gfx90a:xnack-`` together, not by
``gfx90a:xnack-`` alone; ``gfx90a:xnack-`` is met by ``gfx90a`` or ``gfx90a:xnack-``.
Generic code (``gfx9-4-generic``) meets a request for a processor it covers (the HIP
runtime loads it from ROCm 6.4 on) unless ``generic_ok=False``. NVIDIA: ``sm_XY`` is met
by a cubin that loads on sm_XY (same major, minor <= Y; PTX alone does not count, it is a
JIT fallback), ``sm_XYa``/``sm_XYf`` and ``compute_XY`` only by exactly that target.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.elf import BytesSource, FileSource, FormatError, Source, SubSource, msg
from rocm_build_backend.binary.offload import (
    BUNDLE_MAGIC,
    CCOB_MAGIC,
    OFFLOAD_MAGIC,
    Container,
    code_object_container,
    parse_bundle_id,
    read_bundle,
    read_ccob,
    read_offload_binary,
    walk_hip_fatbin,
    walk_offloading,
)
from rocm_build_backend.errors import TargetMismatchError
from rocm_build_backend.gpu.targets import GpuTarget, parse_target, sort_targets

__all__ = [
    "AuditReport",
    "Container",
    "FileReport",
    "audit_bytes",
    "audit_file",
    "audit_paths",
    "audit_wheel",
    "mismatch_error",
    "verify",
]

_DEVICE_SECTIONS = {".hip_fatbin", ".nv_fatbin", "__nv_relfatbin", ".llvm.offloading"}
_ZIP_MAGIC = b"PK\x03\x04"
_SCAN_ATTEMPTS = 4096
# what targets.sort_targets can order; anything else a damaged file names is listed last
_SORTABLE = re.compile(r"gfx[0-9]+[0-9a-f]{2}|gfx[0-9]+(?:-[0-9]+)?-generic|(?:sm|compute)_[0-9]+[af]?")


# --------------------------------------------------------------------------- reports

def _target_obj(text: str) -> GpuTarget | None:
    processor, *features = text.split(":")
    values: dict[str, str] = {}
    for feat in features:
        name, sign = feat[:-1], feat[-1:]
        if name not in ("sramecc", "xnack") or sign not in "+-" or not sign or name in values:
            return None
        values[name] = sign
    if not processor:
        return None
    return GpuTarget(processor, sramecc=values.get("sramecc"), xnack=values.get("xnack"))


def sorted_targets(targets: Iterable[str]) -> list[str]:
    """Target strings in the order ``targets.sort_targets`` uses; odd ones last."""
    known: dict[GpuTarget, str] = {}
    odd: set[str] = set()
    for text in set(targets):
        t = _target_obj(text)
        if t is not None and str(t) == text and _SORTABLE.fullmatch(t.processor):
            known[t] = text
        else:
            odd.add(text)
    return [known[t] for t in sort_targets(known)] + sorted(odd)


def _units(containers: Sequence[Container]) -> list[set[str]]:
    """Target sets that must each cover a target for it to reach every kernel.

    A container with no kernels (nvcc device-link stub) does not count; OffloadBinary
    images of one section are one translation unit built for several targets.
    """
    read = [c for c in containers if c.read]
    withk = [c for c in read if c.kernels] or read
    units: list[set[str]] = []
    grouped: dict[str, set[str]] = {}
    for c in withk:
        if c.kind == "offload-binary":
            if c.where not in grouped:
                grouped[c.where] = set()
                units.append(grouped[c.where])
            grouped[c.where].update(c.targets)
        else:
            units.append(set(c.targets))
    return units


@dataclass
class FileReport:
    """One file's device code. ``path`` is the file, or the member inside ``archive``."""

    path: str
    containers: list[Container] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    complete: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    readable: bool = True
    kind: str = "other"  # elf, code-object, cubin, bundle, ccob, fatbin, offload-binary, other
    archive: str = ""
    size: int = 0

    @property
    def has_device_code(self) -> bool:
        return bool(self.containers)

    @property
    def fully_read(self) -> bool:
        return self.readable and all(c.read for c in self.containers)

    @property
    def label(self) -> str:
        return self.path

    def finish(self) -> "FileReport":
        for c in self.containers:
            for p in c.problems:
                msg = p if p.startswith(c.where) or c.where == "file" else f"{c.where}: {p}"
                if msg not in self.problems:
                    self.problems.append(msg)
        # In a linked library, __nv_relfatbin keeps the relocatable cubins for later device
        # linking; the runtime loads .nv_fatbin (cuobjdump lists only that). Count what loads.
        linked = any(c.where == ".nv_fatbin" for c in self.containers)
        counted = []
        for c in self.containers:
            if linked and c.where == "__nv_relfatbin":
                c.note = c.note or "relocatable code for device linking; not loaded at run time"
            else:
                counted.append(c)
        self.targets = sorted_targets(t for c in counted for t in c.targets)
        units = _units(counted)
        common = set.intersection(*units) if units else set()
        self.complete = sorted_targets(common)
        self.readable = not self.problems
        return self

    def to_json(self) -> dict:
        out = {
            "path": self.path,
            "kind": self.kind,
            "targets": list(self.targets),
            "complete": list(self.complete),
            "problems": list(self.problems),
            "readable": self.readable,
            "containers": [c.to_json() for c in self.containers],
        }
        if self.archive:
            out["archive"] = self.archive
        return out


@dataclass
class AuditReport:
    files: list[FileReport] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    source: str = ""  # what was audited: a wheel's path, or paths joined
    skipped: int = 0  # files that hold nothing a GPU reads (Python, text, data): not listed

    @property
    def ok(self) -> bool:
        """True when every file was read completely (no damage, no unread container)."""
        return not self.problems and all(f.fully_read for f in self.files)

    @property
    def device_files(self) -> list[FileReport]:
        return [f for f in self.files if f.has_device_code]

    def finish(self) -> "AuditReport":
        self.targets = sorted_targets(t for f in self.files for t in f.targets)
        return self

    def to_json(self) -> dict:
        return {
            "files": [f.to_json() for f in self.files],
            "targets": list(self.targets),
            "problems": list(self.problems),
            "ok": self.ok,
            "skipped": self.skipped,
        }

    def to_text(self) -> str:
        """A table: one row per file, one indented row per container when there are several."""
        rows = [("FILE", "KIND", "TARGETS", "EVERY KERNEL", "NOTE")]
        several = len(self._archives()) > 1
        for f in self.files:
            name = f"{f.archive}!{f.path}" if several else f.path
            if f.containers:
                every = "same" if f.complete == f.targets else (", ".join(f.complete) or "none")
                note = f.containers[0].note if len(f.containers) == 1 else f"{len(f.containers)} containers"
                if not f.readable:
                    note = "damaged (see problems)" + (f"; {note}" if note else "")
                rows.append((name, f.kind, ", ".join(f.targets) or "(none read)", every, note))
                if len(f.containers) > 1:
                    # containers that hold the same thing share a row (libtorch_cuda: 444 fatbins)
                    groups: dict[tuple, list[Container]] = {}
                    for c in f.containers:
                        key = (c.where, c.kind, tuple(c.targets), c.note, c.kernels, c.read)
                        groups.setdefault(key, []).append(c)
                    for (where, kind, targets, cnote, _k, _r), cs in groups.items():
                        label = f"  {where} +0x{cs[0].offset:x}" if len(cs) == 1 else f"  {where} x{len(cs)}"
                        rows.append((label, kind, ", ".join(targets) or "-", "", cnote))
            else:
                rows.append((name, f.kind, "no device code" if f.readable else "(unreadable)", "", ""))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = [self.source] if self.source else []
        for r in rows:
            cells = "  ".join(f"{r[i]:<{widths[i]}}" for i in range(4))
            lines.append((cells + "  " + r[4]) if r[4] else cells.rstrip())
        if not self.files:
            lines.append("(no binaries)")
        lines.append("")
        lines.append("targets: " + (", ".join(self.targets) if self.targets else "none"))
        if self.skipped:
            lines.append(f"{self.skipped} other file(s) hold no device code and are not listed")
        problems = list(self.problems) + [f"{f.path}: {p}" for f in self.files for p in f.problems]
        problems += [f"{f.path}: {c.note}" for f in self.files for c in f.containers if not c.read]
        if problems:
            lines.append("problems:")
            lines.extend(f"  {p}" for p in problems)
        return "\n".join(lines)

    def _archives(self) -> set[str]:
        return {f.archive for f in self.files if f.archive}


# --------------------------------------------------------------------------- reading files

def _sections_wanted(name: str, typ: int) -> bool:
    return (
        name in _DEVICE_SECTIONS
        or typ == _elf.SHT_LLVM_OFFLOADING
        or name.startswith("__CLANG_OFFLOAD_BUNDLE__")
    )


def _truncation(src: Source, hdr: _elf.ElfHeader) -> str:
    """A problem string when the ELF file's section table lies past the end of its data."""
    try:
        table = _elf.read_sections(src, hdr, lambda n, t: False)
    except FormatError as exc:
        return msg(exc)
    if table.data_end > src.size:
        return f"truncated: sections end at 0x{table.data_end:x}, the file has {src.size} bytes"
    return ""


def _audit_elf(src: Source, r: FileReport) -> None:
    try:
        hdr = _elf.read_header(src)
    except FormatError as exc:
        r.kind = "elf"
        r.problems.append(msg(exc))
        return
    if hdr.machine == _elf.EM_AMDGPU:
        r.kind = "code-object"
        r.containers.append(code_object_container(hdr))
        problem = _truncation(src, hdr)
        if problem:
            r.problems.append(problem)
        return
    if hdr.machine == _elf.EM_CUDA:
        from rocm_build_backend.binary.cuda import cubin_container

        r.kind = "cubin"
        r.containers.append(cubin_container(src, hdr))
        problem = _truncation(src, hdr)
        if problem:
            r.problems.append(problem)
        return
    r.kind = "elf"
    try:
        table = _elf.read_sections(src, hdr, _sections_wanted)
    except FormatError as exc:
        r.problems.append(msg(exc))
        _scan(src, r)
        return
    if table.data_end > src.size:
        r.problems.append(
            f"truncated: sections end at 0x{table.data_end:x}, the file has {src.size} bytes"
        )
    bundle_sections = []
    for sec in sorted(table.sections, key=lambda s: (s.offset, s.index)):
        if sec.type == _elf.SHT_NOBITS or sec.size == 0:
            continue
        if sec.flags & _elf.SHF_COMPRESSED:
            r.problems.append(f"{sec.name}: compressed ELF sections are not supported")
            continue
        cut = sec.offset + sec.size > src.size
        sub = SubSource(src, sec.offset, sec.size)
        if sec.name.startswith("__CLANG_OFFLOAD_BUNDLE__"):
            bundle_sections.append(sec)
            continue
        if sec.name == ".hip_fatbin":
            found, problems = walk_hip_fatbin(sub, sec.name, cut=cut)
        elif sec.name in (".nv_fatbin", "__nv_relfatbin"):
            from rocm_build_backend.binary.cuda import walk_fatbins

            found, problems = walk_fatbins(sub, sec.name, cut=cut)
        else:
            found, problems = walk_offloading(sub, sec.name)
        r.containers.extend(found)
        r.problems.extend(problems)
    if bundle_sections:
        r.containers.append(_bundle_sections(bundle_sections))


def _bundle_sections(sections) -> Container:
    """A relocatable object from the old offload driver with ``-fgpu-rdc``: one section
    ``__CLANG_OFFLOAD_BUNDLE__<entry id>`` per target."""
    c = Container("bundle", "__CLANG_OFFLOAD_BUNDLE__*", sections[0].offset)
    for sec in sections:
        try:
            bid = parse_bundle_id(sec.name[len("__CLANG_OFFLOAD_BUNDLE__"):])
        except FormatError as exc:
            c.problems.append(msg(exc))
            continue
        if not bid.is_host and bid.target:
            c.targets.append(bid.target)
    return c


_SCAN_MAGICS = (BUNDLE_MAGIC, CCOB_MAGIC, OFFLOAD_MAGIC, b"\x50\xed\x55\xba")


def _scan(src: Source, r: FileReport) -> None:
    """Damaged ELF without a section table: find containers by magic, with strict checks.

    Only used when the section table is gone (libraries carry these magics in their data,
    so this is never how a healthy file is read). Whatever is found is reported together
    with the damage, never as a clean result.
    """
    from rocm_build_backend.binary.cuda import read_fatbin

    readers = {
        BUNDLE_MAGIC: lambda p: read_bundle(src, p, src.size, "scan", cut=True),
        CCOB_MAGIC: lambda p: read_ccob(src, p, src.size, "scan", cut=True),
        OFFLOAD_MAGIC: lambda p: read_offload_binary(src, p, src.size, "scan"),
        _SCAN_MAGICS[3]: lambda p: read_fatbin(src, p, src.size, "scan", True),
    }
    attempts = 0
    pos = 0
    skip_until = 0
    overlap = len(BUNDLE_MAGIC) - 1
    while pos < src.size and attempts < _SCAN_ATTEMPTS:
        chunk = src.read(pos, 4 << 20)
        if not chunk:
            break
        hits = sorted((pos + i, m) for m in _SCAN_MAGICS for i in _find_all(chunk, m))
        for at, m in hits:
            if at < skip_until or at % 4 or attempts >= _SCAN_ATTEMPTS:
                continue
            attempts += 1
            try:
                c, nxt = readers[m](at)
            except FormatError:
                continue
            if not c.targets and c.kind != "ccob":
                continue
            c.where = f"found at 0x{at:x}"
            r.containers.append(c)
            if nxt is not None and nxt > at:
                skip_until = nxt
        if len(chunk) <= overlap:
            break
        pos += len(chunk) - overlap
    if r.containers:
        r.problems.append("device code found by scanning the damaged file; the list may be incomplete")
    else:
        r.problems.append("no device code found in the bytes present (the file is damaged, so some may be missing)")


def _find_all(data: bytes, magic: bytes) -> list[int]:
    out = []
    i = data.find(magic)
    while i >= 0 and len(out) < _SCAN_ATTEMPTS:
        out.append(i)
        i = data.find(magic, i + 1)
    return out


def _audit_source(src: Source, name: str, archive: str = "") -> FileReport:
    r = FileReport(path=name, archive=archive, size=src.size)
    head = src.read(0, 64)
    try:
        if head[:4] == _elf.ELF_MAGIC:
            _audit_elf(src, r)
        elif head[:24] == BUNDLE_MAGIC or head[:4] == CCOB_MAGIC:
            r.kind = "bundle" if head[:4] == BUNDLE_MAGIC[:4] else "ccob"
            found, problems = walk_hip_fatbin(src, "file", cut=True)
            r.containers.extend(found)
            r.problems.extend(problems)
        elif head[:4] == OFFLOAD_MAGIC:
            r.kind = "offload-binary"
            found, problems = walk_offloading(src, "file")
            r.containers.extend(found)
            r.problems.extend(problems)
        elif head[:4] == _SCAN_MAGICS[3]:
            from rocm_build_backend.binary.cuda import walk_fatbins

            r.kind = "fatbin"
            found, problems = walk_fatbins(src, "file", cut=True)
            r.containers.extend(found)
            r.problems.extend(problems)
    except FormatError as exc:  # the readers catch their own; this is a last line of defence
        r.problems.append(msg(exc))
    if getattr(src, "damaged", ""):
        r.problems.append(src.damaged)
    return r.finish()


def audit_bytes(data: bytes, name: str) -> FileReport:
    """One file's bytes. The kind of file is decided by its magic bytes, not by ``name``."""
    return _audit_source(BytesSource(data), name)


def audit_file(path) -> FileReport:
    """One file on disk, read at the offsets the formats point to (not read whole)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            return _audit_source(FileSource(fh), path)
    except OSError as exc:
        return FileReport(path=path, problems=[f"cannot read: {exc.strerror or exc}"], readable=False)


# --------------------------------------------------------------------------- wheels

class InflateSource:
    """A deflated zip member as a random-access source, inflated on demand.

    Reads that move forward continue the current stream; a read behind it (or far ahead)
    restarts from the nearest saved decompressor state (a copy taken every ``SPACING``
    bytes of output, ~40 KB each), so the section table at a library's end costs one pass
    and later reads of earlier sections cost at most a few MiB each. Nothing is kept but
    the last MiB of output and the restart points.
    """

    IN_CHUNK = 64 << 10
    OUT_STEP = 1 << 20
    SPACING = 8 << 20
    RECENT = 1 << 20

    def __init__(self, fh, base: int, csize: int, usize: int) -> None:
        import zlib

        self._zlib = zlib
        self._fh, self._base, self._csize = fh, base, csize
        self.size = usize
        self.damaged = ""
        self.inflated = 0
        self._cps: list[tuple[int, int, object]] = []
        self._recent: list[tuple[int, bytes]] = []
        self._recent_len = 0
        self._fresh()

    def _fresh(self) -> None:
        self._d = self._zlib.decompressobj(-15)
        self._out = 0
        self._fed = 0
        self._tail = b""
        self._eof = False

    def _restore(self, cp) -> None:
        out, inpos, d = cp
        self._d = d.copy()
        self._out, self._fed, self._tail, self._eof = out, inpos, b"", False

    def _step(self, limit: int) -> bytes:
        """Up to ``limit`` (>= 1) more bytes of output; b'' only at the end."""
        while not self._eof:
            if not self._tail:
                n = min(self.IN_CHUNK, self._csize - self._fed)
                chunk = b""
                if n > 0:
                    self._fh.seek(self._base + self._fed)
                    chunk = self._fh.read(n)
                if not chunk and not self._d.eof:
                    # all input fed: zlib may still hold output it could not return yet
                    try:
                        out = self._d.decompress(b"", limit)
                    except self._zlib.error:
                        out = b""
                    if out:
                        return self._emit(out)
                if not chunk:
                    self._eof = True
                    if not self._d.eof and self._out < self.size:
                        self.damaged = "truncated: the zip member's compressed data ends early"
                    break
                self._fed += len(chunk)
                self._tail = chunk
            before = len(self._tail)
            try:
                out = self._d.decompress(self._tail, limit)
            except self._zlib.error as exc:
                self._eof = True
                self.damaged = f"the zip member's compressed data is damaged ({exc})"
                break
            self._tail = self._d.unconsumed_tail
            if self._d.eof:
                self._eof = True
            if out:
                return self._emit(out)
            if len(self._tail) == before and before:
                self._eof = True
                self.damaged = "the zip member's compressed data is damaged (no progress)"
        return b""

    def _emit(self, out: bytes) -> bytes:
        start = self._out
        self._out += len(out)
        self.inflated += len(out)
        self._remember(start, out)
        if not self._eof and (not self._cps or self._out >= self._cps[-1][0] + self.SPACING):
            self._cps.append((self._out, self._fed - len(self._tail), self._d.copy()))
        return out

    def _remember(self, start: int, data: bytes) -> None:
        if self._recent and self._recent[-1][0] + len(self._recent[-1][1]) != start:
            self._recent, self._recent_len = [], 0
        self._recent.append((start, data))
        self._recent_len += len(data)
        while len(self._recent) > 1 and self._recent_len - len(self._recent[0][1]) >= self.RECENT:
            self._recent_len -= len(self._recent.pop(0)[1])

    def _from_recent(self, off: int, n: int) -> bytes:
        """The part of [off, off+n) that the recent output holds, from ``off`` on."""
        if not self._recent:
            return b""
        first, (last_start, last) = self._recent[0][0], self._recent[-1]
        last_end = last_start + len(last)
        if off < first or off >= last_end:
            return b""
        parts = []
        want_end = min(off + n, last_end)
        for start, data in self._recent:
            s, e = max(off, start), min(want_end, start + len(data))
            if s < e:
                parts.append(data[s - start : e - start])
        return b"".join(parts)

    def read(self, offset: int, n: int) -> bytes:
        if offset < 0 or n <= 0 or offset >= self.size:
            return b""
        n = min(n, self.size - offset, _elf.MAX_READ)
        head = self._from_recent(offset, n)
        if len(head) == n:
            return head
        pos = offset + len(head)
        if pos != self._out:
            if pos < self._out or pos - self._out > self.SPACING:
                cp = None
                for c in reversed(self._cps):
                    if c[0] <= pos:
                        cp = c
                        break
                if pos < self._out:
                    if cp is None:
                        self._fresh()
                    else:
                        self._restore(cp)
                elif cp is not None and cp[0] > self._out:
                    self._restore(cp)
            while self._out < pos:
                if not self._step(min(pos - self._out, self.OUT_STEP)):
                    return head
        parts = [head] if head else []
        got = len(head)
        while got < n:
            out = self._step(min(n - got, self.OUT_STEP))
            if not out:
                break
            parts.append(out)
            got += len(out)
        return b"".join(parts)


class _ZipStreamSource:
    """Members compressed with something other than deflate (bzip2, lzma): zipfile's own
    seekable stream (a backward seek re-reads from the start)."""

    def __init__(self, zf, info) -> None:
        self._f = zf.open(info)
        self.size = info.file_size
        self.damaged = ""

    def read(self, offset: int, n: int) -> bytes:
        if offset < 0 or n <= 0 or offset >= self.size or self.damaged:
            return b""
        try:
            self._f.seek(offset)
            return self._f.read(min(n, self.size - offset, _elf.MAX_READ))
        except Exception as exc:  # zipfile raises many types for bad data
            self.damaged = f"the zip member cannot be read ({exc})"
            return b""


def _member_source(zf, raw, info):
    """A source for one zip member, read in place."""
    if info.flag_bits & 0x1:
        raise FormatError("the zip member is encrypted")
    if info.compress_type not in (0, 8):
        return _ZipStreamSource(zf, info)
    raw.seek(info.header_offset)
    local = raw.read(30)
    if len(local) < 30 or local[:4] != _ZIP_MAGIC:
        raise FormatError("the zip member's local header is missing")
    name_len = int.from_bytes(local[26:28], "little")
    extra_len = int.from_bytes(local[28:30], "little")
    base = info.header_offset + 30 + name_len + extra_len
    if info.compress_type == 0:
        return FileSource(raw, base, min(info.file_size, info.compress_size))
    return InflateSource(raw, base, info.compress_size, info.file_size)


def _is_listed(r: FileReport) -> bool:
    return r.kind != "other" or bool(r.problems)


def audit_wheel(path) -> AuditReport:
    """Every member of a wheel (any zip), read in place; nothing is extracted."""
    import zipfile

    path = os.fspath(path)
    report = AuditReport(source=path)
    name = os.path.basename(path)
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        report.problems.append(f"{name}: cannot be read as a wheel ({exc})")
        return report
    with zf, open(path, "rb") as raw:
        for info in zf.infolist():
            if info.is_dir():
                continue
            try:
                src = _member_source(zf, raw, info)
                r = _audit_source(src, info.filename, archive=path)
            except FormatError as exc:
                r = FileReport(info.filename, archive=path, problems=[msg(exc)], readable=False)
            except (OSError, zipfile.BadZipFile, NotImplementedError, RuntimeError) as exc:
                r = FileReport(info.filename, archive=path, problems=[f"cannot be read ({exc})"], readable=False)
            if _is_listed(r):
                report.files.append(r)
            else:
                report.skipped += 1
    return report.finish()


def _is_zip(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == _ZIP_MAGIC
    except OSError:
        return False


def audit_paths(paths) -> AuditReport:
    """Wheels (any zip), libraries, code objects and directories (walked recursively)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    report = AuditReport(source=", ".join(os.fspath(p) for p in paths))
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            files = []
            for root, dirs, names in os.walk(p):
                dirs.sort()
                files.extend(os.path.join(root, n) for n in sorted(names))
        elif os.path.exists(p):
            files = [p]
        else:
            report.problems.append(f"{p}: no such file or directory")
            continue
        for f in files:
            if os.path.islink(f) and not os.path.exists(f):
                continue
            if f.endswith(".whl") and not _is_zip(f):  # named as a wheel, is none: say so
                report.problems.append(f"{f}: not a wheel (not a zip archive)")
                continue
            if _is_zip(f):
                sub = audit_wheel(f)
                report.files.extend(sub.files)
                report.problems.extend(sub.problems)
                report.skipped += sub.skipped
                continue
            r = audit_file(f)
            if _is_listed(r):
                report.files.append(r)
            else:
                report.skipped += 1
    return report.finish()


# --------------------------------------------------------------------------- verify

def _vendor(target: str) -> str:
    return "nvidia" if target.startswith(("sm_", "compute_")) else "amd"


def _configs(req: GpuTarget) -> list[GpuTarget]:
    """The device configurations a requested AMD target stands for."""
    row = req.info
    def modes(value, feature):
        if value:
            return [value]
        return ["+", "-"] if row.get(feature, True) else [None]
    return [GpuTarget(req.processor, sramecc=s, xnack=x)
            for s in modes(req.sramecc, "sramecc") for x in modes(req.xnack, "xnack")]


def _amd_loads(code: GpuTarget, device: GpuTarget, generic_ok: bool) -> str | None:
    """None when ``code`` loads on ``device``; else why not."""
    if code.processor == device.processor:
        for feat in ("sramecc", "xnack"):
            built, mode = getattr(code, feat), getattr(device, feat)
            if built and mode and built != mode:
                return f"{code} code does not load on {device.processor} running {feat}{mode}"
            if built and not mode:
                return f"{code} code does not load on {device.processor} running {feat}{'-' if built == '+' else '+'}"
        return None
    from rocm_build_backend.gpu.compat import why_not

    try:
        return why_not(code, device, generic_ok=generic_ok)
    except Exception:  # a processor the table does not know
        return f"{code} is for {code.processor}"


def _unit_covers(unit: set[str], req: GpuTarget, generic_ok: bool) -> str | None:
    """None when the unit's code covers the request; else a reason."""
    codes = [t for t in (_target_obj(x) for x in unit) if t is not None]
    if req.vendor == "nvidia":
        name = str(req)
        if name.startswith("compute_") or name[-1] in "af":
            return None if name in unit else f"no {name} code"
        from rocm_build_backend.gpu.compat import loads_on

        sass = [c for c in codes if c.processor.startswith("sm_")]
        return None if any(loads_on(c, req) for c in sass) else f"no cubin that loads on {name}"
    amd = [c for c in codes if c.vendor == "amd"]
    for device in _configs(req):
        why = [_amd_loads(c, device, generic_ok) for c in amd]
        if all(w is not None for w in why):
            # say why only when the file has code for this processor (a feature mode) or
            # generic code for it; "gfx908 is not gfx942" helps nobody
            same = [w for c, w in zip(amd, why) if c.processor == req.processor]
            generic = [w for w in why if w and "ROCm 6.4" in w]
            return (same or generic or [f"no code for {device}"])[0]
    return None


def _fmt(targets: Sequence[GpuTarget | str]) -> str:
    names = [str(t) for t in targets]
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _was(n: int) -> str:
    return "was" if n == 1 else "were"


def verify(report: AuditReport, requested: Sequence[GpuTarget | str], *, generic_ok: bool = True) -> list[str]:
    """Problems (empty when every requested target is covered by the device code).

    Every file with device code of a vendor is checked against the requested targets of
    that vendor; a wheel without any device code while targets were requested is a
    problem; so is a file that could not be read completely.
    """
    reqs = sort_targets(t if isinstance(t, GpuTarget) else parse_target(t) for t in requested)
    if not reqs:
        return []
    where = ""
    if report.source and report.source.endswith((".whl", ".zip")) and "," not in report.source:
        where = f"wheel {os.path.basename(report.source)}: "
    problems = [f"{where}{p}" for p in report.problems]
    for f in report.files:
        for p in f.problems:
            problems.append(f"{where}{f.path} could not be read completely: {p}")
        for c in f.containers:
            if not c.read:
                problems.append(f"{where}{f.path}: cannot check its targets ({c.note})")
    device = report.device_files
    for vendor in ("amd", "nvidia"):
        vreqs = [r for r in reqs if r.vendor == vendor]
        if not vreqs:
            continue
        files = [f for f in device if any(_vendor(t) == vendor for t in f.targets)
                 or (not f.targets and any(not c.read for c in f.containers))]
        if not files:
            label = where.rstrip(": ") or report.source or "the input"
            what = "no GPU device code at all" if not device else (
                f"no {'AMD' if vendor == 'amd' else 'NVIDIA'} device code")
            problems.append(f"{label} holds {what}; {_fmt(vreqs)} {_was(len(vreqs))} requested")
            continue
        for f in files:
            if any(not c.read for c in f.containers):
                continue  # already reported: cannot check
            containers = [c for c in f.containers if any(_vendor(t) == vendor for t in c.targets)]
            units = _units(containers)
            held = [t for t in f.targets if _vendor(t) == vendor]
            absent, partial, reasons = [], [], []
            for r in vreqs:
                misses = [_unit_covers(u, r, generic_ok) for u in units]
                if not any(m is not None for m in misses):
                    continue
                if all(m is not None for m in misses):
                    absent.append(r)
                    if misses[0] and misses[0] != f"no code for {r}":
                        reasons.append(misses[0])
                else:
                    partial.append((r, sum(m is not None for m in misses), len(units)))
            stubs = [c for c in f.containers if not c.kernels]
            for r in absent:
                if any(str(r) in c.targets for c in stubs):
                    reasons.append(f"the {r} code is a device-link stub without kernels")
            if absent:
                msg = (f"{where}{f.path} holds device code for {_fmt(held)} only; "
                       f"{_fmt(absent)} {_was(len(absent))} requested")
                real = [x for x in dict.fromkeys(reasons) if not x.startswith("no ")]
                if real:
                    msg += " (" + "; ".join(real) + ")"
                problems.append(msg)
            for r, missing_in, total in partial:
                problems.append(
                    f"{where}{f.path} has {r} code for only some of its kernels "
                    f"({missing_in} of {total} translation units lack it); {r} was requested"
                )
    return problems


HINT = (
    "the build did not compile for the requested targets: look for a hard-coded "
    "--offload-arch / -gencode, or an arch list the build script sets itself "
    "(PYTORCH_ROCM_ARCH, AMDGPU_TARGETS, GPU_TARGETS, CMAKE_HIP_ARCHITECTURES, "
    "TORCH_CUDA_ARCH_LIST); a project that has no GPU code sets "
    "verify = \"off\" under [tool.rocm-build-backend]"
)


def mismatch_error(problems: Sequence[str]) -> TargetMismatchError:
    """The error the build shim raises for a failed ``verify``."""
    if len(problems) == 1:
        message = problems[0]
    else:
        message = f"{len(problems)} problems with the built wheel's device code:\n  " + "\n  ".join(problems)
    hint = HINT
    if any("cannot check" in p for p in problems):
        hint = "install rocm-build-backend[zstd] so compressed device code can be read; " + HINT
    return TargetMismatchError(message, hint=hint)
