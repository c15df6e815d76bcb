"""LLVM OffloadBinary blobs (``.llvm.offloading``, ``llvm/Object/OffloadBinary.h`` v1-v3).

Reads the entries' string tables for ``triple`` and ``arch``; it does not look into the
images themselves.
"""

from __future__ import annotations

import struct

from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.amdgpu import canonical_target
from rocm_build_backend.binary.decompression import ZSTD_MAGIC, ZSTD_NOTE, ZstdUnavailable, inflate_prefix
from rocm_build_backend.binary.container import Container, add_note
from rocm_build_backend.binary.elf import BytesSource, FormatError, Source, need

OFFLOAD_MAGIC = b"\x10\xff\x10\xad"
_IMAGE_KINDS = {1: "object", 2: "LLVM bitcode", 3: "cubin", 4: "fatbinary", 5: "PTX", 6: "SPIR-V"}


def read_offload_binary(src: Source, offset: int, limit: int, where: str) -> tuple[Container, int | None]:
    """One OffloadBinary blob (``llvm/Object/OffloadBinary.h``, versions 1-3)."""
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
    blob: Source = _elf.SubSource(src, offset, end - offset)
    if version >= 3:
        (inflated,) = struct.unpack_from("<Q", need(src, offset, 40, "OffloadBinary header"), 32)
        if inflated:
            method = 1 if src.read(offset + 40, 4) == ZSTD_MAGIC else 0
            try:
                body = inflate_prefix(method, src, offset + 40, end, min(inflated, 8 << 20))
            except ZstdUnavailable:
                c.read = False
                add_note(c, ZSTD_NOTE)
                return c, _align(end, 8)
            blob = BytesSource(need(src, offset, 40, "OffloadBinary header") + body)
    count = 1 if version == 1 else esz
    entry_size = 40
    str_size = 16 if version == 1 else 24
    bsize = blob.size
    if count > max(0, bsize - eoff) // entry_size:
        c.problems.append(f"OffloadBinary at 0x{offset:x} claims {count} entries that do not fit")
        count = max(0, bsize - eoff) // entry_size
    kinds: set[str] = set()
    for i in range(count):
        e = need(blob, eoff + i * entry_size, entry_size, "OffloadBinary entry")
        image_kind, _okind, _flags, stroff, strcount, _ioff, _isize = struct.unpack("<HHIQQQQ", e)
        if strcount > max(0, bsize - stroff) // str_size:
            c.problems.append(f"OffloadBinary at 0x{offset:x}: string table out of bounds")
            continue
        strings: dict[str, str] = {}
        for j in range(strcount):
            k, v = struct.unpack_from("<QQ", need(blob, stroff + j * str_size, 16, "OffloadBinary string"))
            strings[_blob_str(blob, k)] = _blob_str(blob, v)
        triple, arch = strings.get("triple", ""), strings.get("arch", "")
        if arch:
            c.targets.append(canonical_target(arch))
        elif triple:
            c.targets.append(triple)
        kinds.add(_IMAGE_KINDS.get(image_kind, f"image kind {image_kind}"))
    for k in sorted(kinds):
        add_note(c, k + (" (for link-time code generation, not machine code)" if k == "LLVM bitcode" else ""))
    return c, _align(end, 8)


def _blob_str(blob: Source, off: int) -> str:
    raw = blob.read(off, 256)
    nul = raw.find(b"\0")
    return (raw if nul < 0 else raw[:nul]).decode("latin-1")


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


