"""Bounded decompression for device code: zlib, zstd (``compression.zstd`` or its backport) and LZ4 blocks.

Every function here stops after the number of output bytes its caller asks for; none sizes
a buffer from a header field. It knows no container format.
"""

from __future__ import annotations

import zlib
from functools import lru_cache
from typing import Any

from rocm_build_backend.binary.budget import charge
from rocm_build_backend.binary.elf import FormatError, Source, need

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZSTD_NOTE = (
    "compressed with zstd and no zstd decoder is installed: install backports.zstd "
    "(a dependency of rocm-build-backend before Python 3.14) to read targets"
)
ZSTD_WINDOW_LOG_MAX = 27  # zstd's own default limit: windows up to 128 MiB
_PIECE = 1 << 20  # inflated at most this much per call: one 64 KiB zlib chunk can give 64 MiB


@lru_cache(maxsize=None)
def zstd_module() -> Any | None:
    """Python 3.14's ``compression.zstd``, else its backport ``backports.zstd`` (the same API;
    a dependency before 3.14), else None. Imported only when a zstd stream is met."""
    try:
        from compression import zstd  # type: ignore[import-not-found,unused-ignore]  # Python 3.14+

        return zstd
    except ImportError:
        pass
    try:
        from backports import zstd as backport  # type: ignore[import-not-found,unused-ignore]

        return backport
    except ImportError:
        return None


def _zstd_backend() -> Any | None:
    """The zstd module to decode with (tests replace this to play a machine without one)."""
    return zstd_module()


def zstd_available() -> bool:
    return _zstd_backend() is not None


class ZstdUnavailable(Exception):
    pass


class _SourceReader:
    """A file-like object over ``[start, end)`` of a source, for streaming decompressors."""

    def __init__(self, src: Source, start: int, end: int) -> None:
        self._src, self._pos, self._end = src, start, end

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = 1 << 16
        n = min(n, self._end - self._pos, 1 << 20)
        if n <= 0:
            return b""
        data = self._src.read(self._pos, n)
        self._pos += len(data)
        return data

    def readinto(self, buf: bytearray | memoryview) -> int:
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
        return _inflate_zlib(src, start, end, want)
    if method == 1:
        mod = _zstd_backend()
        if mod is None:
            raise ZstdUnavailable()
        return _inflate_zstd(mod, _SourceReader(src, start, end), want)
    raise FormatError(f"unknown compression method {method}")


def _inflate_zlib(src: Source, start: int, end: int, want: int) -> bytes:
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
                piece = d.decompress(data, min(want - got, _PIECE))  # charged before the next one
            except zlib.error as exc:
                if got:
                    return b"".join(out)
                raise FormatError(f"damaged zlib stream: {exc}") from None
            out.append(piece)
            got += len(piece)
            charge(len(piece), "bytes inflated")
            data = d.unconsumed_tail
    return b"".join(out)


def _inflate_zstd(mod: Any, reader: _SourceReader, want: int) -> bytes:
    """``compression.zstd`` (or its backport), streamed, stopping at ``want`` bytes."""
    d = mod.ZstdDecompressor(options={mod.DecompressionParameter.window_log_max: ZSTD_WINDOW_LOG_MAX})
    out: list[bytes] = []
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
            charge(len(piece), "bytes inflated")
    except mod.ZstdError as exc:
        if got:
            return b"".join(out)
        raise FormatError(f"damaged zstd stream: {exc}") from None
    return b"".join(out)


def zstd_frame(src: Source, start: int, end: int) -> tuple[int, int | None]:
    """Walk one zstd frame's block headers without decompressing it (RFC 8878 §3.1.1).

    Returns (frame length in bytes, content size from the frame header or None).
    """
    head = (
        need(src, start, 18, "zstd frame header")
        if end - start >= 18
        else need(src, start, max(0, end - start), "zstd frame header")
    )
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
    d = zlib.decompressobj()
    pos = start
    while pos < end and not d.eof:
        chunk = src.read(pos, min(1 << 16, end - pos))
        if not chunk:
            break
        data = chunk
        try:
            while data and not d.eof:
                charge(len(d.decompress(data, 1 << 20)), "bytes inflated")
                data = d.unconsumed_tail
        except zlib.error as exc:
            raise FormatError(f"damaged zlib stream: {exc}") from None
        pos += len(chunk) - len(d.unused_data)
    if not d.eof:
        raise FormatError("truncated: zlib stream has no end")
    return pos - start


def _lz4_length(data: bytes, i: int, n: int, nibble: int) -> tuple[int, int]:
    """An LZ4 length: the token's nibble, extended by bytes while they are 255."""
    if nibble != 15:
        return nibble, i
    while True:
        if i >= n:
            raise FormatError("damaged LZ4 block")
        b = data[i]
        i += 1
        nibble += b
        if b != 255:
            return nibble, i


def lz4_block(data: bytes, cap: int) -> bytes:
    """Decode one LZ4 block (no frame); stops at ``cap`` output bytes. Bounds-checked."""
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        token = data[i]
        i += 1
        lit, i = _lz4_length(data, i, n, token >> 4)
        if i + lit > n:
            raise FormatError("damaged LZ4 block")
        out += data[i : i + lit]
        i += lit
        if len(out) > cap:
            raise FormatError("LZ4 block inflates past the limit")
        if i >= n:
            break  # the last sequence has literals only
        if i + 2 > n:
            raise FormatError("damaged LZ4 block")
        dist = data[i] | (data[i + 1] << 8)
        i += 2
        if dist == 0 or dist > len(out):
            raise FormatError("damaged LZ4 block")
        mlen, i = _lz4_length(data, i, n, token & 15)
        mlen += 4
        if len(out) + mlen > cap:
            raise FormatError("LZ4 block inflates past the limit")
        startpos = len(out) - dist
        if mlen <= dist:
            out += out[startpos : startpos + mlen]
        else:  # the match overlaps its own output: the last ``dist`` bytes repeat
            out += (out[startpos:] * (mlen // dist + 1))[:mlen]
    charge(len(out), "bytes inflated")
    return bytes(out)
