"""Compressed offload bundles (CCOB v1-v3, zlib or zstd): header, end, and the bundle
header at the start of the payload.

Only the first few kilobytes of the payload are inflated (``PREFIX_STEPS``); code objects
past them are not read. The bundle inside is read by ``bundle.read_bundle``.
"""

from __future__ import annotations

import struct

from rocm_build_backend.binary import magic
from rocm_build_backend.binary.bundle import read_bundle
from rocm_build_backend.binary.decompression import (
    ZSTD_MAGIC,
    ZSTD_NOTE,
    ZstdUnavailable,
    inflate_prefix,
    zlib_stream_length,
    zstd_frame,
)
from rocm_build_backend.binary.container import Container, ProblemList, add_note
from rocm_build_backend.binary.elf import BytesSource, FormatError, Source, msg, need

CCOB_MAGIC = magic.CCOB
PREFIX_STEPS = (64 << 10, 1 << 20, 8 << 20)  # how much of a compressed bundle to inflate, at most


class _Problems(ProblemList):
    """A problem list that keeps only the first "truncated" problem (one cut shows up in
    the header, the frame walk and the inflation alike)."""

    def append(self, item: str) -> None:
        if "truncated" in item and any("truncated" in p for p in self):
            return
        super().append(item)


def _at(offset: int, text: str) -> str:
    if text.startswith("truncated: "):
        return f"truncated: compressed bundle at 0x{offset:x}: {text[len('truncated: ') :]}"
    return f"compressed bundle at 0x{offset:x}: {text}"


def _header(src: Source, offset: int) -> tuple[int, int, int, int | None, int]:
    """(version, method, header size, total size or None (v1), uncompressed size)."""
    head = need(src, offset, 8, "compressed bundle header")
    if head[:4] != CCOB_MAGIC:
        raise FormatError("not a compressed offload bundle")
    version, method = struct.unpack_from("<HH", head, 4)
    total: int | None
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
    if total is not None and total < hsize:
        raise FormatError(f"compressed bundle at 0x{offset:x} claims a total size of {total} bytes")
    return version, method, hsize, total, usize


def read_ccob(src: Source, offset: int, limit: int, where: str, *, cut: bool = False) -> tuple[Container, int | None]:
    """A compressed offload bundle: header, then the start of what its payload inflates to."""
    version, method, hsize, total, usize = _header(src, offset)
    c = Container("ccob", where, offset)
    c.problems = _Problems()
    c.note = f"CCOB v{version}, {'zlib' if method == 0 else 'zstd'}"
    pstart = offset + hsize
    end: int | None = None
    if total is not None:
        end = offset + total
        if end > limit:
            what = "truncated: " if cut else ""
            c.problems.append(
                f"{what}compressed bundle at 0x{offset:x} claims {total} bytes, {max(0, limit - offset)} present"
            )
            end = limit
    pend = end if end is not None else limit
    end = _payload_end(src, c, method, pstart, pend, end, usize)
    _read_inner(src, c, method, pstart, pend, usize)
    return c, end


def _payload_end(
    src: Source, c: Container, method: int, pstart: int, pend: int, end: int | None, usize: int
) -> int | None:
    """Check the payload's frame; v1 has no total size: its end is the end of the zstd
    frame / zlib stream."""
    offset = c.offset
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
    return end


def _read_inner(src: Source, c: Container, method: int, pstart: int, pend: int, usize: int) -> None:
    """The bundle header at the start of the inflated payload, inflating more in steps."""
    offset, where = c.offset, c.where
    for step in PREFIX_STEPS:
        want = min(step, usize) if usize else step
        try:
            data = inflate_prefix(method, src, pstart, pend, want)
        except ZstdUnavailable:
            c.read = False
            add_note(c, ZSTD_NOTE)
            return
        except FormatError as exc:
            c.problems.append(_at(offset, msg(exc)))
            return
        more = len(data) >= want and step != PREFIX_STEPS[-1] and (not usize or want < usize)
        try:
            inner, _ = read_bundle(BytesSource(data), 0, max(usize, len(data)), where)
        except FormatError as exc:
            if more and "truncated" in msg(exc):
                continue  # the header is longer than what we inflated: inflate more
            if len(data) < want:
                c.problems.append(
                    f"truncated: compressed bundle at 0x{offset:x} inflates to {len(data)} bytes and stops ({msg(exc)})"
                )
            else:
                c.problems.append(_at(offset, msg(exc)))
            return
        if more and any("truncated: the entry table" in p for p in inner.problems):
            continue
        c.targets = inner.targets
        # code objects beyond the inflated prefix were not read: only header problems count
        c.problems.extend(p for p in inner.problems if not p.startswith("truncated: the code object"))
        add_note(c, inner.note)
        return
    c.problems.append(f"compressed bundle at 0x{offset:x}: bundle header larger than {PREFIX_STEPS[-1]} bytes")
