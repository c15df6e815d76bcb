"""NVIDIA fatbin containers (``.nv_fatbin``, ``__nv_relfatbin``, ``.fatbin`` files).

A fatbin entry header names its architecture, its kind (PTX or ELF) and the ``a``/``f``
flags, so targets are read without decompressing anything. Only small ELF entries are
looked into, to tell an nvcc device-link stub (a cubin without any ``.text.*`` section)
from real code. Layouts: NVIDIA's ``fatbinary.h`` / ``fatbinary_section.h`` for the outer
header, community readers for the entry header, all checked against nvcc 13 output (see
the research notes on binary formats). Raw cubins are read in ``cubin``.
"""

from __future__ import annotations

import struct

from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.decompression import ZstdUnavailable, inflate_prefix, lz4_block
from rocm_build_backend.binary.container import Container
from rocm_build_backend.binary.elf import BytesSource, FormatError, Source, SubSource, need

FATBIN_MAGIC = b"\x50\xed\x55\xba"
KIND_PTX, KIND_ELF = 1, 2
FLAG_LZ4, FLAG_ZSTD = 0x2000, 0x8000
FLAG_ARCH_SPECIFIC, FLAG_FAMILY = 0x100000, 0x200000
STUB_CHECK_MAX = 64 << 10  # a device-link stub is a few KB; larger cubins are taken to hold code
STUB_CHECK_ENTRIES = 8  # a container with more ELF entries than this is taken to hold code


def _suffix(flags: int) -> str:
    if flags & FLAG_ARCH_SPECIFIC:
        return "a"
    if flags & FLAG_FAMILY:
        return "f"
    return ""


def read_fatbin(src: Source, offset: int, limit: int, where: str, cut: bool = False) -> tuple[Container, int | None]:
    """One fatbin container: the 16-byte header, then entries back to back."""
    head = need(src, offset, 16, "fatbin header")
    magic, version, hsize, fat_size = struct.unpack("<4sHHQ", head)
    if magic != FATBIN_MAGIC:
        raise FormatError("not a fatbin")
    if hsize < 16 or hsize > 4096:
        raise FormatError(f"fatbin at 0x{offset:x} has a header size of {hsize}")
    c = Container("fatbin", where, offset)
    if version != 1:
        c.note = f"fatbin version {version}"
    body = offset + hsize
    end = body + fat_size
    if end > limit:
        what = "truncated: " if cut else ""
        c.problems.append(
            f"{what}fatbin at 0x{offset:x} claims {fat_size} bytes of entries, "
            f"{max(0, limit - body)} present"
        )
        end = limit
    if fat_size == 0:
        # nvcc's device-link step writes an empty container when there is no SASS to link
        # (a PTX-only build): valid, and without kernels
        c.kernels = False
        c.note = (c.note + "; " if c.note else "") + "empty (device-link output without code)"
        return c, end
    kernels, elf_entries = _read_entries(src, c, body, end, limit, cut)
    if not c.targets and not c.problems:
        c.problems.append(f"fatbin at 0x{offset:x} holds no entries")
    if c.targets and not kernels and elf_entries:
        c.kernels = False
        c.note = (c.note + "; " if c.note else "") + "device-link stub without kernels"
    return c, end


def _entry_target(c: Container, kind: int, arch: int, flags: int) -> str:
    if kind == KIND_PTX:
        return f"compute_{arch}{_suffix(flags)}"
    if kind == KIND_ELF:
        return f"sm_{arch}{_suffix(flags)}"
    c.note = (c.note + "; " if c.note else "") + f"entry of kind {kind} for {arch}"
    return ""


def _read_entries(src: Source, c: Container, pos: int, end: int, limit: int, cut: bool) -> tuple[bool, int]:
    """Read the entries of ``[pos, end)`` into ``c``; (any kernels seen, ELF entries seen)."""
    kernels = False
    elf_entries = 0
    while pos + 64 <= end:
        eh = src.read(pos, 64)
        if len(eh) < 64:
            c.problems.append(f"truncated: fatbin entry header at 0x{pos:x} is cut short")
            break
        kind, _ver, ehsize, psize, csize, _opt, _minor, _major, arch, _no, _nl, flags, _z, _dsize = (
            struct.unpack("<HHIQIIHHIIIQQQ", eh)
        )
        if kind == 0 and ehsize == 0 and psize == 0 and not any(eh):
            break  # zero padding at the end of the container
        if ehsize < 64 or ehsize > 4096:
            c.problems.append(f"fatbin entry at 0x{pos:x} has a header size of {ehsize}")
            break
        if arch == 0 or arch > 10000:
            c.problems.append(f"fatbin entry at 0x{pos:x} names architecture {arch}")
            break
        nxt = pos + ehsize + psize
        target = _entry_target(c, kind, arch, flags)
        if target:
            c.targets.append(target)
        if nxt > end:
            what = "truncated: " if cut or nxt <= limit else ""
            c.problems.append(f"{what}fatbin entry for {target or arch} at 0x{pos:x} runs past the container")
            break
        if kind == KIND_PTX:
            kernels = True
        elif kind == KIND_ELF:
            elf_entries += 1
            # a stub has one cubin (a few): once code is seen, or past a few entries, stop looking
            if not kernels and (elf_entries > STUB_CHECK_ENTRIES
                                or _cubin_has_kernels(src, pos + ehsize, psize, flags, csize)):
                kernels = True
        pos = nxt
    return kernels, elf_entries


def _cubin_has_kernels(src: Source, start: int, size: int, flags: int, csize: int) -> bool:
    """False only when a small cubin can be read and has no ``.text.*`` section."""
    stored = csize if (flags & (FLAG_LZ4 | FLAG_ZSTD)) and csize else size
    if stored > STUB_CHECK_MAX or size == 0:
        return True
    try:
        if flags & FLAG_ZSTD:
            data = inflate_prefix(1, src, start, start + stored, 4 * STUB_CHECK_MAX)
            cubin: Source = BytesSource(data)
        elif flags & FLAG_LZ4:
            cubin = BytesSource(lz4_block(need(src, start, stored, "cubin"), 4 * STUB_CHECK_MAX))
        else:
            cubin = SubSource(src, start, size)
        hdr = _elf.read_header(cubin)
        table = _elf.read_sections(cubin, hdr, lambda name, typ: name.startswith(".text."))
    except (FormatError, ZstdUnavailable):
        return True
    return bool(table.sections)


def walk_fatbins(src: Source, where: str, *, cut: bool = False) -> tuple[list[Container], list[str]]:
    """Every fatbin container of a section or file, back to back."""
    from rocm_build_backend.binary.walk import walk

    return walk(src, where, {FATBIN_MAGIC: read_fatbin}, cut=cut, what="fatbin")
