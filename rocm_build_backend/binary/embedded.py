"""Fatbins a library keeps in its own data and loads itself, not through ``.nv_fatbin``.

cuFFT is built this way: its ``.nv_fatbin`` holds one device-link stub without kernels, and
its 23,983 kernel modules (one GPU architecture each: SASS sm_75 ... sm_120, PTX compute_75 ...)
lie in ``.ldata`` as whole fatbins, which the library hands to the driver for the GPU it runs
on. Looked for only in a library whose registered device code holds no kernels, so a library
whose kernels are where the CUDA runtime registers them costs nothing more.

A candidate must be a well-formed version-1 fatbin with a 16-byte header on an 8-byte
boundary and readable entries; anything else in the data is skipped, never reported.
"""

from __future__ import annotations

from typing import Sequence

from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.budget import BudgetExceeded
from rocm_build_backend.binary.container import Container, add_note
from rocm_build_backend.binary.elf import FormatError, Source, SubSource

DATA_SECTIONS = (".rodata", ".lrodata", ".data.rel.ro", ".data", ".ldata")
_HEADER = b"\x50\xed\x55\xba\x01\x00\x10\x00"  # magic, version 1, header size 16
_CHUNK = 4 << 20
NOTE = "in the library's data, loaded by the library itself"


def wanted(name: str, typ: int) -> bool:
    return name in DATA_SECTIONS and typ != _elf.SHT_NOBITS


def needs_look(containers: Sequence[Container]) -> bool:
    """True when the registered fatbins (``.nv_fatbin``) are there but none is known to hold
    kernels: a stub-only library, whose kernels may be in its data."""
    nv = [c for c in containers if c.where == ".nv_fatbin"]
    return bool(nv) and not any(c.kernels and c.read for c in nv)


def embedded_fatbins(src: Source, sections: Sequence[_elf.Section]) -> list[Container]:
    """The well-formed fatbins in the data sections of ``src``, with kernels decided as for
    ``.nv_fatbin`` (one look per distinct target set)."""
    found: list[Container] = []
    for sec in sorted(sections, key=lambda s: s.offset):
        if sec.size >= 16 and sec.offset + sec.size <= src.size:
            found.extend(_in_section(SubSource(src, sec.offset, sec.size), sec.name, sec.offset))
    return found


def _in_section(sub: Source, name: str, base: int) -> list[Container]:
    """The fatbins of one section; ``base``: its file offset (fatbins are 8-byte aligned in
    the file, not necessarily within the section)."""
    from rocm_build_backend.binary.budget import count_container
    from rocm_build_backend.binary.fatbin import Deferred, read_fatbin, settle

    found: list[Container] = []
    deferred: Deferred = []
    skip_until = 0
    pos = 0
    while pos < sub.size:
        chunk = sub.read(pos, _CHUNK + len(_HEADER) - 1)  # overlapping: no header is cut in two
        if len(chunk) < len(_HEADER):
            break
        at = chunk.find(_HEADER)
        while 0 <= at <= len(chunk) - len(_HEADER):
            start = pos + at
            if (base + start) % 8 == 0 and start >= skip_until:
                before = len(deferred)
                try:
                    c, end = read_fatbin(sub, start, sub.size, name, False, deferred)
                except BudgetExceeded:
                    raise
                except FormatError:
                    c, end = None, None
                if c is not None and c.targets and not c.problems:
                    count_container()
                    add_note(c, NOTE)
                    found.append(c)
                    skip_until = end or start + 16
                else:
                    del deferred[before:]
            at = chunk.find(_HEADER, at + 1)
        pos += _CHUNK
    settle(sub, found, deferred)
    return found
