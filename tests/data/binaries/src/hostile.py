"""Generators of small hostile inputs for the binary readers (tests and bench/bench_hostile.py).

Each ``make_*(n)`` returns ``(file name, bytes)``: a file (or a wheel, for names ending in
``.whl``) whose size grows linearly with ``n`` and that once made a reader do work growing
faster than its size: entries x strings, sections x string table, candidates x the rest of
the file, amplified decompression, many small reads of an inflated zip member.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
OFFLOAD_MAGIC = b"\x10\xff\x10\xad"
FATBIN_MAGIC = b"\x50\xed\x55\xba"
SHT_PROGBITS, SHT_STRTAB = 1, 3


def elf64(sections: list[tuple[int, int, int, int]], body: bytes, shstrtab: bytes, *,
          shoff_past_end: bool = False) -> bytes:
    """A little-endian x86-64 ET_DYN ELF: ``body`` after the header, then the name table,
    then the section headers. ``sections`` are (name offset, type, offset, size); offsets
    are absolute. Section 0 is the null section; the name table is the last one."""
    strtab_off = 64 + len(body)
    shoff = strtab_off + len(shstrtab)
    shoff += (-shoff) % 8
    count = len(sections) + 2
    hdr = struct.pack("<4sBBBBB7sHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, b"\0" * 7,
                      3, 62, 1, 0, 0, shoff + (1 << 20 if shoff_past_end else 0), 0, 64, 56, 0, 64,
                      count, count - 1)
    table = [b"\0" * 64]
    for name, typ, off, size in sections:
        table.append(struct.pack("<IIQQQQIIQQ", name, typ, 0, 0, off, size, 0, 0, 1, 0))
    table.append(struct.pack("<IIQQQQIIQQ", 0, SHT_STRTAB, 0, 0, strtab_off, len(shstrtab), 0, 0, 1, 0))
    pad = b"\0" * ((-(strtab_off + len(shstrtab))) % 8)
    return hdr + body + shstrtab + pad + b"".join(table)


def wheel(members: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return raw.getvalue()


def offload_binary(entries: list[tuple[int, int]], strings: list[tuple[bytes, bytes]], *,
                   version: int = 2) -> bytes:
    """An OffloadBinary (v2) whose entries are (string table offset, count) into one string
    table holding ``strings``; offsets are from the blob's start."""
    head = 32
    eoff = head
    table_off = eoff + 40 * len(entries)
    data_off = table_off + 24 * len(strings)
    pool = bytearray()
    pairs = []
    for k, v in strings:
        pairs.append((data_off + len(pool), data_off + len(pool) + len(k) + 1))
        pool += k + b"\0" + v + b"\0"
    size = data_off + len(pool)
    size += (-size) % 8
    out = bytearray(OFFLOAD_MAGIC + struct.pack("<IQQQ", version, size, eoff, len(entries)))
    for stroff, count in entries:
        stroff = table_off if stroff < 0 else stroff
        out += struct.pack("<HHIQQQQ", 1, 3, 0, stroff, count, 0, 0)
    for k, v in pairs:
        out += struct.pack("<QQQ", k, v, 0)
    out += pool
    out += b"\0" * (size - len(out))
    return bytes(out)


def make_offload_strings(n: int) -> tuple[str, bytes]:
    """n entries that all point at one table of n strings (entries x strings)."""
    strings = [(b"key%d" % i, b"value") for i in range(n - 1)] + [(b"arch", b"gfx90a")]
    return "offload_strings.bin", offload_binary([(-1, n)] * n, strings)


def make_offload_strings_wheel(n: int) -> tuple[str, bytes]:
    """The same as a library inside a wheel (as in the 643-byte wheel that hung check)."""
    return "offload_strings.whl", wheel({"pkg/_k.so": make_offload_strings(n)[1]})


def make_strtab_no_nul(n: int) -> tuple[str, bytes]:
    """n sections whose names index a section-name table of 64 n bytes without a NUL."""
    shstrtab = b"A" * (64 * n)
    sections = [(i * 64, SHT_PROGBITS, 64, 0) for i in range(n)]
    return "strtab_no_nul.so", elf64(sections, b"", shstrtab)


def make_scan_magics(n: int) -> tuple[str, bytes]:
    """A damaged ELF (section table gone) holding n bundle magics, each of which starts an
    entry table that runs, valid entry after valid entry, to the end of the file."""
    ident = BUNDLE_MAGIC + b"~~~~~~~~"  # printable: an entry id that is also a bundle header
    entry = struct.pack("<QQQ", 0, 0, len(ident)) + ident
    body = b"\0" * 8 + entry * n  # the ids sit 4-aligned
    return "scan_magics.so", elf64([], body, b"\0", shoff_past_end=True)


def make_many_problems(n: int) -> tuple[str, bytes]:
    """One bundle with n entries, each a distinct problem ("names no target")."""
    idents = [b"hipv4-amdgcn-amd-amdhsa-e%d-" % i for i in range(n)]
    code_at = 32 + sum(24 + len(i) for i in idents)  # one byte of "code" after the table
    entries = b"".join(struct.pack("<QQQ", code_at, 1, len(i)) + i for i in idents)
    return "many_problems.hipfb", BUNDLE_MAGIC + struct.pack("<Q", n) + entries + b"\x01"


def make_ccob_sections(n: int) -> tuple[str, bytes]:
    """20 .hip_fatbin sections over one CCOB v1 zlib stream that inflates to n x 64 MiB,
    in a wheel (the stream, itself deflated, takes a few KB)."""
    d = zlib.compressobj(9)
    zeros = b"\0" * (1 << 20)
    stream = b"".join(d.compress(zeros) for _ in range(64 * n)) + d.flush()
    ccob = b"CCOB" + struct.pack("<HHIII", 1, 0, 0, 0, 0) + stream
    names = b"\0.hip_fatbin\0"
    sections = [(1, SHT_PROGBITS, 64, len(ccob))] * 20
    so = elf64(sections, ccob, names)
    return "ccob_sections.whl", wheel({"pkg/_k.so": so})


def make_lz4_fatbin(n: int) -> tuple[str, bytes]:
    """A fatbin of n small LZ4 ELF entries, each inflating to the stub check's cap."""
    block = b"\x1f" + b"a" + struct.pack("<H", 1) + b"\xff" * 1000 + b"\x00"
    block += b"\x10" + b"z"  # the last sequence: literals only
    payload = block + b"\0" * ((-len(block)) % 8)
    entry = struct.pack("<HHIQIIHHIIIQQQ", 2, 0x101, 64, len(payload), len(block), 0, 8, 1, 80, 0, 0,
                        0x2011, 0, 256 << 10) + payload
    fat = FATBIN_MAGIC + struct.pack("<HHQ", 1, 16, len(entry) * n) + entry * n
    return "lz4.fatbin", fat


def make_small_bundles_wheel(n: int) -> tuple[str, bytes]:
    """n tiny bundles back to back in a deflated wheel member: many small reads."""
    ident = b"hipv4-amdgcn-amd-amdhsa--gfx90a"
    head_len = 32 + 24 + len(ident)
    code = b"\0" * 64
    one = BUNDLE_MAGIC + struct.pack("<Q", 1) + struct.pack("<QQQ", head_len, len(code), len(ident)) + ident + code
    one += b"\0" * ((-len(one)) % 8)
    return "small_bundles.whl", wheel({"pkg/k.hipfb": one * n})


def make_data_fatbins(n: int) -> tuple[str, bytes]:
    """A library whose .nv_fatbin is an empty (stub) fatbin and whose .ldata holds n empty
    fatbin headers back to back: each is a candidate for the data-section search."""
    empty = FATBIN_MAGIC + struct.pack("<HHQ", 1, 16, 0)
    data = empty * n
    names = b"\0.nv_fatbin\0.ldata\0"
    return "data_fatbins.so", elf64([(1, SHT_PROGBITS, 64, len(empty)), (12, SHT_PROGBITS, 64 + len(empty), len(data))],
                                    empty + data, names)


GENERATORS = {
    "offload_strings": make_offload_strings,
    "offload_strings_wheel": make_offload_strings_wheel,
    "strtab_no_nul": make_strtab_no_nul,
    "scan_magics": make_scan_magics,
    "many_problems": make_many_problems,
    "ccob_sections": make_ccob_sections,
    "lz4_fatbin": make_lz4_fatbin,
    "small_bundles_wheel": make_small_bundles_wheel,
    "data_fatbins": make_data_fatbins,
}
