"""AMD device code: clang offload bundles, compressed bundles (CCOB v1-v3), AMDGPU code
objects, and LLVM OffloadBinary blobs (``.llvm.offloading``).

Each ``read_*`` function reads one container at ``offset`` of a source (usually a section),
never past ``limit``, and returns ``(Container, next_offset)``; ``next_offset`` is None when
the container's end cannot be known, so the caller stops walking. Problems found inside a
container (an entry out of bounds, a truncated payload) are recorded in
``Container.problems``; a header that cannot be read at all raises ``FormatError``.

Byte layouts: ``clang/docs/ClangOffloadBundler.rst``, ``OffloadBundler.h/.cpp``,
``llvm/Object/OffloadBinary.h``, ``llvm/BinaryFormat/ELF.h`` (see the project's research
notes on binary formats). Bounds: every count is capped by the bytes that can hold it, every
offset + size is checked against the container, every loop advances, and decompression
stops after the few kilobytes needed to read a bundle header.
"""

from __future__ import annotations

from rocm_build_backend.data import path as data_path

import json
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.elf import BytesSource, FormatError, Source, msg, need

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
CCOB_MAGIC = b"CCOB"
OFFLOAD_MAGIC = b"\x10\xff\x10\xad"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

ZSTD_NOTE = "compressed with zstd: install rocm-build-backend[zstd] to read targets"
MAX_ID = 4096  # a bundle entry id longer than this is not an id
PREFIX_STEPS = (64 << 10, 1 << 20, 8 << 20)  # how much of a compressed bundle to inflate, at most
ZSTD_WINDOW_MAX = 1 << 27  # zstd's own default limit (128 MiB)
_HOST_ARCHES = ("x86_64", "i386", "i686", "aarch64", "arm", "powerpc", "ppc64", "ppc64le", "riscv64", "s390x")


@dataclass
class Container:
    """One device-code container: a bundle, a CCOB, a fatbin, a raw code object, ...

    ``kernels`` is False for a container that holds no kernels at all (an nvcc device-link
    stub); such a container does not count when deciding which targets cover every kernel.
    ``read`` is False when the targets could not be read (e.g. zstd not installed); ``note``
    then says why.
    """

    kind: str
    where: str
    offset: int
    targets: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    note: str = ""
    kernels: bool = True
    read: bool = True

    def to_json(self) -> dict:
        out = {"kind": self.kind, "where": self.where, "offset": self.offset,
               "targets": list(self.targets), "problems": list(self.problems)}
        if self.note:
            out["note"] = self.note
        if not self.kernels:
            out["kernels"] = False
        if not self.read:
            out["read"] = False
        return out


def _add_note(c: Container, text: str) -> None:
    if text and text not in c.note:
        c.note = f"{c.note}; {text}" if c.note else text


# --------------------------------------------------------------------------- targets

@lru_cache(maxsize=None)
def mach_table() -> dict[int, str]:
    path = data_path("amdgpu_mach.json")
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    return {int(k, 16): v for k, v in doc["mach"].items()}


def canonical_target(text: str) -> str:
    """``gfx90a:xnack-:sramecc+`` -> ``gfx90a:sramecc+:xnack-`` (features in LLVM's order)."""
    processor, *features = text.split(":")
    return ":".join([processor, *sorted(f for f in features if f)])


@dataclass(frozen=True)
class CodeObjectInfo:
    target: str  # canonical target ID, e.g. "gfx90a:xnack-"
    processor: str
    version: int | None  # code object version (2..6), None when unknown
    generic_version: int = 0
    known: bool = True  # False when the mach value is not in the table


def amdgpu_code_object(hdr: _elf.ElfHeader) -> CodeObjectInfo:
    """Target ID of an AMDGPU code object from its ``e_flags`` (like comgr's
    ``getElfIsaNameFromElfHeader``): processor, then ``:sramecc±`` and ``:xnack±`` only for
    on/off, never for "any" or "unsupported"."""
    flags, abi = hdr.flags, hdr.abiversion
    mach = flags & 0xFF
    name = mach_table().get(mach)
    known = name is not None
    processor = name or f"mach-0x{mach:02x}"
    feats: list[str] = []
    generic = 0
    if abi >= 2:  # code object v4 and later
        sramecc = (flags >> 10) & 3
        xnack = (flags >> 8) & 3
        if sramecc in (2, 3):
            feats.append("sramecc" + "-+"[sramecc - 2])
        if xnack in (2, 3):
            feats.append("xnack" + "-+"[xnack - 2])
        if abi >= 4:
            generic = (flags >> 24) & 0xFF
    elif abi == 1:  # v3: on/off only
        if flags & 0x200:
            feats.append("sramecc+")
        if flags & 0x100:
            feats.append("xnack+")
    else:  # v2
        if flags & 0x01:
            feats.append("xnack+")
    version = abi + 2 if hdr.osabi == 64 and abi <= 10 else None
    return CodeObjectInfo(":".join([processor, *feats]), processor, version, generic, known)


@dataclass(frozen=True)
class BundleId:
    kind: str  # host, hip, hipv4, hcc, openmp, ...
    triple: str
    target: str  # canonical target ID; "" for a host entry

    @property
    def is_host(self) -> bool:
        return self.kind == "host" or self.triple.split("-", 1)[0] in _HOST_ARCHES


def _looks_like_target(text: str) -> bool:
    return text.startswith(("gfx", "sm_", "amdgcnspirv")) or text == "generic"


def parse_bundle_id(text: str) -> BundleId:
    """``hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`` -> (hipv4, amdgcn-amd-amdhsa-, gfx90a:xnack-).

    The triple's environment is empty for AMDHSA, hence ``--``. Generic targets contain
    ``-`` themselves (``gfx9-4-generic``), so the target is everything after the triple.
    """
    kind, sep, rest = text.partition("-")
    if not sep or not kind:
        raise FormatError(f"bundle entry id {text!r} has no offload kind")
    parts = rest.split("-", 3)  # arch, vendor, os, remainder
    if len(parts) < 3:
        raise FormatError(f"bundle entry id {text!r} has no target triple")
    arch, vendor, os_ = parts[:3]
    remainder = parts[3] if len(parts) == 4 else ""
    env, target = "", ""
    if remainder.startswith("-"):  # empty environment: "--gfx90a"
        target = remainder[1:]
    elif remainder:
        head = remainder.split("-", 1)[0]
        if _looks_like_target(head):  # old style without environment: "-gfx906"
            target = remainder
        else:
            env, _, target = remainder.partition("-")
    triple = "-".join([arch, vendor, os_, env])
    return BundleId(kind, triple, canonical_target(target) if target else "")


def _valid_id(raw: bytes) -> str | None:
    text = raw.rstrip(b"\0")
    if not text or any(b < 0x21 or b > 0x7E for b in text):
        return None
    return text.decode("ascii")


# --------------------------------------------------------------------------- decompression

@lru_cache(maxsize=None)
def _zstd_backend():
    """('zstandard', module) or ('stdlib', module) or None. Imported only when needed."""
    try:
        import zstandard  # the rocm-build-backend[zstd] extra

        return ("zstandard", zstandard)
    except ImportError:
        pass
    try:
        from compression import zstd  # Python 3.14+

        return ("stdlib", zstd)
    except ImportError:
        return None


def zstd_available() -> bool:
    return _zstd_backend() is not None


class ZstdUnavailable(Exception):
    pass


class _SourceReader:
    """A file-like object over ``[start, end)`` of a source, for streaming decompressors."""

    def __init__(self, src: Source, start: int, end: int) -> None:
        self._src, self._pos, self._end = src, start, end

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = 1 << 16
        n = min(n, self._end - self._pos, 1 << 20)
        if n <= 0:
            return b""
        data = self._src.read(self._pos, n)
        self._pos += len(data)
        return data

    def readinto(self, buf) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)


def inflate_prefix(method: int, src: Source, start: int, end: int, want: int) -> bytes:
    """At most ``want`` bytes of what ``[start, end)`` of ``src`` decompresses to.

    ``method`` 0 = zlib, 1 = zstd (``llvm::compression::Format``). A damaged or cut stream
    gives fewer bytes (or FormatError for garbage); a missing zstd module raises
    ZstdUnavailable. Memory is bounded by ``want`` plus the decompressor's window.
    """
    want = max(1, want)
    if method == 0:
        import zlib

        d = zlib.decompressobj()
        out: list[bytes] = []
        got = 0
        pos = start
        while got < want and pos < end and not d.eof:
            chunk = src.read(pos, min(1 << 16, end - pos))
            if not chunk:
                break
            pos += len(chunk)
            data = chunk
            while data and got < want and not d.eof:
                try:
                    piece = d.decompress(data, want - got)
                except zlib.error as exc:
                    if got:
                        return b"".join(out)
                    raise FormatError(f"damaged zlib stream: {exc}") from None
                out.append(piece)
                got += len(piece)
                data = d.unconsumed_tail
        return b"".join(out)
    if method == 1:
        backend = _zstd_backend()
        if backend is None:
            raise ZstdUnavailable()
        name, mod = backend
        reader = _SourceReader(src, start, end)
        if name == "zstandard":
            dctx = mod.ZstdDecompressor(max_window_size=ZSTD_WINDOW_MAX)
            out = []
            got = 0
            try:
                with dctx.stream_reader(reader, read_size=1 << 16, read_across_frames=False) as r:
                    while got < want:
                        piece = r.read(min(want - got, 1 << 20))
                        if not piece:
                            break
                        out.append(piece)
                        got += len(piece)
            except mod.ZstdError as exc:
                if got:
                    return b"".join(out)
                raise FormatError(f"damaged zstd stream: {exc}") from None
            return b"".join(out)
        # Python 3.14's compression.zstd
        d = mod.ZstdDecompressor(options={mod.DecompressionParameter.window_log_max: 27})
        out = []
        got = 0
        try:
            while got < want and not d.eof:
                if d.needs_input:
                    chunk = reader.read(1 << 16)
                    if not chunk:
                        break
                else:
                    chunk = b""
                piece = d.decompress(chunk, max_length=want - got)
                out.append(piece)
                got += len(piece)
        except mod.ZstdError as exc:
            if got:
                return b"".join(out)
            raise FormatError(f"damaged zstd stream: {exc}") from None
        return b"".join(out)
    raise FormatError(f"unknown compression method {method}")


def zstd_frame(src: Source, start: int, end: int) -> tuple[int, int | None]:
    """Walk one zstd frame's block headers without decompressing it (RFC 8878 §3.1.1).

    Returns (frame length in bytes, content size from the frame header or None).
    """
    head = need(src, start, 18, "zstd frame header") if end - start >= 18 else need(src, start, max(0, end - start), "zstd frame header")
    if head[:4] != ZSTD_MAGIC:
        raise FormatError("not a zstd frame")
    if len(head) < 6:
        raise FormatError("truncated: zstd frame header")
    fhd = head[4]
    fcs_flag, single, checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
    if fhd & 0x08:
        raise FormatError("zstd frame header has the reserved bit set")
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
    fcs_len = (1 if single else 0, 2, 4, 8)[fcs_flag]
    content = None
    if fcs_len:
        if pos + fcs_len > len(head):
            raise FormatError("truncated: zstd frame header")
        content = int.from_bytes(head[pos : pos + fcs_len], "little") + (256 if fcs_len == 2 else 0)
    pos += fcs_len
    off = start + pos
    while True:
        bh = need(src, off, 3, "zstd block header")
        v = int.from_bytes(bh, "little")
        last, btype, bsize = v & 1, (v >> 1) & 3, v >> 3
        if btype == 3:
            raise FormatError("zstd block of reserved type")
        off += 3 + (1 if btype == 1 else bsize)
        if off > end:
            raise FormatError("truncated: zstd frame runs past the end of its container")
        if last:
            break
    off += 4 if checksum else 0
    if off > end:
        raise FormatError("truncated: zstd frame checksum missing")
    return off - start, content


def zlib_stream_length(src: Source, start: int, end: int) -> int:
    """Length of the zlib stream at ``start`` (inflated in bounded pieces and discarded)."""
    import zlib

    d = zlib.decompressobj()
    pos = start
    while pos < end and not d.eof:
        chunk = src.read(pos, min(1 << 16, end - pos))
        if not chunk:
            break
        data = chunk
        try:
            while data and not d.eof:
                d.decompress(data, 1 << 20)
                data = d.unconsumed_tail
        except zlib.error as exc:
            raise FormatError(f"damaged zlib stream: {exc}") from None
        pos += len(chunk) - len(d.unused_data)
    if not d.eof:
        raise FormatError("truncated: zlib stream has no end")
    return pos - start


# --------------------------------------------------------------------------- bundles

def read_bundle(src: Source, offset: int, limit: int, where: str, *, cut: bool = False,
                kind: str = "bundle") -> tuple[Container, int | None]:
    """An uncompressed clang offload bundle at ``offset``; entries may not pass ``limit``.

    ``cut`` says ``limit`` is where the data stops (a truncated file), not where the
    container must end: an entry past it is then reported as cut off, and its target kept.
    """
    head = need(src, offset, 32, "offload bundle header")
    if head[:24] != BUNDLE_MAGIC:
        raise FormatError("not a clang offload bundle")
    (claimed,) = struct.unpack_from("<Q", head, 24)
    c = Container(kind, where, offset)
    room = limit - offset
    pos = offset + 32
    first_code = limit
    entries: list[tuple[str, int, int]] = []
    max_entries = max(0, (room - 32) // 25)  # every entry takes at least 25 bytes
    stop = ""
    for i in range(min(claimed, max_entries)):
        if pos + 24 > min(limit, first_code):
            stop = "the entry table runs into the code objects" if pos + 24 <= limit else "the entry table runs past the end"
            break
        raw = src.read(pos, 24)
        if len(raw) < 24:
            stop = "truncated: the entry table is cut short"
            break
        eoff, esize, idlen = struct.unpack("<QQQ", raw)
        if idlen == 0 or idlen > MAX_ID:
            stop = f"entry {i} has an impossible id length {idlen}"
            break
        if pos + 24 + idlen > limit:
            stop = "truncated: the entry table is cut short" if cut else "the entry table runs past the end"
            break
        idraw = src.read(pos + 24, idlen)
        if len(idraw) < idlen:
            stop = "truncated: the entry table is cut short"
            break
        ident = _valid_id(idraw)
        if ident is None:
            stop = f"entry {i} has an id that is not text"
            break
        entries.append((ident, eoff, esize))
        pos += 24 + idlen
        if eoff and offset + eoff < first_code and eoff >= 32:
            first_code = offset + eoff
    if len(entries) < claimed:
        reason = stop or "they do not fit in the container"
        c.problems.append(
            f"bundle at 0x{offset:x} claims {claimed} entries, {len(entries)} read ({reason})"
        )
    if not entries:
        raise FormatError(c.problems[0] if c.problems else "offload bundle with no entries")
    end = pos
    # read code objects in file order: with an inflated zip member this stays one forward pass
    notes: set[str] = set()
    for ident, eoff, esize in sorted(entries, key=lambda e: e[1]):
        try:
            bid = parse_bundle_id(ident)
        except FormatError as exc:
            c.problems.append(msg(exc))
            continue
        if bid.is_host:
            continue
        if esize == 0:
            c.problems.append(f"entry {ident} has no code object (size 0)")
            continue
        start = offset + eoff
        if eoff == 0 or eoff < 32 or start + esize > limit or esize > (1 << 62):
            if cut and eoff >= 32 and start < (1 << 62):
                c.problems.append(f"truncated: the code object of {ident} is cut off")
                c.targets.append(bid.target)
                continue
            c.problems.append(
                f"entry {ident}: code object at +0x{eoff:x} ({esize} bytes) lies outside the "
                f"bundle ({room} bytes)"
            )
            continue
        end = max(end, start + esize)
        if not bid.target:
            c.problems.append(f"entry {ident} names no target")
            continue
        c.targets.append(bid.target)
        head = src.read(start, 64)
        if len(head) < 64:
            if cut:
                c.problems.append(f"truncated: the code object of {ident} is cut off")
            continue
        problem, note = _check_code_object(head, bid, ident)
        if problem:
            c.problems.append(problem)
        if note:
            notes.add(note)
    for note in sorted(notes):
        _add_note(c, note)
    return c, end


def _check_code_object(head: bytes, bid: BundleId, ident: str) -> tuple[str, str]:
    """Cross-check a bundle entry id against its code object's e_flags; (problem, note)."""
    if head[:4] == b"BC\xc0\xde" or head[:4] == b"\xde\xc0\x17\x0b":
        return "", "LLVM bitcode (linked at load time), not machine code"
    if head[:4] != _elf.ELF_MAGIC:
        return "", ""
    try:
        hdr = _elf.read_header(BytesSource(head))
    except FormatError:
        return f"entry {ident}: damaged code object header", ""
    if hdr.machine != _elf.EM_AMDGPU:
        return "", ""
    info = amdgpu_code_object(hdr)
    if not info.known:
        return "", f"unknown EF_AMDGPU_MACH {info.processor[5:]}"
    want = bid.target
    got = info.target
    if info.version is not None and info.version <= 3:
        want, got = want.split(":")[0], info.processor
    if want != got:
        return f"entry {ident} holds a code object for {got}", ""
    return "", ""


# --------------------------------------------------------------------------- CCOB

class _Problems(list):
    """A problem list that keeps only the first "truncated" problem (one cut shows up in
    the header, the frame walk and the inflation alike)."""

    def append(self, item: str) -> None:
        if "truncated" in item and any("truncated" in p for p in self):
            return
        super().append(item)


def _at(offset: int, text: str) -> str:
    if text.startswith("truncated: "):
        return f"truncated: compressed bundle at 0x{offset:x}: {text[len('truncated: '):]}"
    return f"compressed bundle at 0x{offset:x}: {text}"


def _CcobContainer(kind: str, where: str, offset: int) -> Container:
    c = Container(kind, where, offset)
    c.problems = _Problems()
    return c


def read_ccob(src: Source, offset: int, limit: int, where: str, *, cut: bool = False) -> tuple[Container, int | None]:
    """A compressed offload bundle: header, then the start of what its payload inflates to."""
    head = need(src, offset, 8, "compressed bundle header")
    if head[:4] != CCOB_MAGIC:
        raise FormatError("not a compressed offload bundle")
    version, method = struct.unpack_from("<HH", head, 4)
    if version == 1:
        raw = need(src, offset, 20, "compressed bundle header")
        hsize, total = 20, None
        (usize,) = struct.unpack_from("<I", raw, 8)
    elif version == 2:
        raw = need(src, offset, 24, "compressed bundle header")
        hsize = 24
        total, usize = struct.unpack_from("<II", raw, 8)
    elif version == 3:
        raw = need(src, offset, 32, "compressed bundle header")
        hsize = 32
        total, usize = struct.unpack_from("<QQ", raw, 8)
    else:
        raise FormatError(f"compressed bundle at 0x{offset:x} has unknown version {version}")
    if method not in (0, 1):
        raise FormatError(f"compressed bundle at 0x{offset:x} has unknown compression method {method}")
    c = _CcobContainer("ccob", where, offset)
    algo = "zlib" if method == 0 else "zstd"
    c.note = f"CCOB v{version}, {algo}"
    pstart = offset + hsize
    end: int | None
    if total is not None:
        if total < hsize:
            raise FormatError(f"compressed bundle at 0x{offset:x} claims a total size of {total} bytes")
        end = offset + total
        if end > limit:
            what = "truncated: " if cut else ""
            c.problems.append(
                f"{what}compressed bundle at 0x{offset:x} claims {total} bytes, "
                f"{max(0, limit - offset)} present"
            )
            end = limit
    else:
        end = None
    pend = end if end is not None else limit
    # v1 has no total size: its end is the end of the zstd frame / zlib stream
    if method == 1 and src.read(pstart, 4) == ZSTD_MAGIC:
        try:
            flen, content = zstd_frame(src, pstart, pend)
            if end is None:
                end = pstart + flen
            if content is not None and content != usize:
                c.problems.append(
                    f"compressed bundle at 0x{offset:x} says it inflates to {usize} bytes, "
                    f"its zstd frame says {content}"
                )
        except FormatError as exc:
            c.problems.append(_at(offset, msg(exc)))
    elif method == 1:
        c.problems.append(f"compressed bundle at 0x{offset:x}: payload is not a zstd frame")
    elif end is None:
        try:
            end = pstart + zlib_stream_length(src, pstart, pend)
        except FormatError as exc:
            c.problems.append(_at(offset, msg(exc)))
    # the bundle header is at the start of the inflated payload
    for step in PREFIX_STEPS:
        want = min(step, usize) if usize else step
        try:
            data = inflate_prefix(method, src, pstart, pend, want)
        except ZstdUnavailable:
            c.read = False
            _add_note(c, ZSTD_NOTE)
            return c, end
        except FormatError as exc:
            c.problems.append(_at(offset, msg(exc)))
            return c, end
        more = len(data) >= want and step != PREFIX_STEPS[-1] and (not usize or want < usize)
        try:
            inner, _ = read_bundle(BytesSource(data), 0, max(usize, len(data)), where)
        except FormatError as exc:
            if more and "truncated" in msg(exc):
                continue  # the header is longer than what we inflated: inflate more
            if len(data) < want:
                c.problems.append(
                    f"truncated: compressed bundle at 0x{offset:x} inflates to {len(data)} bytes "
                    f"and stops ({msg(exc)})"
                )
            else:
                c.problems.append(_at(offset, msg(exc)))
            return c, end
        if more and any("truncated: the entry table" in p for p in inner.problems):
            continue
        c.targets = inner.targets
        # code objects beyond the inflated prefix were not read: only header problems count
        c.problems.extend(p for p in inner.problems if not p.startswith("truncated: the code object"))
        _add_note(c, inner.note)
        return c, end
    c.problems.append(f"compressed bundle at 0x{offset:x}: bundle header larger than {PREFIX_STEPS[-1]} bytes")
    return c, end


# --------------------------------------------------------------------------- OffloadBinary

_IMAGE_KINDS = {1: "object", 2: "LLVM bitcode", 3: "cubin", 4: "fatbinary", 5: "PTX", 6: "SPIR-V"}


def read_offload_binary(src: Source, offset: int, limit: int, where: str) -> tuple[Container, int | None]:
    """One OffloadBinary blob (``llvm/Object/OffloadBinary.h``, versions 1-3)."""
    head = need(src, offset, 32, "OffloadBinary header")
    if head[:4] != OFFLOAD_MAGIC:
        raise FormatError("not an LLVM OffloadBinary")
    version, size, eoff, esz = struct.unpack_from("<IQQQ", head, 4)
    if version not in (1, 2, 3):
        raise FormatError(f"OffloadBinary at 0x{offset:x} has unknown version {version}")
    hsize = 40 if version >= 3 else 32
    if size < hsize:
        raise FormatError(f"OffloadBinary at 0x{offset:x} claims a size of {size} bytes")
    c = Container("offload-binary", where, offset)
    end = offset + size
    if end > limit:
        c.problems.append(f"OffloadBinary at 0x{offset:x} claims {size} bytes, {limit - offset} present")
        end = limit
    blob: Source = _elf.SubSource(src, offset, end - offset)
    if version >= 3:
        (inflated,) = struct.unpack_from("<Q", need(src, offset, 40, "OffloadBinary header"), 32)
        if inflated:
            method = 1 if src.read(offset + 40, 4) == ZSTD_MAGIC else 0
            try:
                body = inflate_prefix(method, src, offset + 40, end, min(inflated, 8 << 20))
            except ZstdUnavailable:
                c.read = False
                _add_note(c, ZSTD_NOTE)
                return c, _align(end, 8)
            blob = BytesSource(need(src, offset, 40, "OffloadBinary header") + body)
    count = 1 if version == 1 else esz
    entry_size = 40
    str_size = 16 if version == 1 else 24
    bsize = blob.size
    if count > max(0, bsize - eoff) // entry_size:
        c.problems.append(f"OffloadBinary at 0x{offset:x} claims {count} entries that do not fit")
        count = max(0, bsize - eoff) // entry_size
    kinds: set[str] = set()
    for i in range(count):
        e = need(blob, eoff + i * entry_size, entry_size, "OffloadBinary entry")
        image_kind, _okind, _flags, stroff, strcount, _ioff, _isize = struct.unpack("<HHIQQQQ", e)
        if strcount > max(0, bsize - stroff) // str_size:
            c.problems.append(f"OffloadBinary at 0x{offset:x}: string table out of bounds")
            continue
        strings: dict[str, str] = {}
        for j in range(strcount):
            k, v = struct.unpack_from("<QQ", need(blob, stroff + j * str_size, 16, "OffloadBinary string"))
            strings[_blob_str(blob, k)] = _blob_str(blob, v)
        triple, arch = strings.get("triple", ""), strings.get("arch", "")
        if arch:
            c.targets.append(canonical_target(arch))
        elif triple:
            c.targets.append(triple)
        kinds.add(_IMAGE_KINDS.get(image_kind, f"image kind {image_kind}"))
    for k in sorted(kinds):
        _add_note(c, k + (" (for link-time code generation, not machine code)" if k == "LLVM bitcode" else ""))
    return c, _align(end, 8)


def _blob_str(blob: Source, off: int) -> str:
    raw = blob.read(off, 256)
    nul = raw.find(b"\0")
    return (raw if nul < 0 else raw[:nul]).decode("latin-1")


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


# --------------------------------------------------------------------------- walking sections

def skip_zeros(src: Source, pos: int, end: int) -> int:
    """The first offset in ``[pos, end)`` whose byte is not zero (``end`` when none)."""
    while pos < end:
        chunk = src.read(pos, min(1 << 16, end - pos))
        if not chunk:
            return end
        stripped = len(chunk) - len(chunk.lstrip(b"\0"))
        pos += stripped
        if stripped < len(chunk):
            return pos
    return end


_READERS = {
    BUNDLE_MAGIC[:4]: lambda src, pos, end, where, cut: read_bundle(src, pos, end, where, cut=cut),
    CCOB_MAGIC: lambda src, pos, end, where, cut: read_ccob(src, pos, end, where, cut=cut),
    OFFLOAD_MAGIC: lambda src, pos, end, where, cut: read_offload_binary(src, pos, end, where),
}


def walk(src: Source, where: str, readers: dict, *, cut: bool = False, what: str = "container") -> tuple[list[Container], list[str]]:
    """Every container in a section (or file): back to back, zero padding between.

    Returns (containers, problems that belong to no container).
    """
    out: list[Container] = []
    problems: list[str] = []
    pos, end = 0, src.size
    while pos < end:
        pos = skip_zeros(src, pos, end)
        if pos >= end:
            break
        magic = src.read(pos, 4)
        reader = readers.get(magic)
        if reader is None:
            problems.append(_where(where, f"unrecognised bytes at offset 0x{pos:x} (expected a {what})"))
            break
        try:
            c, nxt = reader(src, pos, end, where, cut)
        except FormatError as exc:
            problems.append(_where(where, msg(exc)))
            break
        out.append(c)
        if nxt is None or nxt <= pos:
            break
        pos = nxt
    return out, problems


def _where(where: str, text: str) -> str:
    return text if where == "file" else f"{where}: {text}"


def walk_hip_fatbin(src: Source, where: str = ".hip_fatbin", *, cut: bool = False):
    """``.hip_fatbin``: one bundle / CCOB / OffloadBinary per translation unit."""
    return walk(src, where, _READERS, cut=cut, what="offload bundle")


def walk_offloading(src: Source, where: str = ".llvm.offloading"):
    """``.llvm.offloading``: OffloadBinary blobs, 8-byte aligned."""
    return walk(src, where, {OFFLOAD_MAGIC: _READERS[OFFLOAD_MAGIC]}, what="OffloadBinary")


def code_object_container(hdr: _elf.ElfHeader, where: str = "file") -> Container:
    info = amdgpu_code_object(hdr)
    c = Container("code-object", where, 0, [info.target])
    notes = []
    if info.version:
        notes.append(f"code object v{info.version}")
    if info.generic_version:
        notes.append(f"generic version {info.generic_version}")
    if not info.known:
        notes.append(f"unknown EF_AMDGPU_MACH {info.processor[5:]}")
    c.note = ", ".join(notes)
    return c
