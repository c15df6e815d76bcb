"""An ELF file's layout in the file, and cutting the unused tail of sections out of it.

Thinning leaves zeros where dropped device code was; ``shrink_sections`` removes such a zero
tail of a section from the file without changing any address, so a program or library maps
exactly the same memory as before (the removed bytes were zeros, and read as zeros):

- a tail no program header covers (an object file; a section nothing loads) is cut, and
  everything after it in the file moves down, by a multiple of the largest alignment that
  follows, so every later section and segment keeps its alignment;
- a tail inside a ``PT_LOAD`` segment splits that segment in two: the first part keeps its
  bytes in the file up to the end of the kept data (rounded up to a page) and is extended in
  memory only (``p_memsz`` > ``p_filesz``: the loader maps zeros there, as for ``.bss``); the
  second part starts where the cut ends, at its old address, at a file offset that moved by a
  multiple of the segment's alignment. The program header table, one entry longer, is written
  into the kept page after the data (so it stays inside a loaded segment, ``PT_PHDR`` too).

Nothing else in the file refers to file offsets, so symbols, relocations, dynamic entries,
unwind tables and debug information stay valid as they are. A layout this module cannot cut
safely (a cut that other segments or sections overlap, non-zero bytes, a 32-bit or big-endian
file) raises ``CannotCompact``; the caller then keeps the file as it was. It neither reads
wheels nor prints.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.elf import BytesSource

if TYPE_CHECKING:
    import mmap

Data = Union[bytes, bytearray, memoryview, "mmap.mmap"]  # a file's bytes (an mmap for large files)

PT_LOAD, PT_INTERP, PT_PHDR = 1, 3, 6
ET_DYN = 3
PAGE = 4096  # the cut keeps file and memory page-aligned (larger segment alignments are kept too)
MIN_CUT = PAGE  # a cut removes whole pages (and whole segment alignments) or nothing
_PHDR = struct.Struct("<IIQQQQQQ")
_SHDR = struct.Struct("<IIQQQQIIQQ")


class CannotCompact(Exception):
    """The file keeps its layout (zeros in place); the message says why."""


@dataclass
class Segment:
    type: int
    flags: int
    offset: int
    vaddr: int
    paddr: int
    filesz: int
    memsz: int
    align: int

    def pack(self) -> bytes:
        return _PHDR.pack(
            self.type, self.flags, self.offset, self.vaddr, self.paddr, self.filesz, self.memsz, self.align
        )


@dataclass
class _Shdr:
    raw: list[int]  # name, type, flags, addr, offset, size, link, info, addralign, entsize

    @property
    def offset(self) -> int:
        return self.raw[4]

    @property
    def size(self) -> int:
        return self.raw[5]

    @property
    def end(self) -> int:
        return self.raw[4] + (0 if self.raw[1] in (0, _elf.SHT_NOBITS) else self.raw[5])


@dataclass
class _Cut:
    """Remove ``[start, stop)`` of the file; ``load`` is the index of the segment it splits."""

    section: int
    new_size: int
    start: int
    stop: int
    load: int | None


def segments(buf: Data, hdr: _elf.ElfHeader) -> list[Segment]:
    """The program headers of a 64-bit little-endian ELF file."""
    count = struct.unpack_from("<H", buf, 56)[0]
    esize = struct.unpack_from("<H", buf, 54)[0]
    if count and esize != _PHDR.size:
        raise CannotCompact(f"program headers of {esize} bytes")
    if hdr.phoff + count * _PHDR.size > len(buf):
        raise CannotCompact("the program headers lie past the end of the file")
    return [Segment(*_PHDR.unpack_from(buf, hdr.phoff + i * _PHDR.size)) for i in range(count)]


def section_headers(buf: Data, hdr: _elf.ElfHeader) -> list[list[int]]:
    """Every section header as its ten fields (name, type, flags, addr, offset, size, link,
    info, addralign, entsize)."""
    return [s.raw for s in _sections(buf, hdr)]


def _sections(buf: Data, hdr: _elf.ElfHeader) -> list[_Shdr]:
    count = struct.unpack_from("<H", buf, 60)[0]
    if hdr.shentsize != _SHDR.size or count == 0 or hdr.shstrndx == _elf.SHN_XINDEX:
        raise CannotCompact("an unusual section header table")
    if hdr.shoff + count * _SHDR.size > len(buf):
        raise CannotCompact("the section header table lies past the end of the file")
    return [_Shdr(list(_SHDR.unpack_from(buf, hdr.shoff + i * _SHDR.size))) for i in range(count)]


def _is_zero(buf: Data, start: int, stop: int) -> bool:
    view = memoryview(buf)[start:stop]
    step = 1 << 20
    zeros = bytes(min(step, len(view)))
    return all(view[i : i + step] == zeros[: len(view[i : i + step])] for i in range(0, len(view), step))


def _plan(
    buf: Data,
    hdr: _elf.ElfHeader,
    segs: list[Segment],
    shdrs: list[_Shdr],
    index: int,
    new_size: int,
    table_room: int,
    dry_run: bool,
) -> _Cut | None:
    """Where to cut the tail of section ``index`` after ``new_size`` bytes; None when the tail
    is too short to be worth it. ``table_room``: bytes to keep after the data for the program
    header table (this cut hosts it)."""
    sec = shdrs[index]
    a, b = sec.offset + new_size, sec.end
    if not 0 <= new_size <= sec.size or sec.raw[1] == _elf.SHT_NOBITS:
        raise CannotCompact("a section size out of range")
    if not dry_run and not _is_zero(buf, a, b):
        raise CannotCompact(f"section {index} is not zero after {new_size} bytes")
    for i, other in enumerate(shdrs):
        if i != index and other.end > other.offset and other.offset < b and other.end > a:
            raise CannotCompact(f"section {i} lies inside the part to remove")
    covering = [i for i, s in enumerate(segs) if s.filesz and s.offset < b and s.offset + s.filesz > a]
    if covering and (hdr.type != ET_DYN or any(s.type == PT_INTERP for s in segs)):
        raise CannotCompact("a loaded section of a program (only shared libraries are split)")
    later = [s for s in segs if s.filesz and s.offset >= b]
    align = max([8] + [s.raw[8] for s in shdrs if s.offset >= b and s.raw[8]] + [s.align for s in later])
    if not covering:
        if hdr.phoff >= a and hdr.phoff < b:
            raise CannotCompact("the program header table lies in the part to remove")
        shift = (b - a) // align * align
        return _Cut(index, new_size, a, a + shift, None) if shift >= MIN_CUT else None
    if len(covering) > 1 or segs[covering[0]].type != PT_LOAD:
        raise CannotCompact("more than one program header covers the part to remove")
    load = segs[covering[0]]
    if load.offset + load.filesz < b:
        raise CannotCompact("the part to remove reaches past its segment")
    align = max(align, load.align, PAGE)
    keep = -(-(a + table_room) // PAGE) * PAGE
    shift = (b - keep) // align * align if b > keep else 0
    return _Cut(index, new_size, keep, keep + shift, covering[0]) if shift >= MIN_CUT else None


def _moved(offset: int, cuts: list[_Cut]) -> int:
    """Where an offset lands once the cuts are made (one inside a cut: where the cut was)."""
    return offset - sum(min(c.stop, offset) - c.start for c in cuts if c.start < offset)


def _split(segs: list[Segment], cuts: list[_Cut]) -> list[Segment]:
    """The program headers after the cuts: each cut segment in two, the rest moved."""
    out: list[Segment] = []
    for i, s in enumerate(segs):
        mine = sorted((c for c in cuts if c.load == i), key=lambda c: c.start)
        if not mine:
            moved = _moved(s.offset, cuts) if s.filesz or s.offset else s.offset
            out.append(Segment(s.type, s.flags, moved, s.vaddr, s.paddr, s.filesz, s.memsz, s.align))
            continue
        start, vstart = s.offset, s.vaddr
        for c in mine:
            out.append(
                Segment(
                    s.type,
                    s.flags,
                    _moved(start, cuts),
                    vstart,
                    s.paddr + (vstart - s.vaddr),
                    c.start - start,
                    c.stop - start,
                    s.align,
                )
            )
            vstart += c.stop - start
            start = c.stop
        end = s.offset + s.filesz
        out.append(
            Segment(
                s.type,
                s.flags,
                _moved(start, cuts),
                vstart,
                s.paddr + (vstart - s.vaddr),
                end - start,
                s.memsz - (vstart - s.vaddr),
                s.align,
            )
        )
    return out


def _place_table(segs: list[Segment], cuts: list[_Cut], host: _Cut, shdrs: list[_Shdr]) -> tuple[int, int]:
    """(file offset, address) of the new program header table: right after the kept data of
    the cut that hosts it, 8-aligned, in its segment's file part."""
    sec = shdrs[host.section]
    at = -(-(sec.offset + host.new_size) // 8) * 8
    assert host.load is not None
    load = segs[host.load]
    return _moved(at, cuts), load.vaddr + (at - load.offset)


def shrink_sections(buf: Data, sizes: dict[int, int]) -> bytearray | None:
    """A copy of the ELF file ``buf`` with each section ``index`` in ``sizes`` cut to that many
    bytes in the file (its zero tail removed, addresses unchanged); None when no cut is worth
    making. Raises CannotCompact when the layout does not allow it."""
    hdr, segs, shdrs, cuts = _cuts(buf, sizes, dry_run=False)
    return _write(buf, hdr, segs, shdrs, cuts) if cuts else None


def can_shrink(buf: Data, sizes: dict[int, int]) -> bool:
    """Whether ``shrink_sections`` would cut something once those tails are zero (they need
    not be yet). Raises CannotCompact as it would."""
    return bool(_cuts(buf, sizes, dry_run=True)[3])


def _cuts(
    buf: Data, sizes: dict[int, int], *, dry_run: bool
) -> tuple[_elf.ElfHeader, list[Segment], list[_Shdr], list[_Cut]]:
    src = BytesSource(memoryview(buf))
    hdr = _elf.read_header(src)
    if not hdr.is64 or hdr.endian != "<":
        raise CannotCompact("not a 64-bit little-endian ELF file")
    segs = segments(buf, hdr)
    shdrs = _sections(buf, hdr)
    loaded = sorted(
        (
            i
            for i, n in sizes.items()
            if any(s.filesz and s.offset < shdrs[i].end and s.offset + s.filesz > shdrs[i].offset + n for s in segs)
        ),
        key=lambda i: shdrs[i].offset,
    )
    room = (len(segs) + len(loaded)) * _PHDR.size + 8
    cuts: list[_Cut] = []
    for index, new_size in sorted(sizes.items(), key=lambda kv: shdrs[kv[0]].offset):
        hosting = bool(loaded) and index == loaded[0]
        cut = _plan(buf, hdr, segs, shdrs, index, new_size, room if hosting else 0, dry_run)
        if cut is not None:
            cuts.append(cut)
        elif hosting:
            loaded.pop(0)  # the next loaded cut hosts the table
            room = (len(segs) + len(loaded)) * _PHDR.size + 8
    if any(c.start < hdr.shoff < c.stop for c in cuts) or any(c.start <= hdr.phoff < c.stop for c in cuts):
        raise CannotCompact("a header table lies in the part to remove")
    return hdr, segs, shdrs, cuts


def _write(buf: Data, hdr: _elf.ElfHeader, segs: list[Segment], shdrs: list[_Shdr], cuts: list[_Cut]) -> bytearray:
    cuts.sort(key=lambda c: c.start)
    out = bytearray()
    pos = 0
    view = memoryview(buf)
    for c in cuts:
        out += view[pos : c.start]
        pos = c.stop
    out += view[pos:]
    new_segs = _split(segs, cuts)
    phoff = hdr.phoff
    splits = [c for c in cuts if c.load is not None]
    if splits:
        phoff, phaddr = _place_table(segs, cuts, splits[0], shdrs)
        size = len(new_segs) * _PHDR.size
        for s in new_segs:
            if s.type == PT_PHDR:
                s.offset, s.vaddr, s.paddr, s.filesz, s.memsz = phoff, phaddr, phaddr, size, size
        if not _is_zero(out, phoff, phoff + size):
            raise CannotCompact("no room for the program header table")
        out[phoff : phoff + size] = b"".join(s.pack() for s in new_segs)
    else:
        out[phoff : phoff + len(new_segs) * _PHDR.size] = b"".join(s.pack() for s in new_segs)
    sizes = {c.section: c.new_size for c in cuts}
    for i, sh in enumerate(shdrs):
        raw = list(sh.raw)
        if i in sizes:
            raw[5] = sizes[i]
        if raw[1] != 0 and (raw[4] or i):
            raw[4] = _moved(raw[4], cuts)
        struct.pack_into("<IIQQQQIIQQ", out, _moved(hdr.shoff, cuts) + i * _SHDR.size, *raw)
    struct.pack_into("<QQ", out, 32, phoff, _moved(hdr.shoff, cuts))
    struct.pack_into("<H", out, 56, len(new_segs))
    return out
