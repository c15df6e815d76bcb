"""The fallback for a damaged ELF file without a section table: find containers by magic.

Only used when the section table is gone; whatever it finds is reported with the damage,
never as a clean result. It reads containers with the normal readers.
"""

from __future__ import annotations

from typing import Callable

from rocm_build_backend.binary.budget import Budget, BudgetExceeded, BudgetSource
from rocm_build_backend.binary.bundle import BUNDLE_MAGIC, read_bundle
from rocm_build_backend.binary.ccob import CCOB_MAGIC, read_ccob
from rocm_build_backend.binary.container import Container
from rocm_build_backend.binary.elf import FormatError, Source
from rocm_build_backend.binary.fatbin import FATBIN_MAGIC, read_fatbin
from rocm_build_backend.binary.offload_binary import OFFLOAD_MAGIC, read_offload_binary
from rocm_build_backend.binary.report import FileReport

_SCAN_ATTEMPTS = 4096
SCAN_FACTOR = 4
_SCAN_MAGICS = (BUNDLE_MAGIC, CCOB_MAGIC, OFFLOAD_MAGIC, FATBIN_MAGIC)


def scan(src: Source, r: FileReport) -> None:
    """Damaged ELF without a section table: find containers by magic, with strict checks.

    Only used when the section table is gone (libraries carry these magics in their data,
    so this is never how a healthy file is read). Whatever is found is reported together
    with the damage, never as a clean result. Candidates may overlap and each may claim
    the rest of the file, so all attempts together may read at most ``SCAN_FACTOR`` times
    the file (plus 1 MiB); past that the scan stops and says so.
    """
    budget = Budget(src.size, factor=SCAN_FACTOR, base=1 << 20)
    try:
        attempts = _scan(BudgetSource(src, budget, "bytes read by the scan"), src.size, r)
    except BudgetExceeded:
        if not budget.exceeded:
            raise  # the file's own budget, not the scan's
        r.problems.append(
            "too many entries: the damaged file holds more candidate containers than can be "
            f"checked in {SCAN_FACTOR}x its size; scanning stopped"
        )
        attempts = -1
    if r.containers:
        r.problems.append("device code found by scanning the damaged file; the list may be incomplete")
    elif attempts >= 0:
        r.problems.append("no device code found in the bytes present (the file is damaged, so some may be missing)")


def _scan(src: Source, size: int, r: FileReport) -> int:
    readers: dict[bytes, Callable[[int], tuple[Container, int | None]]] = {
        BUNDLE_MAGIC: lambda p: read_bundle(src, p, size, "scan", cut=True),
        CCOB_MAGIC: lambda p: read_ccob(src, p, size, "scan", cut=True),
        OFFLOAD_MAGIC: lambda p: read_offload_binary(src, p, size, "scan"),
        FATBIN_MAGIC: lambda p: read_fatbin(src, p, size, "scan", True),
    }
    attempts = 0
    pos = 0
    skip_until = 0
    overlap = len(BUNDLE_MAGIC) - 1
    while pos < size and attempts < _SCAN_ATTEMPTS:
        chunk = src.read(pos, 4 << 20)
        if not chunk:
            break
        hits = sorted((pos + i, m) for m in _SCAN_MAGICS for i in _find_all(chunk, m))
        for at, m in hits:
            if at < skip_until or at % 4 or attempts >= _SCAN_ATTEMPTS:
                continue
            attempts += 1
            try:
                c, nxt = readers[m](at)
            except BudgetExceeded:
                raise
            except FormatError:
                continue
            if not c.targets and c.kind != "ccob":
                continue
            c.where = f"found at 0x{at:x}"
            r.containers.append(c)
            if nxt is not None and nxt > at:
                skip_until = nxt
        if len(chunk) <= overlap:
            break
        pos += len(chunk) - overlap
    return attempts


def _find_all(data: bytes, magic: bytes) -> list[int]:
    out: list[int] = []
    i = data.find(magic)
    while i >= 0 and len(out) < _SCAN_ATTEMPTS:
        out.append(i)
        i = data.find(magic, i + 1)
    return out
