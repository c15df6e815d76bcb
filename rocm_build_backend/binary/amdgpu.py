"""AMDGPU code objects: the target ID an ELF header's ``e_flags`` names.

Holds the EF_AMDGPU_MACH table, target canonicalisation and the container for a raw code
object. It reads only an ELF header someone else parsed; it walks no containers.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import NamedTuple

from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.container import Container
from rocm_build_backend.data import path as data_path


@lru_cache(maxsize=None)
def mach_table() -> dict[int, str]:
    path = data_path("amdgpu_mach.json")
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    return {int(k, 16): v for k, v in doc["mach"].items()}


def canonical_target(text: str) -> str:
    """``gfx90a:xnack-:sramecc+`` -> ``gfx90a:sramecc+:xnack-`` (features in LLVM's order)."""
    processor, *features = text.split(":")
    return ":".join([processor, *sorted(f for f in features if f)])


class CodeObjectInfo(NamedTuple):
    target: str  # canonical target ID, e.g. "gfx90a:xnack-"
    processor: str
    version: int | None  # code object version (2..6), None when unknown
    generic_version: int = 0
    known: bool = True  # False when the mach value is not in the table


def amdgpu_code_object(hdr: _elf.ElfHeader) -> CodeObjectInfo:
    """Target ID of an AMDGPU code object from its ``e_flags`` (like comgr's
    ``getElfIsaNameFromElfHeader``): processor, then ``:sramecc±`` and ``:xnack±`` only for
    on/off, never for "any" or "unsupported"."""
    flags, abi = hdr.flags, hdr.abiversion
    mach = flags & 0xFF
    name = mach_table().get(mach)
    known = name is not None
    processor = name or f"mach-0x{mach:02x}"
    feats: list[str] = []
    generic = 0
    if abi >= 2:  # code object v4 and later
        sramecc = (flags >> 10) & 3
        xnack = (flags >> 8) & 3
        if sramecc in (2, 3):
            feats.append("sramecc" + "-+"[sramecc - 2])
        if xnack in (2, 3):
            feats.append("xnack" + "-+"[xnack - 2])
        if abi >= 4:
            generic = (flags >> 24) & 0xFF
    elif abi == 1:  # v3: on/off only
        if flags & 0x200:
            feats.append("sramecc+")
        if flags & 0x100:
            feats.append("xnack+")
    else:  # v2
        if flags & 0x01:
            feats.append("xnack+")
    version = abi + 2 if hdr.osabi == 64 and abi <= 10 else None
    return CodeObjectInfo(":".join([processor, *feats]), processor, version, generic, known)


def code_object_container(hdr: _elf.ElfHeader, where: str = "file") -> Container:
    info = amdgpu_code_object(hdr)
    c = Container("code-object", where, 0, [info.target])
    notes = []
    if info.version:
        notes.append(f"code object v{info.version}")
    if info.generic_version:
        notes.append(f"generic version {info.generic_version}")
    if not info.known:
        notes.append(f"unknown EF_AMDGPU_MACH {info.processor[5:]}")
    c.note = ", ".join(notes)
    return c
