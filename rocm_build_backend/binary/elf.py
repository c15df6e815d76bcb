"""A tiny read-only ELF reader: the header and the section table, nothing else.

Everything here reads untrusted bytes through a *source*: an object with ``size`` (how many
bytes the file claims or has) and ``read(offset, n)`` (at most ``n`` bytes, fewer at the end
of the data, never an exception for an offset past the end). Sources exist for bytes in
memory (``BytesSource``), a slice of an open file (``FileSource``) and, in ``members``, a
zip member inflated on demand. Readers never ask a source for more than they can justify:
every offset, size and count is checked against the data that is really there, and no
buffer is sized by a header field alone.

Bad input raises ``FormatError``; ``need()`` is the one place that turns a short read into
a "truncated" error.
"""

from __future__ import annotations

import struct
from typing import IO, Callable, Iterator, NamedTuple, Protocol

from rocm_build_backend.binary.printable import printable
from rocm_build_backend.errors import FormatError as FormatError  # re-exported for the readers

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
EM_AMDGPU = 224
SHT_NOBITS = 8
SHT_LLVM_OFFLOADING = 0x6FFF4C0B
SHF_COMPRESSED = 0x800
SHN_XINDEX = 0xFFFF

MAX_READ = 64 << 20  # no single read larger than this, whatever a header says
MAX_SECTIONS = 1 << 20  # more section headers than this is not a file we should walk
MAX_STRTAB = 64 << 20
MAX_NAME = 256  # section names longer than this are cut


class Source(Protocol):
    size: int

    def read(self, offset: int, n: int) -> bytes: ...


class BytesSource:
    """Bytes (or anything sliceable like bytes) already in memory."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        self.size = len(self._data)

    def read(self, offset: int, n: int) -> bytes:
        if offset < 0 or n <= 0 or offset >= self.size:
            return b""
        return bytes(self._data[offset : offset + min(n, MAX_READ)])


class FileSource:
    """``length`` bytes of an open binary file starting at ``base`` (a whole file or a
    stored zip member); random access by seek + read."""

    def __init__(self, fh: IO[bytes], base: int = 0, length: int | None = None) -> None:
        self._fh = fh
        self._base = base
        if length is None:
            fh.seek(0, 2)
            length = fh.tell() - base
        self.size = max(0, length)

    def read(self, offset: int, n: int) -> bytes:
        if offset < 0 or n <= 0 or offset >= self.size:
            return b""
        self._fh.seek(self._base + offset)
        return self._fh.read(min(n, self.size - offset, MAX_READ))


class SubSource:
    """A window ``[base, base+length)`` of another source (a section, a container)."""

    def __init__(self, src: Source, base: int, length: int) -> None:
        self._src = src
        self._base = base
        self.size = max(0, length)

    def read(self, offset: int, n: int) -> bytes:
        if offset < 0 or n <= 0 or offset >= self.size:
            return b""
        return self._src.read(self._base + offset, min(n, self.size - offset))

    def magic_offsets(self, start: int, end: int) -> list[int] | None:
        """See ``magic_offsets``: the window's part of what the source below can tell."""
        found = magic_offsets(self._src, self._base + max(0, start), self._base + min(end, self.size))
        return None if found is None else [o - self._base for o in found]


def magic_offsets(src: Source, start: int, end: int) -> list[int] | None:
    """The 8-aligned offsets in ``[start, end)`` of ``src`` where an NVIDIA fatbin magic
    starts, when the source knows them without reading (an inflated zip member remembers them
    from its first pass); None when it does not."""
    finder = getattr(src, "magic_offsets", None)
    if finder is None:
        return None
    found: list[int] | None = finder(start, end)
    return found


def msg(exc: BaseException) -> str:
    """The message of a FormatError without the "error:" prefix its str() adds."""
    return getattr(exc, "message", None) or str(exc)


def need(src: Source, offset: int, n: int, what: str) -> bytes:
    """Exactly ``n`` bytes at ``offset`` or a FormatError saying what was cut short."""
    if offset < 0 or n < 0:
        raise FormatError(f"{what}: bad offset {offset}")
    if n > MAX_READ:
        raise FormatError(f"{what}: {n} bytes is more than this reader will read at once")
    data = src.read(offset, n)
    if len(data) < n:
        raise FormatError(f"truncated: {what} at offset 0x{offset:x} needs {n} bytes, {max(0, len(data))} present")
    return data


class ElfHeader(NamedTuple):  # a NamedTuple: creating the class costs a tenth of a frozen dataclass
    is64: bool
    endian: str  # "<" or ">"
    osabi: int
    abiversion: int
    type: int
    machine: int
    flags: int
    phoff: int
    shoff: int
    shentsize: int
    shnum: int  # as written in the header (0 = extended numbering)
    shstrndx: int

    @property
    def shentsize_min(self) -> int:
        return 64 if self.is64 else 40


def read_header(src: Source) -> ElfHeader:
    ident = need(src, 0, 16, "ELF identification")
    if ident[:4] != ELF_MAGIC:
        raise FormatError("not an ELF file")
    cls, data = ident[4], ident[5]
    if cls not in (1, 2):
        raise FormatError(f"ELF class {cls} is neither 32- nor 64-bit")
    if data not in (1, 2):
        raise FormatError(f"ELF data encoding {data} is neither little- nor big-endian")
    is64 = cls == 2
    e = "<" if data == 1 else ">"
    if is64:
        raw = need(src, 16, 48, "ELF header")
        etype, machine, _ver, _entry, phoff, shoff, flags, _eh, _phes, _phn, shes, shn, shstr = struct.unpack(
            e + "HHIQQQIHHHHHH", raw
        )
    else:
        raw = need(src, 16, 36, "ELF header")
        etype, machine, _ver, _entry, phoff, shoff, flags, _eh, _phes, _phn, shes, shn, shstr = struct.unpack(
            e + "HHIIIIIHHHHHH", raw
        )
    return ElfHeader(is64, e, ident[7], ident[8], etype, machine, flags, phoff, shoff, shes, shn, shstr)


class Section:
    """One section header: the fields the readers use (a plain class: cheap to define)."""

    __slots__ = ("index", "name", "type", "flags", "addr", "offset", "size")

    def __init__(self, index: int, name: str, type: int, flags: int, addr: int, offset: int, size: int) -> None:
        self.index, self.name, self.type, self.flags = index, name, type, flags
        self.addr, self.offset, self.size = addr, offset, size

    def _key(self) -> tuple[int, str, int, int, int, int, int]:
        return (self.index, self.name, self.type, self.flags, self.addr, self.offset, self.size)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Section) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return "Section(index={}, name={!r}, type={}, flags={}, addr={}, offset={}, size={})".format(*self._key())

    @property
    def end(self) -> int:
        return self.offset + (0 if self.type == SHT_NOBITS else self.size)


class SectionTable(NamedTuple):
    sections: list[Section]  # only the ones the caller asked for
    data_end: int  # where the last section's data ends (NOBITS excluded)
    table_end: int  # where the section header table ends


def _unpack_shdr(hdr: ElfHeader, raw: bytes, pos: int) -> tuple[int, int, int, int, int, int, int]:
    """(name, type, flags, addr, offset, size, link) of one section header."""
    if hdr.is64:
        name, typ, flags, addr, off, size, link = struct.unpack_from(hdr.endian + "IIQQQQI", raw, pos)
    else:
        name, typ, flags, addr, off, size, link = struct.unpack_from(hdr.endian + "IIIIIII", raw, pos)
    return name, typ, flags, addr, off, size, link


def _cstr(table: bytes, off: int) -> str:
    """The name at ``off``: up to its NUL, at most ``MAX_NAME`` bytes (a table without a NUL
    is never scanned or copied past that), control characters escaped."""
    if off >= len(table):
        return ""
    end = table.find(b"\0", off, off + MAX_NAME)
    raw = table[off : off + MAX_NAME] if end < 0 else table[off:end]
    return printable(raw.decode("latin-1"))


def read_name_table(src: Source, hdr: ElfHeader) -> tuple[bytes, int]:
    """The section-name table's bytes and the number of sections (extended numbering read from
    section 0): one section header and the table are read, nothing else.

    Raises FormatError when the table is missing, cut short or claims too much.
    """
    if hdr.shoff == 0:
        raise FormatError("the ELF file has no section table")
    if hdr.shentsize < hdr.shentsize_min:
        raise FormatError(f"ELF section header size {hdr.shentsize} is smaller than {hdr.shentsize_min}")
    es = hdr.shentsize
    count, strndx = hdr.shnum, hdr.shstrndx
    if count == 0 or strndx == SHN_XINDEX:  # extended numbering: the real values are in section 0
        first = need(src, hdr.shoff, es, "section header 0")
        _n, _t, _f, _a, _o, size0, link0 = _unpack_shdr(hdr, first, 0)
        if count == 0:
            count = size0
        if strndx == SHN_XINDEX:
            strndx = link0
    if count == 0:
        raise FormatError("the ELF file has no section table")
    if count > MAX_SECTIONS:
        raise FormatError(f"the ELF section table claims {count} sections")
    table_end = hdr.shoff + count * es
    if table_end > src.size:
        raise FormatError(
            f"truncated: the section table (0x{hdr.shoff:x}..0x{table_end:x}) lies past the "
            f"end of the file ({src.size} bytes)"
        )
    strtab = b""
    if strndx < count:
        raw = need(src, hdr.shoff + strndx * es, es, "section name table header")
        _n, styp, _f, _a, soff, ssize, _l = _unpack_shdr(hdr, raw, 0)
        if styp != SHT_NOBITS and ssize:
            if ssize > MAX_STRTAB:
                raise FormatError(f"the section name table claims {ssize} bytes")
            strtab = need(src, soff, ssize, "section name table")
    return strtab, count


def read_sections(src: Source, hdr: ElfHeader, wanted: Callable[[str, int], bool] | None = None) -> SectionTable:
    """The section table. ``wanted(name, type)`` picks the sections to keep (all if None).

    Raises FormatError when the table is missing or cut short (a truncated file keeps its
    program headers but loses the section table, which sits at the end).
    """
    strtab, count = read_name_table(src, hdr)
    es = hdr.shentsize
    table_end = hdr.shoff + count * es
    sections: list[Section] = []
    data_end = 0
    batch = 4096
    for start in range(0, count, batch):
        n = min(batch, count - start)
        raw = need(src, hdr.shoff + start * es, n * es, "section table")
        for i in range(n):
            name_off, typ, flags, addr, off, size, _link = _unpack_shdr(hdr, raw, i * es)
            if typ != SHT_NOBITS and typ != 0:
                data_end = max(data_end, off + size)
            name = _cstr(strtab, name_off)
            if wanted is None or wanted(name, typ):
                sections.append(Section(start + i, name, typ, flags, addr, off, size))
    return SectionTable(sections, data_end, table_end)


def iter_chunks(src: Source, start: int, end: int, chunk: int = 1 << 20) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) pieces of ``[start, end)``; stops early at the end of the data."""
    pos = start
    while pos < end:
        data = src.read(pos, min(chunk, end - pos))
        if not data:
            return
        yield pos, data
        pos += len(data)
