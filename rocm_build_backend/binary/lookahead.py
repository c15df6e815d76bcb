"""What the first pass through an inflated zip member keeps for the readers that come back.

A library's section table is at its end, so the audit inflates a member to the end before it
knows where the device sections are, then comes back to them; deflate can only be re-read
from a restart point, so reading a large ``.nv_fatbin`` again cost up to 1.75x the member.
``Lookahead`` watches the output of that first pass for NVIDIA fatbin containers (their
magic at 8-aligned offsets) and keeps the few bytes the fatbin reader will ask for: each
container's header, each entry header, the bytes after each container, and the first small
cubin of a container (for the device-link stub check). It keeps true output bytes only, so a
wrong guess costs memory, never a wrong answer; it keeps at most ``MAX_BYTES``. It parses
nothing else and reads no source.
"""

from __future__ import annotations

import heapq
import struct
from bisect import bisect_right

FATBIN_MAGIC = b"\x50\xed\x55\xba"
MAX_BYTES = 16 << 20  # bytes kept per member
MAX_PENDING = 1 << 16  # places waiting for their bytes (a file of magics must not grow this)
HEAD = 256  # kept at a container's start and end (the walker reads 256 bytes there)
ENTRY = 64
SMALL_CUBIN = 64 << 10  # fatbin.STUB_CHECK_MAX


class Lookahead:
    def __init__(self) -> None:
        self._starts: list[int] = []
        self._data: list[bytes] = []
        self._kept = 0
        self._seen = 0  # output offset up to which the magic scan ran
        self._todo: list[tuple[int, int, int, int]] = []  # (offset, length, kind, end)

    def get(self, offset: int, n: int) -> bytes | None:
        """The bytes [offset, offset+n) when a kept record holds all of them."""
        i = bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        start, data = self._starts[i], self._data[i]
        if offset + n <= start + len(data):
            return data[offset - start : offset - start + n]
        return None

    def feed(self, win: bytearray, win_start: int) -> None:
        """Look at the recent output ``win`` (starting at ``win_start``) past what was seen."""
        if self._kept >= MAX_BYTES:
            return
        end = win_start + len(win)
        if end <= self._seen:
            return
        scan_from = max(win_start, self._seen - 3)
        pos = win.find(FATBIN_MAGIC, scan_from - win_start)
        while pos >= 0 and len(self._todo) < MAX_PENDING:
            at = win_start + pos
            if at % 8 == 0:
                heapq.heappush(self._todo, (at, HEAD, 0, 0))
            pos = win.find(FATBIN_MAGIC, pos + 1)
        self._seen = end
        while self._todo and self._todo[0][0] + self._todo[0][1] <= end and self._kept < MAX_BYTES:
            at, length, kind, cend = heapq.heappop(self._todo)
            if at < win_start:
                continue  # went by unseen (a jump ahead)
            self._keep(at, bytes(win[at - win_start : at - win_start + length]), kind, cend)

    def _keep(self, at: int, data: bytes, kind: int, cend: int) -> None:
        if not self._starts or at > self._starts[-1]:
            self._starts.append(at)
            self._data.append(data)
            self._kept += len(data)
        if kind == 0 and len(data) >= 16:  # a container header: its first entry, its end
            _m, _v, hsize, fat_size = struct.unpack_from("<4sHHQ", data)
            if 16 <= hsize <= 4096 and fat_size < (1 << 40):
                cend = at + hsize + fat_size
                heapq.heappush(self._todo, (at + hsize, ENTRY, 1, cend))
                heapq.heappush(self._todo, (cend, HEAD, 2, 0))
        elif kind in (1, 4) and len(data) >= ENTRY:  # an entry: the next one, a small cubin
            ekind, _ver, ehsize, psize, csize = struct.unpack_from("<HHIQI", data)
            if ehsize < 64 or ehsize > 4096 or psize >= (1 << 40):
                return
            stored = csize or psize
            cubin = kind == 1 and ekind == 2 and 0 < stored <= SMALL_CUBIN
            if cubin:  # the first small cubin of a container: what the stub check reads
                heapq.heappush(self._todo, (at + ehsize, stored, 3, 0))
            nxt = at + ehsize + psize
            if nxt + ENTRY <= cend:
                heapq.heappush(self._todo, (nxt, ENTRY, 4 if cubin or kind == 4 else 1, cend))
