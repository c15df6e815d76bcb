"""The first pass through an inflated member (``binary/lookahead.py``, ``binary/members.py``):
where the fatbin magics are, found fast, and exactly the places a plain search finds."""

from __future__ import annotations

import io
import random
import zlib

from rocm_build_backend.binary.lookahead import FATBIN_MAGIC, MAX_MAGICS, aligned_magics
from rocm_build_backend.binary.members import InflateSource, _Recent


def _naive(buf: bytes, base: int) -> list[int]:
    return [base + p for p in range(len(buf) - 3) if (base + p) % 8 == 0 and buf[p : p + 4] == FATBIN_MAGIC]


def _planted(rng: random.Random, size: int, dense: bool) -> bytes:
    alphabet = bytes([0xED, 0x50, 0x55, 0xBA, 0]) if dense else bytes(range(256))
    buf = bytearray(rng.choice(alphabet) for _ in range(size))
    for _ in range(size // 200):
        p = rng.randrange(size - 4)
        buf[p : p + 4] = FATBIN_MAGIC  # aligned or not, overlapping others or not
    return bytes(buf)


def test_aligned_magics_finds_what_a_plain_search_finds():
    rng = random.Random(3)
    for dense in (False, True):  # dense: the regex engine takes over
        for _ in range(20):
            buf = _planted(rng, rng.randrange(8, 5000), dense)
            base = rng.randrange(0, 64)
            assert aligned_magics(buf, base) == _naive(buf, base)
            start = rng.randrange(len(buf))
            end = rng.randrange(start, len(buf) + 1)
            assert aligned_magics(buf, base, start, end) == [o for o in _naive(buf[start:end], base + start)]


def test_recent_keeps_the_last_bytes_across_pieces():
    r = _Recent(100)
    data = bytes(range(256)) * 4
    for i in range(0, 1000, 30):
        r.add(i, data[i : i + 30])
    assert r.get(900, 60) == data[900:960]
    assert r.get(950, 100) == data[950:1020]  # what is held, from there on (the last piece ends at 1020)
    assert r.get(10, 5) == b""  # dropped long ago
    r.add(5000, b"xyz")  # not contiguous: starts again
    assert r.get(990, 5) == b"" and r.get(5001, 2) == b"yz"


def _member(data: bytes) -> InflateSource:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw = c.compress(data) + c.flush()
    return InflateSource(io.BytesIO(raw), 0, len(raw), len(data))


def test_the_first_pass_remembers_every_aligned_magic():
    rng = random.Random(5)
    data = _planted(rng, 3 << 20, False)
    src = _member(data)
    assert src.magic_offsets(0, len(data)) is None  # nothing seen yet: it cannot tell
    src.read(len(data) - 64, 64)  # the section table at the end: one pass through it all
    assert src.magic_offsets(0, len(data)) == _naive(data, 0)
    assert src.magic_offsets(1 << 20, 2 << 20) == [o for o in _naive(data, 0) if (1 << 20) <= o < (2 << 20)]


def test_too_many_magics_are_not_remembered(monkeypatch):
    from rocm_build_backend.binary import lookahead

    monkeypatch.setattr(lookahead, "MAX_MAGICS", 1000)
    data = FATBIN_MAGIC * 4 * 4000  # 4,000 aligned magics
    src = _member(data)
    src.read(len(data) - 8, 8)
    assert src.magic_offsets(0, len(data)) is None
    assert MAX_MAGICS > 1000


def test_an_entry_header_over_4_kib_is_followed_to_its_cubin():
    """nvlink's entry header with the names of 71 linked objects (5,296 bytes): the first
    pass keeps the small device-linked cubin after it, as after any header."""
    from helpers import TESTS
    from rocm_build_backend.binary import elf

    data = (TESTS / "data" / "binaries" / "cuda_rdc_lineinfo_71_objects_sm90.so").read_bytes()
    whole = elf.BytesSource(data)
    (sec,) = elf.read_sections(whole, elf.read_header(whole), lambda n, t: n == ".nv_fatbin").sections
    entry = sec.offset + 16
    ehsize = int.from_bytes(data[entry + 4 : entry + 8], "little")
    assert ehsize > 4096
    src = _member(data)
    src.read(len(data) - 64, 64)  # the first pass
    assert src._ahead.get(entry, 64) == data[entry : entry + 64]
    assert src._ahead.get(entry + ehsize, 64) == data[entry + ehsize : entry + ehsize + 64]
