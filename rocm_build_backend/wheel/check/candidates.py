"""Which installed files may hold device code, decided as cheaply as possible (``check --env``).

By name first (source, text, images, Python: no I/O), then by size (under 64 bytes), then by
their first bytes (an ELF file, an offload bundle, a CCOB, an offload binary or a CUDA fatbin;
nothing else is read further); a host ELF library is a candidate only when its section-name
table names a device section. It decides nothing about what loads.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any, Protocol

_MIN_SIZE = 64
# never device code: what Python packages ship besides libraries
_SKIP_SUFFIXES = frozenset(
    ".py .pyc .pyo .pyi .pyx .pxd .pxi .pth .typed .txt .md .rst .json .toml .cfg .ini .yaml .yml "
    ".h .hh .hpp .hxx .cuh .inc .inl .c .cc .cpp .cxx .cu .hip .f90 .html .htm .css .js .map .svg .png "
    ".jpg .jpeg .gif .ico .csv .xml .mo .po .pem .crt .sh .bat .ps1 .cmake .pc .proto .ipynb .tcl .rb "
    ".pl .java .rs .go .lua .jinja .j2 .tmpl .license .ttf .otf .woff .woff2 .pyx.in".split()
)
_MAGICS = (b"\x7fELF", b"__CLANG_OFFLOAD_BUNDLE__", b"CCOB", b"\x10\xff\x10\xad", b"\x50\xed\x55\xba")
# the section names the audit reads device code from (binary/audit.py _DEVICE_SECTIONS, and
# the -fgpu-rdc bundle sections); an ELF library whose section names hold none has no device code
_DEVICE_SECTION_NAMES = (b".hip_fatbin", b".nv_fatbin", b"__nv_relfatbin", b".llvm.offloading",
                         b"__CLANG_OFFLOAD_BUNDLE__")
_EM_AMDGPU, _EM_CUDA = 224, 190
_MAX_SHSTRTAB = 16 << 20


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
                if head[:4] == b"\x7fELF":
                    if elf_may_hold_device_code(fh, st.st_size):
                        out.append(path)
                elif any(head.startswith(m) for m in _MAGICS):
                    out.append(path)
        except OSError:
            out.append(path)  # unreadable: the audit says so
    return out, opened


def elf_may_hold_device_code(fh: Any, size: int) -> bool:
    """False only for a well-formed host ELF file none of whose section names is a device
    section (read: the header, one section header, the section-name table). Anything odd is
    True: the audit then reads the file and reports what it finds."""
    fh.seek(0)
    head = fh.read(64)
    if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
        return True
    e = "<" if head[5] == 1 else ">"
    is64 = head[4] == 2
    (machine,) = struct.unpack_from(e + "H", head, 18)
    if machine in (_EM_AMDGPU, _EM_CUDA) or (is64 and len(head) < 64):
        return True
    if is64:
        shoff, = struct.unpack_from(e + "Q", head, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", head, 0x3A)
    else:
        shoff, = struct.unpack_from(e + "I", head, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", head, 0x2E)
    if not shoff or shstrndx in (0, 0xFFFF) or shstrndx >= shnum or shentsize < (64 if is64 else 40):
        return True
    at = shoff + shstrndx * shentsize
    if at + shentsize > size:
        return True
    fh.seek(at)
    shdr = fh.read(shentsize)
    offset, length = struct.unpack_from(e + ("QQ" if is64 else "II"), shdr, 0x18 if is64 else 0x10)
    if offset + length > size or length > _MAX_SHSTRTAB:
        return True
    fh.seek(offset)
    names = fh.read(length)
    return any(n in names for n in _DEVICE_SECTION_NAMES)
