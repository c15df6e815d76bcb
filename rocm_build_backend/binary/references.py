"""Where a shared library's data holds an address inside a range of its memory: the words the
dynamic loader fills in (``R_*_RELATIVE`` relocations in ``SHT_RELA`` sections, and ``SHT_RELR``
packed relocations), and the dynamic symbols.

A library registers each device-code container with the GPU runtime through a record in
``.nvFatBinSegment`` / ``.hipFatBinSegment`` whose pointer is such a word. ``references``
lists them for one range, so a container can be moved and its pointers set to the new place.
Anything it cannot account for (a relocation with a symbol into the range, a dynamic symbol
inside it, another machine than x86-64 or AArch64) raises ``CannotCompact``. It only reads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

from rocm_build_backend.binary.layout import CannotCompact, Data, Segment

EM_X86_64, EM_AARCH64 = 62, 183
_RELATIVE = {EM_X86_64: 8, EM_AARCH64: 1027}
_NONE = 0
SHT_RELA, SHT_DYNSYM, SHT_RELR = 4, 11, 19
SHF_ALLOC = 2


@dataclass
class Reference:
    target: int  # the address it holds
    slot: int | None  # file offset of the word the loader writes (None: not in the file)
    addend: int | None  # file offset of the RELA entry's addend (None for RELR)


def file_offset(segs: Sequence[Segment], addr: int, n: int = 8) -> int | None:
    """The file offset of ``[addr, addr + n)`` in a loaded segment's file part, if it has one."""
    for s in segs:
        if s.type == 1 and s.vaddr <= addr and addr + n <= s.vaddr + s.filesz:
            return s.offset + (addr - s.vaddr)
    return None


def _word(buf: Data, at: int | None) -> int | None:
    return None if at is None else int(struct.unpack_from("<Q", buf, at)[0])


def _dynsym_values(buf: Data, shdrs: Sequence[Sequence[int]]) -> list[int]:
    for sh in shdrs:
        if sh[1] == SHT_DYNSYM and sh[9] == 24:
            return [struct.unpack_from("<Q", buf, sh[4] + i * 24 + 8)[0] for i in range(sh[5] // 24)]
    return []


def _rela(
    buf: Data, sh: Sequence[int], relative: int, symbols: list[int], segs: Sequence[Segment], lo: int, hi: int
) -> list[Reference]:
    out = []
    for i in range(sh[5] // 24):
        at = sh[4] + i * 24
        r_offset, r_info, r_addend = struct.unpack_from("<QQq", buf, at)
        rtype, sym = r_info & 0xFFFFFFFF, r_info >> 32
        if rtype == _NONE:
            continue
        if rtype == relative:
            if lo <= r_addend < hi:
                out.append(Reference(r_addend, file_offset(segs, r_offset), at + 16))
            continue
        value = symbols[sym] if 0 < sym < len(symbols) else 0
        if value and lo <= value + r_addend < hi:
            raise CannotCompact(f"a relocation of type {rtype} through a symbol points into device code")
    return out


def _relr(buf: Data, sh: Sequence[int], segs: Sequence[Segment], lo: int, hi: int) -> list[Reference]:
    """RELR: an even word is an address to relocate; an odd one, a bitmap of the next 63 words."""
    out = []
    where = 0
    for i in range(sh[5] // 8):
        (word,) = struct.unpack_from("<Q", buf, sh[4] + i * 8)
        slots = []
        if word & 1 == 0:
            slots.append(word)
            where = word + 8
        else:
            slots.extend(where + 8 * bit for bit in range(63) if (word >> (bit + 1)) & 1)
            where += 63 * 8
        for addr in slots:
            at = file_offset(segs, addr)
            value = _word(buf, at)
            if value is not None and lo <= value < hi:
                out.append(Reference(value, at, None))
    return out


def references(
    buf: Data, machine: int, segs: Sequence[Segment], shdrs: Sequence[Sequence[int]], lo: int, hi: int
) -> list[Reference]:
    """Every word the loader sets to an address in ``[lo, hi)``."""
    if machine not in _RELATIVE:
        raise CannotCompact(f"ELF machine {machine}: its relocations are not read here")
    symbols = _dynsym_values(buf, shdrs)
    if any(lo < v < hi for v in symbols):
        raise CannotCompact("a dynamic symbol points into device code")
    out: list[Reference] = []
    for sh in shdrs:
        if sh[1] == SHT_RELA and sh[2] & SHF_ALLOC and sh[9] == 24:
            out += _rela(buf, sh, _RELATIVE[machine], symbols, segs, lo, hi)
        elif sh[1] == SHT_RELR and sh[2] & SHF_ALLOC:
            out += _relr(buf, sh, segs, lo, hi)
    return out


def retarget(buf: Data, ref: Reference, new: int) -> None:
    """Make ``ref`` hold ``new``: the RELA addend, and the word in place when it held the old one."""
    if ref.addend is not None:
        struct.pack_into("<q", buf, ref.addend, new)
    if ref.slot is not None and _word(buf, ref.slot) == ref.target:
        struct.pack_into("<Q", buf, ref.slot, new)
