"""NVIDIA device code: fatbin containers (``.nv_fatbin``, ``__nv_relfatbin``, ``.fatbin``
files) and cubins.

A fatbin entry header names its architecture, its kind (PTX or ELF) and the ``a``/``f``
flags, so targets are read without decompressing anything. Only small ELF entries are
looked into, to tell an nvcc device-link stub (a cubin without any ``.text.*`` section)
from real code. Layouts: NVIDIA's ``fatbinary.h`` / ``fatbinary_section.h`` for the outer
header, community readers for the entry header, all checked against nvcc 13 output (see
the research notes on binary formats).
"""

from __future__ import annotations

import struct

from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.elf import BytesSource, FormatError, Source, SubSource, need
from rocm_build_backend.binary.offload import Container, ZstdUnavailable, inflate_prefix

FATBIN_MAGIC = b"\x50\xed\x55\xba"
KIND_PTX, KIND_ELF = 1, 2
FLAG_LZ4, FLAG_ZSTD = 0x2000, 0x8000
FLAG_ARCH_SPECIFIC, FLAG_FAMILY = 0x100000, 0x200000
STUB_CHECK_MAX = 64 << 10  # a device-link stub is a few KB; larger cubins are taken to hold code
ELFOSABI_CUDA = 51


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
    pos = body
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
        if kind == KIND_PTX:
            target = f"compute_{arch}{_suffix(flags)}"
        elif kind == KIND_ELF:
            target = f"sm_{arch}{_suffix(flags)}"
        else:
            target = ""
            c.note = (c.note + "; " if c.note else "") + f"entry of kind {kind} for {arch}"
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
            if _cubin_has_kernels(src, pos + ehsize, psize, flags, csize):
                kernels = True
        pos = nxt
    if not c.targets and not c.problems:
        c.problems.append(f"fatbin at 0x{offset:x} holds no entries")
    if c.targets and not kernels and elf_entries:
        c.kernels = False
        c.note = (c.note + "; " if c.note else "") + "device-link stub without kernels"
    return c, end


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
        else:
            for k in range(mlen):
                out.append(out[startpos + k])
    return bytes(out)


def walk_fatbins(src: Source, where: str, *, cut: bool = False):
    from rocm_build_backend.binary.offload import walk

    return walk(src, where, {FATBIN_MAGIC: read_fatbin}, cut=cut, what="fatbin")


def cubin_container(src: Source, hdr: _elf.ElfHeader, where: str = "file") -> Container:
    """A raw cubin: the SM from ``e_flags`` (layout chosen by EI_ABIVERSION, never by the
    value); ``a`` from the flags or, for CUDA 13 cubins, from ``.nv.compat`` attribute 9."""
    flags = hdr.flags
    c = Container("cubin", where, 0)
    if hdr.abiversion < 8:  # "V1": CUDA <= 12.x for sm_90 and older
        sm = flags & 0xFF
        a = bool(flags & 0x800)
    else:
        sm = (flags >> 8) & 0xFF
        a = bool(flags & 0x8)
    if not a:
        try:
            a = _compat_arch_specific(src, hdr)
        except FormatError:
            pass  # a truncated cubin: the header alone still names the SM
    c.targets.append(f"sm_{sm}{'a' if a else ''}")
    c.note = f"cubin (ELF ABI version {hdr.abiversion})"
    return c


def _compat_arch_specific(src: Source, hdr: _elf.ElfHeader) -> bool:
    table = _elf.read_sections(src, hdr, lambda name, typ: name == ".nv.compat")
    for sec in table.sections:
        data = need(src, sec.offset, min(sec.size, 4096), ".nv.compat")
        i = 0
        while i + 2 <= len(data):
            fmt, attr = data[i], data[i + 1]
            if fmt == 1:
                step = 2
            elif fmt in (2, 3):
                if i + 4 > len(data):
                    break
                if attr == 0x09 and fmt == 2 and data[i + 2] == 1:
                    return True
                step = 4
            elif fmt == 4:
                if i + 4 > len(data):
                    break
                step = 4 + int.from_bytes(data[i + 2 : i + 4], "little")
            else:
                break
            i += step
    return False
