"""Which installed files may hold device code, decided as cheaply as possible (``check --env``).

By name first (source, text, images, Python: no I/O), then by size (under 64 bytes), then by
their first bytes (an ELF file, an offload bundle, a CCOB, an offload binary or a CUDA fatbin;
nothing else is read further); a host ELF library is a candidate only when its section-name
table names a device section. It decides nothing about what loads.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Protocol

from rocm_build_backend.binary import magic
from rocm_build_backend.binary.elf import EM_AMDGPU, EM_CUDA, ELF_MAGIC, FileSource, read_header, read_name_table
from rocm_build_backend.errors import FormatError

_MIN_SIZE = 64
# never device code: what Python packages ship besides libraries
_SKIP_SUFFIXES = frozenset(
    ".py .pyc .pyo .pyi .pyx .pxd .pxi .pth .typed .txt .md .rst .json .toml .cfg .ini .yaml .yml "
    ".h .hh .hpp .hxx .cuh .inc .inl .c .cc .cpp .cxx .cu .hip .f90 .html .htm .css .js .map .svg .png "
    ".jpg .jpeg .gif .ico .csv .xml .mo .po .pem .crt .sh .bat .ps1 .cmake .pc .proto .ipynb .tcl .rb "
    ".pl .java .rs .go .lua .jinja .j2 .tmpl .license .ttf .otf .woff .woff2 .pyx.in".split()
)
_MAGICS = (ELF_MAGIC, magic.BUNDLE, magic.CCOB, magic.OFFLOAD, magic.FATBIN)
# the section names the audit reads device code from (binary/audit.py _DEVICE_SECTIONS, and
# the -fgpu-rdc bundle sections); an ELF library whose section names hold none has no device code
_DEVICE_SECTION_NAMES = (
    b".hip_fatbin",
    b".nv_fatbin",
    b"__nv_relfatbin",
    b".llvm.offloading",
    b"__CLANG_OFFLOAD_BUNDLE__",
)


_SKIP_TUPLE = tuple(sorted(_SKIP_SUFFIXES | {x.upper() for x in _SKIP_SUFFIXES}))


def may_hold_device_code(path: str) -> bool:
    """False for a file that by its name cannot hold device code (no I/O)."""
    return not (path.endswith(_SKIP_TUPLE) or ".dist-info/" in path or "__pycache__/" in path)


class Installed(Protocol):
    """What ``device_candidates`` reads of an installed distribution (``environment.Distribution``)."""

    @property
    def location(self) -> Path: ...  # the site-packages folder

    @property
    def files(self) -> tuple[str, ...]: ...  # paths from RECORD, relative to ``location``


def device_candidates(dist: Installed, seen: set[tuple[int, int]] | None = None) -> tuple[list[Path], int]:
    """The files of ``dist`` whose first bytes are a container the audit reads; and how many
    files were looked at (opened) to find them. ``seen``: the (device, inode) of every file
    looked at so far; a file met again under another spelling is skipped."""
    out, opened = [], 0
    seen = set() if seen is None else seen
    for rel in dist.files:
        if not may_hold_device_code(rel):
            continue
        path = dist.location / rel
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        if not (st.st_mode & 0o170000 == 0o100000) or st.st_size < _MIN_SIZE or (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        opened += 1
        try:
            with open(path, "rb") as fh:
                head = fh.read(24)
                if head[:4] == ELF_MAGIC:
                    if elf_may_hold_device_code(fh, st.st_size):
                        out.append(path)
                elif any(head.startswith(m) for m in _MAGICS):
                    out.append(path)
        except OSError:
            out.append(path)  # unreadable: the audit says so
    return out, opened


def elf_may_hold_device_code(fh: IO[bytes], size: int) -> bool:
    """False only for a well-formed host ELF file none of whose section names is a device
    section (read by ``binary.elf``: the header, one section header, the section-name table).
    Anything odd is True: the audit then reads the file and reports what it finds."""
    src = FileSource(fh, 0, size)
    try:
        hdr = read_header(src)
        if hdr.machine in (EM_AMDGPU, EM_CUDA):
            return True
        names, _count = read_name_table(src, hdr)
    except FormatError:
        return True
    return any(n in names for n in _DEVICE_SECTION_NAMES)
