"""Zip members as random-access sources, read in place: stored members at their offsets,
deflated ones inflated on demand (``InflateSource``), others through ``zipfile``.

Nothing is extracted and no member is held whole in memory. It knows no device format.
"""

from __future__ import annotations

import zipfile
import zlib
from bisect import bisect_right
from typing import IO, Any

from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.budget import charge
from rocm_build_backend.binary.elf import FileSource, FormatError, Source
from rocm_build_backend.binary.lookahead import Lookahead

ZIP_MAGIC = b"PK\x03\x04"


class _Recent:
    """The last ``keep`` (or a little more) bytes of a stream's output, as the pieces it came
    in (nothing copied to append or to drop)."""

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._pieces: list[bytes] = []
        self._starts: list[int] = []
        self._held = 0

    def add(self, start: int, data: bytes) -> None:
        if self._pieces and self._starts[-1] + len(self._pieces[-1]) != start:
            self._pieces, self._starts, self._held = [], [], 0
        self._pieces.append(data)
        self._starts.append(start)
        self._held += len(data)
        while self._held - len(self._pieces[0]) >= self._keep:
            self._held -= len(self._pieces.pop(0))
            self._starts.pop(0)

    def get(self, offset: int, n: int) -> bytes:
        """The bytes from ``offset`` on (at most ``n``) that are held; b"" when ``offset`` is not."""
        if not self._pieces or offset < self._starts[0] or n <= 0:
            return b""
        i = bisect_right(self._starts, offset) - 1
        rel = offset - self._starts[i]
        piece = self._pieces[i]
        if rel >= len(piece):
            return b""
        if rel + n <= len(piece):
            return piece[rel : rel + n]
        parts = [piece[rel:]]
        got = len(parts[0])
        for piece in self._pieces[i + 1 :]:
            if got >= n:
                break
            parts.append(piece[: n - got])
            got += len(parts[-1])
        return b"".join(parts)


class InflateSource:
    """A deflated zip member as a random-access source, inflated on demand.

    Reads that move forward continue the current stream; a read behind it (or far ahead)
    restarts from the nearest saved decompressor state (a copy taken every ``spacing`` bytes
    of output: 1 MiB, or more for members over 256 MiB, at most 256 of them, ~35 KB each),
    so the section table at a library's end costs one pass and later reads of earlier
    sections cost about a MiB each. Nothing is kept but the last MiB of output, the restart
    points and what the ``Lookahead`` keeps.
    """

    IN_CHUNK = 64 << 10
    OUT_STEP = 1 << 20
    SPACING = 8 << 20  # at most this far apart
    MIN_SPACING = 1 << 20
    MAX_POINTS = 256
    RECENT = 1 << 20
    MIN_STEP = 64 << 10

    def __init__(self, fh: IO[bytes], base: int, csize: int, usize: int) -> None:
        self._zlib = zlib
        self._fh, self._base, self._csize = fh, base, csize
        self.size = usize
        self.damaged = ""
        self.inflated = 0
        self._cps: list[tuple[int, int, Any]] = []
        self._recent = _Recent(self.RECENT)
        self._ahead = Lookahead()
        self._fresh()

    @property
    def spacing(self) -> int:
        return min(self.SPACING, max(self.MIN_SPACING, self.size // self.MAX_POINTS))

    def _fresh(self) -> None:
        self._d = self._zlib.decompressobj(-15)
        self._out = 0
        self._fed = 0
        self._tail = b""
        self._eof = False

    def _restore(self, cp: tuple[int, int, Any]) -> None:
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
        charge(len(out), "bytes inflated")
        start = self._out
        self._out += len(out)
        self.inflated += len(out)
        self._recent.add(start, out)
        self._ahead.feed(out, start, self._recent.get)
        if not self._eof and (not self._cps or self._out >= self._cps[-1][0] + self.spacing):
            self._cps.append((self._out, self._fed - len(self._tail), self._d.copy()))
        return out

    def _seek(self, pos: int) -> None:
        """Move the stream to output offset ``pos`` (restart behind, inflate ahead)."""
        if pos < self._out or pos - self._out > self.spacing:
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
                return

    def magic_offsets(self, start: int, end: int) -> list[int] | None:
        """Where fatbin magics start in ``[start, end)``, when the first pass saw it all."""
        return self._ahead.magic_offsets(start, end)

    def read(self, offset: int, n: int) -> bytes:
        if offset < 0 or n <= 0 or offset >= self.size:
            return b""
        n = min(n, self.size - offset, _elf.MAX_READ)
        kept = self._ahead.get(offset, n)
        if kept is not None and len(kept) == n:
            return kept
        head = self._recent.get(offset, n)
        if len(head) == n:
            return head
        pos = offset + len(head)
        if pos != self._out:
            self._seek(pos)
            if self._out != pos:
                return head
        parts = [head] if head else []
        got = len(head)
        while got < n:
            # inflate at least MIN_STEP: the next small reads are then served from the buffer
            out = self._step(max(min(n - got, self.OUT_STEP), self.MIN_STEP))
            if not out:
                break
            parts.append(out[: n - got])
            got += min(len(out), n - got)
        return b"".join(parts)


class _ZipStreamSource:
    """Members compressed with something other than deflate (bzip2, lzma): zipfile's own
    seekable stream (a backward seek re-reads from the start)."""

    def __init__(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
        self._f = zf.open(info)
        self.size = info.file_size
        self.damaged = ""
        self._pos = 0

    def read(self, offset: int, n: int) -> bytes:
        if offset < 0 or n <= 0 or offset >= self.size or self.damaged:
            return b""
        n = min(n, self.size - offset, _elf.MAX_READ)
        # what zipfile will decompress: from the start when going back, else the gap
        charge((offset if offset < self._pos else offset - self._pos) + n, "bytes inflated")
        try:
            self._f.seek(offset)
            data = self._f.read(n)
        except Exception as exc:  # zipfile raises many types for bad data
            self.damaged = f"the zip member cannot be read ({exc})"
            return b""
        self._pos = offset + len(data)
        return data


def member_source(zf: zipfile.ZipFile, raw: IO[bytes], info: zipfile.ZipInfo) -> Source:
    """A source for one zip member, read in place."""
    if info.flag_bits & 0x1:
        raise FormatError("the zip member is encrypted")
    if info.compress_type not in (0, 8):
        return _ZipStreamSource(zf, info)
    raw.seek(info.header_offset)
    local = raw.read(30)
    if len(local) < 30 or local[:4] != ZIP_MAGIC:
        raise FormatError("the zip member's local header is missing")
    name_len = int.from_bytes(local[26:28], "little")
    extra_len = int.from_bytes(local[28:30], "little")
    base = info.header_offset + 30 + name_len + extra_len
    if info.compress_type == 0:
        return FileSource(raw, base, min(info.file_size, info.compress_size))
    return InflateSource(raw, base, info.compress_size, info.file_size)
