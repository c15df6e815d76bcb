"""Thinning plans for AMD device code: offload bundles, compressed bundles (CCOB v1-v3) and
LLVM OffloadBinary blobs (``.llvm.offloading``).

- An uncompressed bundle is rewritten in place: a shorter entry table listing the host entry
  and the kept entries (their offsets unchanged), the rest of the old table and every dropped
  code object zero-filled. Kept code objects do not move, so they stay byte-identical and
  keep their alignment, and the bundle keeps its place in its section.
- A CCOB is inflated, its bundle rebuilt compactly (kept code objects byte-identical, at the
  alignment they had), compressed again with the same codec and written at the same offset
  with the same header version; the bytes it frees are zero-filled. It must fit in place.
- OffloadBinary blobs (one image each) are moved to the front of the section and the last
  kept blob's size field grows to the section's end, so LLVM's reader, which walks blobs by
  their sizes, still reaches the end; a section that would keep none is kept whole.

Everything is read and checked before a plan is returned; nothing here writes or prints.
A damaged container raises ``FormatError``; a safe rewrite that is impossible raises
``CannotThin``.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from dataclasses import dataclass

from rocm_build_backend.binary import bundle, ccob, decompression, offload_binary, walk
from rocm_build_backend.binary.elf import BytesSource, Source, msg
from rocm_build_backend.binary.rewrite_plan import CannotThin, Plan, Selector
from rocm_build_backend.errors import FormatError

MAX_INFLATE = 1 << 30  # one compressed bundle inflated in memory, at most
ZSTD_LEVEL = 3  # the offload bundler's zstd level (long-distance matching on)
ZLIB_LEVEL = 6
SKIPPABLE = struct.pack("<I", 0x184D2A50)  # a zstd skippable frame's magic


@dataclass(frozen=True)
class Entry:
    ident: str
    offset: int  # relative to the bundle
    size: int
    target: str  # "" for a host entry


def read_entries(src: Source, offset: int, limit: int) -> tuple[list[Entry], int, int]:
    """(entries, end of the entry table, end of the bundle): strict, any damage raises."""
    c, end = bundle.read_bundle(src, offset, limit, "bundle")
    if c.problems:
        raise FormatError(f"damaged offload bundle at 0x{offset:x}: {c.problems[0]}")
    head = src.read(offset, 32)
    (count,) = struct.unpack_from("<Q", head, 24)
    pos = offset + 32
    entries: list[Entry] = []
    for _ in range(count):  # read_bundle checked every entry against the bytes present
        eoff, esize, idlen = struct.unpack("<QQQ", src.read(pos, 24))
        ident = src.read(pos + 24, idlen).rstrip(b"\0").decode("ascii")
        bid = bundle.parse_bundle_id(ident)
        entries.append(Entry(ident, eoff, esize, "" if bid.is_host else bid.target))
        pos += 24 + idlen
    bundle_end = max([pos] + [offset + e.offset + e.size for e in entries])
    return entries, pos, max(bundle_end, end or 0)


def _table(entries: list[Entry], offsets: dict[str, int] | None = None) -> bytes:
    parts = [bundle.BUNDLE_MAGIC, struct.pack("<Q", len(entries))]
    for e in entries:
        raw = e.ident.encode("ascii")
        off = offsets[e.ident] if offsets is not None else e.offset
        parts.append(struct.pack("<QQQ", off, e.size, len(raw)) + raw)
    return b"".join(parts)


def _choose(entries: list[Entry], sel: Selector, plan: Plan) -> list[Entry]:
    kept = []
    for e in entries:
        if not e.target:
            kept.append(e)
        elif sel.keeps(e.target):
            kept.append(e)
            plan.kept.append(e.target)
        else:
            plan.dropped.append(e.target)
    return kept


def plan_bundle(src: Source, offset: int, limit: int, sel: Selector) -> tuple[Plan, int, int]:
    """(plan, old end, new end) for an uncompressed bundle at ``offset``."""
    entries, table_end, end = read_entries(src, offset, limit)
    plan = Plan()
    kept = _choose(entries, sel, plan)
    if not plan.dropped:
        return plan, end, end
    table = _table(kept)
    plan.writes.append((offset, table))
    plan.zeros.append((offset + len(table), table_end))
    keep_ranges = [(offset + e.offset, offset + e.offset + e.size) for e in kept if e.size]
    for e in entries:
        if e in kept or not e.size:
            continue
        for start, stop in _subtract((offset + e.offset, offset + e.offset + e.size), keep_ranges):
            plan.zeros.append((start, stop))
    new_end = max([offset + len(table)] + [stop for _s, stop in keep_ranges])
    return plan, end, new_end


def _subtract(span: tuple[int, int], keep: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = [span]
    for ks, ke in keep:
        nxt = []
        for s, e in out:
            if ke <= s or ks >= e:
                nxt.append((s, e))
                continue
            if s < ks:
                nxt.append((s, ks))
            if ke < e:
                nxt.append((ke, e))
        out = nxt
    return out


def entries_alignment(entries: list[Entry]) -> int:
    align = 4096
    for e in entries:
        if e.size:
            while align > 1 and e.offset % align:
                align //= 2
    return align


def compact_bundle(data: bytes | memoryview, kept_entries: list[Entry], align: int) -> bytes:
    """A new bundle holding ``kept_entries`` (host entries size 0), code objects copied as
    they are, each at a multiple of ``align``; ``data`` is the whole old bundle."""
    if len({e.ident for e in kept_entries}) != len(kept_entries):
        raise CannotThin("a compressed bundle names the same entry twice")
    offsets: dict[str, int] = {}
    table_len = len(_table(kept_entries, {e.ident: 0 for e in kept_entries}))
    pos = -(-table_len // align) * align
    first = pos
    for e in kept_entries:
        if e.size:
            offsets[e.ident] = pos
            pos = -(-(pos + e.size) // align) * align
    for e in kept_entries:
        offsets.setdefault(e.ident, first)
    out = bytearray(max(first, max((offsets[e.ident] + e.size for e in kept_entries), default=first)))
    table = _table(kept_entries, offsets)
    out[: len(table)] = table
    for e in kept_entries:
        if e.size:
            code = data[e.offset : e.offset + e.size]
            if len(code) != e.size:  # never let a short slice change the bundle's length
                raise FormatError(f"bundle entry {e.ident}: {e.size} bytes at +0x{e.offset:x}, {len(code)} present")
            out[offsets[e.ident] : offsets[e.ident] + e.size] = code
    return bytes(out)


@dataclass(frozen=True)
class _Ccob:
    version: int
    method: int
    hsize: int
    usize: int
    span: int  # bytes the CCOB occupies (header + payload)


def _ccob_header(src: Source, offset: int, limit: int) -> _Ccob:
    c, end = ccob.read_ccob(src, offset, limit, "ccob")
    if c.problems:
        raise FormatError(c.problems[0])
    if not c.read:
        raise CannotThin(c.note)
    head = src.read(offset, 32)
    version, method = struct.unpack_from("<HH", head, 4)
    if version == 1:
        (usize,) = struct.unpack_from("<I", head, 8)
        hsize = 20
    elif version == 2:
        usize = struct.unpack_from("<I", head, 12)[0]
        hsize = 24
    else:
        usize = struct.unpack_from("<Q", head, 16)[0]
        hsize = 32
    if end is None:
        raise FormatError(f"compressed bundle at 0x{offset:x}: its end cannot be found")
    return _Ccob(version, method, hsize, usize, end - offset)


def inflate_all(method: int, src: Source, start: int, end: int, usize: int) -> bytes:
    """The whole payload, which must inflate to exactly ``usize`` bytes."""
    if usize > MAX_INFLATE:
        raise CannotThin(f"a compressed bundle of {usize} bytes inflated is larger than {MAX_INFLATE}")
    try:
        data = decompression.inflate_prefix(method, src, start, end, usize + 1)
    except decompression.ZstdUnavailable:
        raise CannotThin(decompression.ZSTD_NOTE) from None
    if len(data) != usize:
        raise FormatError(f"compressed bundle inflates to {len(data)} bytes, its header says {usize}")
    return data


def compress(method: int, data: bytes) -> bytes:
    if method == 0:
        return zlib.compress(data, ZLIB_LEVEL)
    zstd = decompression.zstd_module()
    if zstd is None:  # pragma: no cover - a dependency before Python 3.14
        raise CannotThin(decompression.ZSTD_NOTE)
    param = zstd.CompressionParameter
    options = {param.compression_level: ZSTD_LEVEL, param.enable_long_distance_matching: 1, param.content_size_flag: 1}
    # one call with the whole input: zstd knows its size, writes it and sizes its tables for it
    return bytes(zstd.ZstdCompressor(options=options).compress(data, zstd.ZstdCompressor.FLUSH_FRAME))


def ccob_bytes(version: int, method: int, data: bytes, payload: bytes, total: int | None = None) -> bytes:
    """A CCOB of ``version`` around an already compressed ``payload`` of ``data``;
    ``total`` (v2/v3) is the size the header claims, when the CCOB is padded after."""
    digest = int.from_bytes(hashlib.md5(data).digest()[:8], "little")
    if version == 1:
        return ccob.CCOB_MAGIC + struct.pack("<HHIQ", 1, method, len(data), digest) + payload
    if version == 2:
        size = total or 24 + len(payload)
        return ccob.CCOB_MAGIC + struct.pack("<HHIIQ", 2, method, size, len(data), digest) + payload
    size = total or 32 + len(payload)
    return ccob.CCOB_MAGIC + struct.pack("<HHQQQ", 3, method, size, len(data), digest) + payload


def _fill(h: _Ccob, bundle: bytes, payload: bytes) -> bytes:
    """The new CCOB, padded to the old one's span where that keeps every reader working.

    A zstd payload of a v2/v3 CCOB is followed by a zstd skippable frame up to the old span
    and the header claims the old total: zstd readers skip such frames, and readers that
    (like LLVM 19's bundler) decompress everything up to the end of their buffer do not
    meet the zero bytes they reject. zlib stops at its stream's end, so zeros are fine.
    """
    new = ccob_bytes(h.version, h.method, bundle, payload)
    pad = h.span - len(new)
    if h.method != 1 or h.version < 2 or pad == 0:
        return new
    if pad < 8:  # too short for a skippable frame: leave zeros after the CCOB
        return new
    frame = SKIPPABLE + struct.pack("<I", pad - 8) + bytes(pad - 8)
    return ccob_bytes(h.version, h.method, bundle, payload + frame, total=h.span)


def plan_ccob(src: Source, offset: int, limit: int, sel: Selector, *, pad: bool = True) -> tuple[Plan, int, int]:
    """(plan, old end, new end) for a compressed bundle at ``offset``; ``pad=False`` (a
    standalone file, cut after its last container) leaves out the skippable-frame padding."""
    h = _ccob_header(src, offset, limit)
    data = inflate_all(h.method, src, offset + h.hsize, offset + h.span, h.usize)
    inner = BytesSource(data)
    try:
        entries, _t, _e = read_entries(inner, 0, len(data))
    except FormatError as exc:
        raise FormatError(f"compressed bundle at 0x{offset:x}: {msg(exc)}") from None
    plan = Plan()
    kept = _choose(entries, sel, plan)
    if not plan.dropped:
        return plan, offset + h.span, offset + h.span
    bundle = compact_bundle(data, kept, entries_alignment(entries))
    payload = compress(h.method, bundle)
    if len(payload) + h.hsize > h.span:
        raise CannotThin(f"the thinned compressed bundle at 0x{offset:x} would not fit in place")
    new = _fill(h, bundle, payload) if pad else ccob_bytes(h.version, h.method, bundle, payload)
    if len(new) > h.span:
        raise CannotThin(f"the thinned compressed bundle at 0x{offset:x} would not fit in place")
    plan.writes.append((offset, new))
    plan.zeros.append((offset + len(new), offset + h.span))
    return plan, offset + h.span, offset + len(new)


def _blob(src: Source, pos: int, end: int) -> tuple[list[str], int, int]:
    """(targets, version, size) of the OffloadBinary at ``pos``."""
    c, _nxt = offload_binary.read_offload_binary(src, pos, end, "blob")
    if c.problems:
        raise FormatError(c.problems[0])
    if not c.read:
        raise CannotThin(c.note)
    version, size = struct.unpack_from("<IQ", src.read(pos + 4, 12))
    return list(c.targets), version, size


def plan_offloading(src: Source, start: int, end: int, sel: Selector) -> Plan:
    """``.llvm.offloading`` (``[start, end)`` of the file): kept blobs moved to the front."""
    blobs: list[tuple[int, int, list[str], bool]] = []
    pos = start
    plan = Plan()
    while pos < end:
        if src.read(pos, 4) != offload_binary.OFFLOAD_MAGIC:
            if walk.skip_zeros(src, pos, end) >= end:
                break  # zero padding at the end of the section
            raise FormatError(f".llvm.offloading: unrecognised bytes at 0x{pos - start:x}")
        targets, version, size = _blob(src, pos, end)
        if size % 8 or size == 0:
            raise CannotThin(f".llvm.offloading: a blob of {size} bytes is not 8-aligned")
        keeps = {sel.keeps(t) for t in targets}
        if len(keeps) > 1:
            raise CannotThin(".llvm.offloading: one blob holds images to keep and images to drop")
        keep = keeps == {True}
        (plan.kept if keep else plan.dropped).extend(targets)
        blobs.append((pos, size, targets, keep))
        pos += size
    if not plan.dropped:
        return plan
    kept = [b for b in blobs if b[3]]
    if not kept:
        raise CannotThin(".llvm.offloading would keep no image; LLVM cannot read an empty section")
    out = start
    for i, (bpos, size, _t, _k) in enumerate(kept):
        data = bytearray(src.read(bpos, size))
        if len(data) != size:
            raise CannotThin(f".llvm.offloading: a blob of {size} bytes is too large to move")
        if i == len(kept) - 1:
            struct.pack_into("<Q", data, 8, end - out)
        plan.writes.append((out, bytes(data)))
        out += size
    plan.zeros.append((out, end))
    return plan
