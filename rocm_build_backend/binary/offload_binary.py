"""LLVM OffloadBinary blobs (``.llvm.offloading``, ``llvm/Object/OffloadBinary.h`` v1-v3).

Reads the entries' string tables for ``triple`` and ``arch``; it does not look into the
images themselves.
"""

from __future__ import annotations

import struct

from rocm_build_backend.binary import magic
from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.amdgpu import canonical_target
from rocm_build_backend.binary.decompression import ZSTD_MAGIC, ZSTD_NOTE, ZstdUnavailable, inflate_prefix
from rocm_build_backend.binary.container import Container, add_note
from rocm_build_backend.binary.elf import BytesSource, FormatError, Source, need
from rocm_build_backend.binary.printable import printable

OFFLOAD_MAGIC = magic.OFFLOAD
_IMAGE_KINDS = {1: "object", 2: "LLVM bitcode", 3: "cubin", 4: "fatbinary", 5: "PTX", 6: "SPIR-V"}


MAX_STRING = 256  # a triple or an arch name is short; longer strings are cut


def read_offload_binary(src: Source, offset: int, limit: int, where: str) -> tuple[Container, int | None]:
    """One OffloadBinary blob (``llvm/Object/OffloadBinary.h``, versions 1-3).

    Only the ``triple`` and ``arch`` strings are read. Entries may share string tables, so
    the strings visited over all entries are capped by what the blob can hold.
    """
    head = need(src, offset, 32, "OffloadBinary header")
    if head[:4] != OFFLOAD_MAGIC:
        raise FormatError("not an LLVM OffloadBinary")
    version, size, eoff, esz = struct.unpack_from("<IQQQ", head, 4)
    if version not in (1, 2, 3):
        raise FormatError(f"OffloadBinary at 0x{offset:x} has unknown version {version}")
    hsize = 40 if version >= 3 else 32
    if size < hsize:
        raise FormatError(f"OffloadBinary at 0x{offset:x} claims a size of {size} bytes")
    c = Container("offload-binary", where, offset)
    end = offset + size
    if end > limit:
        c.problems.append(f"OffloadBinary at 0x{offset:x} claims {size} bytes, {limit - offset} present")
        end = limit
    blob = _body(src, c, version, offset, end)
    if blob is not None:
        _read_entries(blob, c, version, eoff, esz)
    return c, _align(end, 8)


def _body(src: Source, c: Container, version: int, offset: int, end: int) -> Source | None:
    """The blob's bytes (inflated for a compressed v3 blob); None when they cannot be read."""
    blob: Source = _elf.SubSource(src, offset, end - offset)
    if version < 3:
        return blob
    header = need(src, offset, 40, "OffloadBinary header")
    (inflated,) = struct.unpack_from("<Q", header, 32)
    if not inflated:
        return blob
    method = 1 if src.read(offset + 40, 4) == ZSTD_MAGIC else 0
    try:
        body = inflate_prefix(method, src, offset + 40, end, min(inflated, 8 << 20))
    except ZstdUnavailable:
        c.read = False
        add_note(c, ZSTD_NOTE)
        return None
    return BytesSource(header + body)


def _read_entries(blob: Source, c: Container, version: int, eoff: int, esz: int) -> None:
    count = 1 if version == 1 else esz
    entry_size = 40
    str_size = 16 if version == 1 else 24
    bsize = blob.size
    where = f"OffloadBinary at 0x{c.offset:x}"
    if count > max(0, bsize - eoff) // entry_size:
        c.problems.append(f"{where} claims {count} entries that do not fit")
        count = max(0, bsize - eoff) // entry_size
    budget = max(64, bsize // str_size)  # strings all entries may visit together
    kinds: set[str] = set()
    for i in range(count):
        e = need(blob, eoff + i * entry_size, entry_size, "OffloadBinary entry")
        image_kind, _okind, _flags, stroff, strcount, _ioff, _isize = struct.unpack("<HHIQQQQ", e)
        if strcount > max(0, bsize - stroff) // str_size:
            c.problems.append(f"{where}: string table out of bounds")
            continue
        if strcount > budget:
            c.problems.append(
                f"too many entries: {where}: its entries' string tables hold more "
                f"strings than its {bsize} bytes can; stopped at entry {i} of {count}"
            )
            break
        budget -= strcount
        triple, arch = _triple_and_arch(blob, stroff, strcount, str_size)
        if arch:
            c.targets.append(canonical_target(arch))
        elif triple:
            c.targets.append(triple)
        kinds.add(_IMAGE_KINDS.get(image_kind, f"image kind {image_kind}"))
    for k in sorted(kinds):
        add_note(c, k + (" (for link-time code generation, not machine code)" if k == "LLVM bitcode" else ""))


def _triple_and_arch(blob: Source, stroff: int, strcount: int, str_size: int) -> tuple[str, str]:
    """The ``triple`` and ``arch`` values of one entry's string table (later ones win)."""
    found = {b"triple": "", b"arch": ""}
    table = need(blob, stroff, strcount * str_size, "OffloadBinary string table") if strcount else b""
    for j in range(strcount):
        k, v = struct.unpack_from("<QQ", table, j * str_size)
        key = blob.read(k, 7)
        name = key[: key.find(b"\0")] if b"\0" in key else b""
        if name in found:
            found[name] = _blob_str(blob, v)
    return found[b"triple"], found[b"arch"]


def _blob_str(blob: Source, off: int) -> str:
    raw = blob.read(off, MAX_STRING)
    nul = raw.find(b"\0")
    return printable((raw if nul < 0 else raw[:nul]).decode("latin-1"))


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a
