"""Fatbins a library keeps in its own data and loads itself, not through ``.nv_fatbin``.

cuFFT 12 is built this way: its ``.nv_fatbin`` holds one device-link stub without kernels, and
its ``.ldata`` holds 23,983 whole fatbins, which the library hands to the driver for the GPU it
runs on: 11,255 kernel modules of one GPU architecture each (SASS sm_75 ... sm_120, PTX
compute_75 ... compute_90) and 12,728 with entries of kind 8 only, which no GPU loads as code. Looked for only in a library whose registered device code holds no kernels, so a library
whose kernels are where the CUDA runtime registers them costs nothing more.

A candidate must be a well-formed version-1 fatbin with a 16-byte header on an 8-byte
boundary and readable entries; anything else in the data is skipped, never reported. Past
``MAX_CANDIDATES`` headers the search stops with one "too many entries" problem.
"""

from __future__ import annotations

from typing import Sequence

from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.budget import BudgetExceeded, count_container
from rocm_build_backend.binary.container import Container, add_note
from rocm_build_backend.binary.elf import FormatError, Source, SubSource
from rocm_build_backend.binary.fatbin import Deferred, read_fatbin, settle

DATA_SECTIONS = (".rodata", ".lrodata", ".data.rel.ro", ".data", ".ldata")
_HEADER = b"\x50\xed\x55\xba\x01\x00\x10\x00"  # magic, version 1, header size 16
_CHUNK = 4 << 20
MAX_CANDIDATES = 1 << 16  # per file; cuFFT 12 has 23,983 (11,255 with code, the rest kind-8 only)
NOTE = "in the library's data, loaded by the library itself"
TOO_MANY = (
    f"too many entries: more than {MAX_CANDIDATES:,} fatbin headers in the library's data; "
    "the search stopped, so kernels kept there may be missing"
)


def wanted(name: str, typ: int) -> bool:
    return name in DATA_SECTIONS and typ != _elf.SHT_NOBITS


def needs_look(containers: Sequence[Container]) -> bool:
    """True when the registered fatbins (``.nv_fatbin``) are there but none is known to hold
    kernels: a stub-only library, whose kernels may be in its data."""
    nv = [c for c in containers if c.where == ".nv_fatbin"]
    return bool(nv) and not any(c.kernels and c.read for c in nv)


def embedded_fatbins(src: Source, sections: Sequence[_elf.Section]) -> tuple[list[Container], list[str]]:
    """The well-formed fatbins in the data sections of ``src``, with kernels decided as for
    ``.nv_fatbin`` (one look per distinct target set); and the problems (a search cut short
    after ``MAX_CANDIDATES`` headers, well-formed or not, so hostile data costs bounded work)."""
    found: list[Container] = []
    left = [MAX_CANDIDATES]
    for sec in sorted(sections, key=lambda s: s.offset):
        if sec.size >= 16 and sec.offset + sec.size <= src.size:
            found.extend(_in_section(SubSource(src, sec.offset, sec.size), sec.name, sec.offset, left))
        if left[0] < 0:
            return found, [TOO_MANY]
    return found, []


class _Window:
    """A section as a source whose reads inside the chunk in memory are served from it (no
    system call per fatbin header); reads elsewhere go to the section."""

    def __init__(self, sub: Source) -> None:
        self._sub, self.size = sub, sub.size
        self.start, self.data = 0, b""

    def load(self, pos: int, n: int) -> bytes:
        self.start, self.data = pos, self._sub.read(pos, n)
        return self.data

    def read(self, offset: int, n: int) -> bytes:
        rel = offset - self.start
        if 0 <= rel and rel + n <= len(self.data) and n > 0:
            return self.data[rel : rel + n]
        return self._sub.read(offset, n)


def _in_section(sub: Source, name: str, base: int, left: list[int]) -> list[Container]:
    """The fatbins of one section; ``base``: its file offset (fatbins are 8-byte aligned in
    the file, not necessarily within the section). The search resumes after each fatbin found,
    so the bytes inside fatbins are not searched. Where the source already knows where the
    fatbin magics are (an inflated zip member), only those places are read."""
    found: list[Container] = []
    deferred: Deferred = []
    known = _elf.magic_offsets(sub, 0, sub.size)
    if known is not None:
        after = 0
        for start in known:
            if start >= after and sub.read(start, len(_HEADER)) == _HEADER:
                after = _candidate(sub, start, name, left, found, deferred)
                if left[0] < 0:
                    break
        settle(sub, found, deferred)
        return found
    win = _Window(sub)
    pos = 0
    while pos < sub.size:
        chunk = win.load(pos, _CHUNK + len(_HEADER) - 1)  # overlapping: no header is cut in two
        if len(chunk) < len(_HEADER):
            break
        at, nxt = chunk.find(_HEADER), 0
        while 0 <= at < _CHUNK and at + len(_HEADER) <= len(chunk):
            start = pos + at
            nxt = at + 1
            if (base + start) % 8 == 0:
                nxt = _candidate(win, start, name, left, found, deferred) - pos
                if left[0] < 0:
                    break
            if nxt >= _CHUNK:
                break
            at = chunk.find(_HEADER, nxt)
        if left[0] < 0:
            break
        pos += max(_CHUNK, nxt)
    settle(sub, found, deferred)
    return found


def _candidate(src: Source, start: int, name: str, left: list[int], found: list[Container], deferred: Deferred) -> int:
    """Read the fatbin header at ``start`` (counted against ``left``); a well-formed fatbin
    with targets goes into ``found``. Returns where the search goes on: after a whole fatbin
    (kept or not), else the next byte."""
    left[0] -= 1
    if left[0] < 0:
        return start + 1
    before = len(deferred)
    try:
        c, end = read_fatbin(src, start, src.size, name, False, deferred)
    except BudgetExceeded:
        raise
    except FormatError:
        c, end = None, None
    if c is not None and c.targets and not c.problems:
        count_container()
        add_note(c, NOTE)
        found.append(c)
    else:
        del deferred[before:]
    if c is not None and not c.problems and end and end > start:
        return end  # a whole fatbin (kept or not): go on after it
    return start + 1
