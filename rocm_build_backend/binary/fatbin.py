"""NVIDIA fatbin containers (``.nv_fatbin``, ``__nv_relfatbin``, ``.fatbin`` files).

A fatbin entry header names its architecture, its kind (PTX or ELF) and the ``a``/``f``
flags, so targets are read without decompressing anything. Only small ELF entries are
looked into, to tell an nvcc device-link stub (a cubin without any ``.text.*`` section)
from real code, and only when the answer can change what covers every kernel: a container
with a PTX entry holds kernels (the device-link step writes no PTX), and one with the same
targets as another container of its section that holds kernels changes nothing either way.
A stub check that needs a zstd decoder this Python lacks leaves the container unread
(``read`` False: "cannot tell"), never counted as code that narrows the answer. Layouts: NVIDIA's ``fatbinary.h`` / ``fatbinary_section.h`` for the outer
header, community readers for the entry header, all checked against nvcc 13 output (see
the research notes on binary formats). Raw cubins are read in ``cubin``.
"""

from __future__ import annotations

import struct

from rocm_build_backend.binary import magic
from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.container import Container, add_note
from rocm_build_backend.binary.decompression import ZstdUnavailable, inflate_prefix, lz4_block
from rocm_build_backend.binary.elf import BytesSource, FormatError, Source, SubSource, need
from rocm_build_backend.binary.walk import walk

FATBIN_MAGIC = magic.FATBIN
KIND_PTX, KIND_ELF = 1, 2
FLAG_LZ4, FLAG_ZSTD = 0x2000, 0x8000
FLAG_ARCH_SPECIFIC, FLAG_FAMILY = 0x100000, 0x200000
STUB_CHECK_MAX = 64 << 10  # a device-link stub is a few KB; larger cubins are taken to hold code
STUB_CHECK_ENTRIES = 8  # a container with more ELF entries than this is taken to hold code
STUB_NOTE = "device-link stub without kernels"
STUB_ZSTD_NOTE = (
    "its cubins are compressed with zstd and no zstd decoder is installed: install "
    "backports.zstd (a dependency of rocm-build-backend before Python 3.14) to tell "
    "whether it holds kernels or is a device-link stub"
)
Pending = list[tuple[int, int, int, int]]  # ELF entries to look into: (start, size, flags, csize)
Deferred = list[tuple[Container, Pending]]


def _suffix(flags: int) -> str:
    if flags & FLAG_ARCH_SPECIFIC:
        return "a"
    if flags & FLAG_FAMILY:
        return "f"
    return ""


def read_fatbin(
    src: Source, offset: int, limit: int, where: str, cut: bool = False, defer: Deferred | None = None
) -> tuple[Container, int | None]:
    """One fatbin container: the 16-byte header, then entries back to back.

    Whether a container without PTX holds kernels is decided here, or, given ``defer``, left
    to the caller (appended there with the entries to look into; see ``settle``)."""
    head = need(src, offset, 16, "fatbin header")
    magic, version, hsize, fat_size = struct.unpack("<4sHHQ", head)
    if magic != FATBIN_MAGIC:
        raise FormatError("not a fatbin")
    if hsize < 16 or offset + hsize > limit:  # a u16: bounded by the data, not by a constant
        raise FormatError(f"fatbin at 0x{offset:x} has a header size of {hsize}")
    c = Container("fatbin", where, offset)
    if version != 1:
        c.note = f"fatbin version {version}"
    body = offset + hsize
    end = body + fat_size
    if end > limit:
        what = "truncated: " if cut else ""
        c.problems.append(
            f"{what}fatbin at 0x{offset:x} claims {fat_size} bytes of entries, {max(0, limit - body)} present"
        )
        end = limit
    if fat_size == 0:
        # nvcc's device-link step writes an empty container when there is no SASS to link
        # (a PTX-only build): valid, and without kernels
        c.kernels = False
        c.note = (c.note + "; " if c.note else "") + "empty (device-link output without code)"
        return c, end
    kernels, pending = _read_entries(src, c, body, end, limit, cut)
    if not c.targets and not c.problems:
        c.problems.append(f"fatbin at 0x{offset:x} holds no entries")
    if c.targets and not kernels and pending:
        if defer is None:
            _look_into(src, c, pending)
        else:
            defer.append((c, pending))
    return c, end


def _entry_target(c: Container, kind: int, arch: int, flags: int) -> str:
    if kind == KIND_PTX:
        return f"compute_{arch}{_suffix(flags)}"
    if kind == KIND_ELF:
        return f"sm_{arch}{_suffix(flags)}"
    c.note = (c.note + "; " if c.note else "") + f"entry of kind {kind} for {arch}"
    return ""


def _read_entries(src: Source, c: Container, pos: int, end: int, limit: int, cut: bool) -> tuple[bool, Pending]:
    """Read the entries of ``[pos, end)`` into ``c``: (kernels known to be there, the small
    ELF entries to look into otherwise). Nothing is decompressed here."""
    kernels = False
    pending: Pending = []
    while pos + 64 <= end:
        eh = src.read(pos, 64)
        if len(eh) < 64:
            c.problems.append(f"truncated: fatbin entry header at 0x{pos:x} is cut short")
            break
        kind, _ver, ehsize, psize, csize, _opt, _minor, _major, arch, _no, _nl, flags, _z, _dsize = struct.unpack(
            "<HHIQIIHHIIIQQQ", eh
        )
        if kind == 0 and ehsize == 0 and psize == 0 and not any(eh):
            break  # zero padding at the end of the container
        if ehsize < 64 or pos + ehsize > end:
            # bounded by the container only: nvlink's header lists every linked object's name
            # when the link carries line info (``-lineinfo``, ``-G``): over 4 KiB for ~70 objects
            what = "truncated: " if ehsize >= 64 and cut else ""
            c.problems.append(
                f"{what}fatbin entry at 0x{pos:x} has a header size of {ehsize}"
                + (f", past the container's end at 0x{end:x}" if ehsize >= 64 else "")
            )
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
            kernels = True  # the device-link step writes cubins only
        elif kind == KIND_ELF and not kernels:
            # a stub has one cubin (a few): past a few entries, or a large one, it is code
            stored = csize if (flags & (FLAG_LZ4 | FLAG_ZSTD)) and csize else psize
            if len(pending) >= STUB_CHECK_ENTRIES or stored > STUB_CHECK_MAX or psize == 0:
                kernels = True
            else:
                pending.append((pos + ehsize, psize, flags, csize))
        pos = nxt
    return kernels, pending


def _look_into(src: Source, c: Container, pending: Pending) -> bool:
    """Decide whether ``c`` holds kernels from its small cubins; True when it does."""
    unknown = False
    for start, size, flags, csize in pending:
        found = _cubin_has_kernels(src, start, size, flags, csize)
        if found:
            return True
        unknown = unknown or found is None
    if unknown:  # neither kernels nor a stub can be told: the container is not counted
        c.read = False
        add_note(c, STUB_ZSTD_NOTE)
    else:
        c.kernels = False
        add_note(c, STUB_NOTE)
    return False


def settle(src: Source, found: list[Container], deferred: Deferred) -> None:
    """Look into the deferred containers of one section whose answer can matter.

    A container whose target set equals that of a container known to hold kernels is not
    looked into and stays counted: as one more unit with the same targets it changes no
    answer (``complete``, and which devices every unit covers), stub or not.
    """
    waiting = {id(c) for c, _ in deferred}
    known = {frozenset(c.targets) for c in found if id(c) not in waiting and c.kernels and c.read}
    for c, pending in deferred:
        targets = frozenset(c.targets)
        if targets in known:
            continue
        if _look_into(src, c, pending):
            known.add(targets)


def _cubin_has_kernels(src: Source, start: int, size: int, flags: int, csize: int) -> bool | None:
    """False only when a small cubin can be read and has no ``.text.*`` section; None when
    it is zstd-compressed and no zstd decoder is installed."""
    stored = csize if (flags & (FLAG_LZ4 | FLAG_ZSTD)) and csize else size
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
    except ZstdUnavailable:
        return None
    except FormatError:
        return True
    return bool(table.sections)


def walk_fatbins(src: Source, where: str, *, cut: bool = False) -> tuple[list[Container], list[str]]:
    """Every fatbin container of a section or file, back to back."""
    deferred: Deferred = []

    def reader(s: Source, pos: int, end: int, w: str, c: bool) -> tuple[Container, int | None]:
        return read_fatbin(s, pos, end, w, c, deferred)

    found, problems = walk(src, where, {FATBIN_MAGIC: reader}, cut=cut, what="fatbin")
    settle(src, found, deferred)
    return found, problems
