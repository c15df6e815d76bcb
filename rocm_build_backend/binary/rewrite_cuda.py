"""Thinning plans for NVIDIA fatbin containers (``.nv_fatbin``, ``__nv_relfatbin``,
standalone ``.fatbin`` files).

A container keeps its place and its 16-byte header; the kept entries (SASS and PTX, each
with its own entry header, compressed or not) are copied as they are to the front of the
container's body, the header's size field is set to their total, and the bytes freed are
zero-filled. Entries move only by multiples of 8 bytes, so every payload keeps its
alignment; a container whose entries would move otherwise is kept whole (``CannotThin``).
The registration records in ``.nvFatBinSegment`` point at the container's start, which
does not move. A container that keeps no entry is left empty (size 0): on the target it
loads nothing, exactly as the full one did.

Nothing here writes or prints; a damaged container raises ``FormatError``.
"""

from __future__ import annotations

import struct

from rocm_build_backend.binary import fatbin
from rocm_build_backend.binary.elf import Source
from rocm_build_backend.errors import FormatError
from rocm_build_backend.binary.rewrite_plan import CannotThin, Plan, Selector

ALIGN = 8


def _entry_target(kind: int, arch: int, flags: int) -> str:
    suffix = "a" if flags & fatbin.FLAG_ARCH_SPECIFIC else "f" if flags & fatbin.FLAG_FAMILY else ""
    if kind == fatbin.KIND_PTX:
        return f"compute_{arch}{suffix}"
    if kind == fatbin.KIND_ELF:
        return f"sm_{arch}{suffix}"
    raise CannotThin(f"a fatbin entry of kind {kind} (for {arch}), which this tool cannot judge")


def read_entries(src: Source, offset: int, limit: int) -> tuple[int, int, list[tuple[int, int, str]]]:
    """(header size, body size, [(entry offset, entry length, target)]); strict."""
    c, end = fatbin.read_fatbin(src, offset, limit, "fatbin")
    if c.problems:
        raise FormatError(f"damaged fatbin at 0x{offset:x}: {c.problems[0]}")
    _magic, _version, hsize, fat_size = struct.unpack("<4sHHQ", src.read(offset, 16))
    pos, body_end = offset + hsize, offset + hsize + fat_size
    entries = []
    while pos + 64 <= body_end:
        eh = src.read(pos, 64)
        kind, _v, ehsize, psize, _c, _o, _mi, _ma, arch, _n, _l, flags, _z, _d = struct.unpack("<HHIQIIHHIIIQQQ", eh)
        if kind == 0 and ehsize == 0 and psize == 0 and not any(eh):
            break  # zero padding (read_fatbin stops here too)
        entries.append((pos, ehsize + psize, _entry_target(kind, arch, flags)))
        pos += ehsize + psize
    return hsize, fat_size, entries


def plan_fatbin(src: Source, offset: int, limit: int, sel: Selector) -> tuple[Plan, int, int]:
    """(plan, old end, new end) for the fatbin container at ``offset``."""
    hsize, fat_size, entries = read_entries(src, offset, limit)
    plan = Plan()
    kept = []
    for pos, length, target in entries:
        if sel.keeps(target):
            kept.append((pos, length))
            plan.kept.append(target)
        else:
            plan.dropped.append(target)
    body = offset + hsize
    old_end = body + fat_size
    if not plan.dropped:
        return plan, old_end, old_end
    out = body
    for pos, length in kept:
        if (pos - out) % ALIGN:
            raise CannotThin(
                f"fatbin at 0x{offset:x}: an entry would move by {pos - out} bytes, not a multiple of {ALIGN}"
            )
        if pos != out:
            data = src.read(pos, length)
            if len(data) != length:  # larger than one read: never write a cut-short entry
                raise CannotThin(f"fatbin at 0x{offset:x}: an entry of {length} bytes is too large to move")
            plan.writes.append((out, data))
        out += length
    plan.writes.append((offset + 8, struct.pack("<Q", out - body)))
    plan.zeros.append((out, old_end))
    return plan, old_end, out
