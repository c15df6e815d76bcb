"""What the first pass through an inflated zip member keeps for the readers that come back.

A library's section table is at its end, so the audit inflates a member to the end before it
knows where the device sections are, then comes back to them; deflate can only be re-read
from a restart point, so reading a large ``.nv_fatbin`` again cost up to 1.75x the member.
``Lookahead`` watches the output of that first pass for NVIDIA fatbin containers (their
magic at 8-aligned offsets) and

- remembers where each magic is (``magics``: up to ``MAX_MAGICS`` offsets), so the search of
  a library's data for fatbins (``embedded``) visits those places instead of reading the data
  again;
- keeps the few bytes the fatbin reader will ask for: each container's header, each entry
  header, the bytes after each container, and the first small cubin of a container (for the
  device-link stub check, up to ``MAX_CUBIN_BYTES`` of them).

It keeps true output bytes only, so a wrong guess costs memory or a re-read, never a wrong
answer; it keeps at most ``MAX_BYTES``. It parses nothing else and reads no source: the
inflating source hands it each piece of output and a way to get recent bytes.
"""

from __future__ import annotations

import heapq
import re
import struct
from array import array
from bisect import bisect_left, bisect_right
from typing import Callable

from rocm_build_backend.binary import magic

FATBIN_MAGIC = magic.FATBIN
MAX_BYTES = 16 << 20  # bytes kept per member
MAX_CUBIN_BYTES = 4 << 20  # of those, small cubins (the stub check looks into a few)
MAX_PENDING = 1 << 16  # places waiting for their bytes (a file of magics must not grow this)
MAX_MAGICS = 1 << 18  # magic offsets remembered per member (2 MiB); past it, none is trusted
HEAD = 256  # kept at a container's start and end (the walker reads 256 bytes there)
ENTRY = 64
SMALL_CUBIN = 64 << 10  # fatbin.STUB_CHECK_MAX
_SECOND = FATBIN_MAGIC[1]
_PATTERN = re.compile(re.escape(FATBIN_MAGIC))
Recent = Callable[[int, int], bytes]  # the bytes at [offset, offset + n) still held, or fewer


def aligned_magics(buf: bytes | bytearray, base: int, start: int = 0, end: int | None = None) -> list[int]:
    """Offsets ``base + p``, 8-aligned, where ``buf[p:p+4]`` is the fatbin magic, p in
    ``[start, end - 4]``.

    Only aligned places can hold one, so the magic's second byte (0xED, rare in machine code
    and in cubins) is looked for with ``memchr`` in a copy of every eighth byte; where it is
    frequent (more than one place in 256 bytes) the regular expression engine does the rest."""
    end = len(buf) if end is None else end
    first = start + (-(base + start)) % 8
    column = buf[first + 1 : end - 2 : 8]  # the second byte of every aligned place
    out: list[int] = []
    budget = 16 + (end - start) // 256
    i = column.find(_SECOND)
    while i >= 0:
        s = first + 8 * i
        if buf[s : s + 4] == FATBIN_MAGIC:
            out.append(base + s)
        budget -= 1
        if budget < 0:  # dense: finish this piece with the regex engine
            out.extend(base + m.start() for m in _PATTERN.finditer(buf, s + 1, end) if (base + m.start()) % 8 == 0)
            return out
        i = column.find(_SECOND, i + 1)
    return out


class Lookahead:
    def __init__(self) -> None:
        self._starts: list[int] = []
        self._data: list[bytes] = []
        self._kept = 0
        self._cubins = 0
        self._seen = 0  # output offset up to which the magic scan ran, contiguous from 0
        self._todo: list[tuple[int, int, int, int]] = []  # (offset, length, kind, end)
        self.magics = array("q")
        self.magics_complete = True  # False once more than MAX_MAGICS were seen

    def get(self, offset: int, n: int) -> bytes | None:
        """The bytes [offset, offset+n) when a kept record holds all of them."""
        i = bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        start, data = self._starts[i], self._data[i]
        if offset + n <= start + len(data):
            return data[offset - start : offset - start + n]
        return None

    def magic_offsets(self, start: int, end: int) -> list[int] | None:
        """The 8-aligned offsets in ``[start, end)`` where a fatbin magic starts, or None when
        the scan has not covered that range or stopped remembering."""
        if not self.magics_complete or end > self._seen:
            return None
        lo = bisect_left(self.magics, start)
        hi = bisect_left(self.magics, end)
        return list(self.magics[lo:hi])

    def feed(self, chunk: bytes, start: int, recent: Recent) -> None:
        """Look at a new piece of output ``chunk`` (at ``start``) past what was seen;
        ``recent(offset, n)`` gives earlier output still held (for places that span pieces)."""
        end = start + len(chunk)
        if end <= self._seen or start > self._seen:
            return  # seen already, or a jump ahead past unseen output (never in one pass)
        if not self.magics_complete and (self._kept >= MAX_BYTES or len(self._todo) >= MAX_PENDING):
            self._seen = end
            return  # nothing more to remember or keep: no need to look
        skip = self._seen - start
        found: list[int] = []
        if skip == 0 and start >= 3:  # a magic that begins in the piece before
            before = recent(start - 3, 3)
            if len(before) == 3:
                found = aligned_magics(before + chunk[:3], start - 3)
        found += aligned_magics(chunk, start, max(0, skip - 3))
        self._seen = end
        self._remember(found)
        if self._kept >= MAX_BYTES:
            return
        for at in found:
            if len(self._todo) >= MAX_PENDING:
                break
            heapq.heappush(self._todo, (at, HEAD, 0, 0))
        while self._todo and self._todo[0][0] + self._todo[0][1] <= end and self._kept < MAX_BYTES:
            at, length, kind, cend = heapq.heappop(self._todo)
            data = recent(at, length)
            if len(data) == length:  # else it went by unseen (a jump ahead)
                self._keep(at, data, kind, cend)

    def _remember(self, found: list[int]) -> None:
        if not self.magics_complete or not found:
            return
        fresh = [at for at in found if not self.magics or at > self.magics[-1]]
        if len(self.magics) + len(fresh) > MAX_MAGICS:
            self.magics_complete = False
            self.magics = array("q")
            return
        self.magics.extend(fresh)

    def _keep(self, at: int, data: bytes, kind: int, cend: int) -> None:
        if not self._starts or at > self._starts[-1]:
            self._starts.append(at)
            self._data.append(data)
            self._kept += len(data)
            if kind == 3:
                self._cubins += len(data)
        if kind == 0 and len(data) >= 16:  # a container header: its first entry, its end
            _m, _v, hsize, fat_size = struct.unpack_from("<4sHHQ", data)
            if 16 <= hsize and fat_size < (1 << 40):
                cend = at + hsize + fat_size
                heapq.heappush(self._todo, (at + hsize, ENTRY, 1, cend))
                heapq.heappush(self._todo, (cend, HEAD, 2, 0))
        elif kind in (1, 4) and len(data) >= ENTRY:  # an entry: the next one, a small cubin
            ekind, _ver, ehsize, psize, csize = struct.unpack_from("<HHIQI", data)
            if ehsize < 64 or at + ehsize > cend or psize >= (1 << 40):
                return
            stored = csize or psize
            cubin = kind == 1 and ekind == 2 and 0 < stored <= SMALL_CUBIN
            if cubin and self._cubins < MAX_CUBIN_BYTES:  # what the stub check reads
                heapq.heappush(self._todo, (at + ehsize, stored, 3, 0))
            nxt = at + ehsize + psize
            if nxt + ENTRY <= cend:
                heapq.heappush(self._todo, (nxt, ENTRY, 4 if cubin or kind == 4 else 1, cend))
