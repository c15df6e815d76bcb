"""Walking a section (or a whole file) of back-to-back containers, zero padding between.

Each reader returns ``(Container, next_offset)``; the walk stops at the first unknown
bytes, the first header it cannot read, or a reader that cannot say where it ends. It knows
no byte layout itself.
"""

from __future__ import annotations

from typing import Callable, Mapping

from rocm_build_backend.binary.budget import BudgetExceeded, count_container
from rocm_build_backend.binary.bundle import BUNDLE_MAGIC, read_bundle
from rocm_build_backend.binary.ccob import CCOB_MAGIC, read_ccob
from rocm_build_backend.binary.container import Container
from rocm_build_backend.binary.elf import FormatError, Source, msg
from rocm_build_backend.binary.offload_binary import OFFLOAD_MAGIC, read_offload_binary

Reader = Callable[[Source, int, int, str, bool], "tuple[Container, int | None]"]
Found = tuple[list[Container], list[str]]


def skip_zeros(src: Source, pos: int, end: int) -> int:
    """The first offset in ``[pos, end)`` whose byte is not zero (``end`` when none)."""
    step = 256  # padding is short: read a little first, more while it goes on
    while pos < end:
        chunk = src.read(pos, min(step, end - pos))
        if not chunk:
            return end
        stripped = len(chunk) - len(chunk.lstrip(b"\0"))
        pos += stripped
        if stripped < len(chunk):
            return pos
        step = min(step * 2, 1 << 16)
    return end


_READERS: dict[bytes, Reader] = {
    BUNDLE_MAGIC[:4]: lambda src, pos, end, where, cut: read_bundle(src, pos, end, where, cut=cut),
    CCOB_MAGIC: lambda src, pos, end, where, cut: read_ccob(src, pos, end, where, cut=cut),
    OFFLOAD_MAGIC: lambda src, pos, end, where, cut: read_offload_binary(src, pos, end, where),
}


def walk(
    src: Source, where: str, readers: Mapping[bytes, Reader], *, cut: bool = False, what: str = "container"
) -> Found:
    """Every container in a section (or file): back to back, zero padding between.

    Returns (containers, problems that belong to no container).
    """
    out: list[Container] = []
    problems: list[str] = []
    pos, end = 0, src.size
    while pos < end:
        pos = skip_zeros(src, pos, end)
        if pos >= end:
            break
        magic = src.read(pos, 4)
        reader = readers.get(magic)
        if reader is None:
            problems.append(_where(where, f"unrecognised bytes at offset 0x{pos:x} (expected a {what})"))
            break
        try:
            c, nxt = reader(src, pos, end, where, cut)
        except FormatError as exc:
            problems.append(_where(where, msg(exc)))
            break
        out.append(c)
        try:
            count_container()
        except BudgetExceeded as exc:
            problems.append(msg(exc))
            break
        if nxt is None or nxt <= pos:
            break
        pos = nxt
    return out, problems


def _where(where: str, text: str) -> str:
    return text if where == "file" else f"{where}: {text}"


def walk_hip_fatbin(src: Source, where: str = ".hip_fatbin", *, cut: bool = False) -> Found:
    """``.hip_fatbin``: one bundle / CCOB / OffloadBinary per translation unit."""
    return walk(src, where, _READERS, cut=cut, what="offload bundle")


def walk_offloading(src: Source, where: str = ".llvm.offloading") -> Found:
    """``.llvm.offloading``: OffloadBinary blobs, 8-byte aligned."""
    return walk(src, where, {OFFLOAD_MAGIC: _READERS[OFFLOAD_MAGIC]}, what="OffloadBinary")
