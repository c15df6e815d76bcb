"""NVIDIA cubins (ELF, EM_CUDA): the SM a cubin is for, from its header and ``.nv.compat``.

It reads one cubin's ELF header and its small ``.nv.compat`` section, nothing else.
"""

from __future__ import annotations

from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.container import Container
from rocm_build_backend.binary.elf import FormatError, Source, need


def cubin_container(src: Source, hdr: _elf.ElfHeader, where: str = "file") -> Container:
    """A raw cubin: the SM from ``e_flags`` (layout chosen by EI_ABIVERSION, never by the
    value); ``a`` from the flags or, for CUDA 13 cubins, from ``.nv.compat`` attribute 9."""
    flags = hdr.flags
    c = Container("cubin", where, 0)
    if hdr.abiversion < 8:  # "V1": CUDA <= 12.x for sm_90 and older
        sm = flags & 0xFF
        a = bool(flags & 0x800)
    else:
        sm = (flags >> 8) & 0xFF
        a = bool(flags & 0x8)
    if not a:
        try:
            a = _compat_arch_specific(src, hdr)
        except FormatError:
            pass  # a truncated cubin: the header alone still names the SM
    c.targets.append(f"sm_{sm}{'a' if a else ''}")
    c.note = f"cubin (ELF ABI version {hdr.abiversion})"
    return c


def _compat_arch_specific(src: Source, hdr: _elf.ElfHeader) -> bool:
    table = _elf.read_sections(src, hdr, lambda name, typ: name == ".nv.compat")
    for sec in table.sections:
        data = need(src, sec.offset, min(sec.size, 4096), ".nv.compat")
        i = 0
        while i + 2 <= len(data):
            fmt, attr = data[i], data[i + 1]
            if fmt == 1:
                step = 2
            elif fmt in (2, 3):
                if i + 4 > len(data):
                    break
                if attr == 0x09 and fmt == 2 and data[i + 2] == 1:
                    return True
                step = 4
            elif fmt == 4:
                if i + 4 > len(data):
                    break
                step = 4 + int.from_bytes(data[i + 2 : i + 4], "little")
            else:
                break
            i += step
    return False
