"""A host ELF file's device code: which sections hold it and which reader walks each.

Holds the audit of one ELF file (a library, an object, a raw code object or cubin); the
containers themselves are read by ``bundle``/``ccob``/``offload_binary``/``fatbin``, a
library whose registered fatbins hold no kernels is searched for fatbins in its data
(``embedded``), and a file without a section table goes to ``scan``. It does not open files or zips.
"""

from __future__ import annotations

from typing import Sequence

from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary import embedded
from rocm_build_backend.binary.amdgpu import code_object_container
from rocm_build_backend.binary.bundle import parse_bundle_id
from rocm_build_backend.binary.container import Container
from rocm_build_backend.binary.cubin import cubin_container
from rocm_build_backend.binary.elf import FormatError, Source, SubSource, msg
from rocm_build_backend.binary.fatbin import walk_fatbins
from rocm_build_backend.binary.report import FileReport
from rocm_build_backend.binary.scan import scan
from rocm_build_backend.binary.walk import walk_hip_fatbin, walk_offloading

DEVICE_SECTIONS = {".hip_fatbin", ".nv_fatbin", "__nv_relfatbin", ".llvm.offloading"}
_BUNDLE_PREFIX = "__CLANG_OFFLOAD_BUNDLE__"


def _sections_wanted(name: str, typ: int) -> bool:
    return name in DEVICE_SECTIONS or typ == _elf.SHT_LLVM_OFFLOADING or name.startswith(_BUNDLE_PREFIX)


def _truncation(src: Source, hdr: _elf.ElfHeader) -> str:
    """A problem string when the ELF file's section table lies past the end of its data."""
    try:
        table = _elf.read_sections(src, hdr, lambda n, t: False)
    except FormatError as exc:
        return msg(exc)
    if table.data_end > src.size:
        return f"truncated: sections end at 0x{table.data_end:x}, the file has {src.size} bytes"
    return ""


def audit_elf(src: Source, r: FileReport) -> None:
    """Fill ``r`` with the device code of the ELF file ``src``."""
    try:
        hdr = _elf.read_header(src)
    except FormatError as exc:
        r.kind = "elf"
        r.problems.append(msg(exc))
        return
    if hdr.machine in (_elf.EM_AMDGPU, _elf.EM_CUDA):
        _device_elf(src, hdr, r)
        return
    r.kind = "elf"

    try:  # the data sections too, once: searched only when the device sections hold no kernels
        table = _elf.read_sections(src, hdr, lambda n, t: _sections_wanted(n, t) or embedded.wanted(n, t))
    except FormatError as exc:
        r.problems.append(msg(exc))
        scan(src, r)
        return
    if table.data_end > src.size:
        r.problems.append(f"truncated: sections end at 0x{table.data_end:x}, the file has {src.size} bytes")
    _walk_sections(src, [s for s in table.sections if _sections_wanted(s.name, s.type)], r)
    if embedded.needs_look(r.containers):
        data = [s for s in table.sections if embedded.wanted(s.name, s.type)]
        found, problems = embedded.embedded_fatbins(src, data)
        r.containers.extend(found)
        r.problems.extend(problems)


def _device_elf(src: Source, hdr: _elf.ElfHeader, r: FileReport) -> None:
    """A raw AMDGPU code object or a raw cubin."""
    if hdr.machine == _elf.EM_AMDGPU:
        r.kind = "code-object"
        r.containers.append(code_object_container(hdr))
    else:
        r.kind = "cubin"
        r.containers.append(cubin_container(src, hdr))
    problem = _truncation(src, hdr)
    if problem:
        r.problems.append(problem)


def _walk_sections(src: Source, sections: Sequence[_elf.Section], r: FileReport) -> None:
    """Each device section with its reader, in file order."""
    bundle_sections = []
    for sec in sorted(sections, key=lambda s: (s.offset, s.index)):
        if sec.type == _elf.SHT_NOBITS or sec.size == 0:
            continue
        if sec.flags & _elf.SHF_COMPRESSED:
            r.problems.append(f"{sec.name}: compressed ELF sections are not supported")
            continue
        cut = sec.offset + sec.size > src.size
        sub = SubSource(src, sec.offset, sec.size)
        if sec.name.startswith(_BUNDLE_PREFIX):
            bundle_sections.append(sec)
            continue
        if sec.name == ".hip_fatbin":
            found, problems = walk_hip_fatbin(sub, sec.name, cut=cut)
        elif sec.name in (".nv_fatbin", "__nv_relfatbin"):
            found, problems = walk_fatbins(sub, sec.name, cut=cut)
        else:
            found, problems = walk_offloading(sub, sec.name)
        r.containers.extend(found)
        r.problems.extend(problems)
    if bundle_sections:
        r.containers.append(_bundle_sections(bundle_sections))


def _bundle_sections(sections: Sequence[_elf.Section]) -> Container:
    """A relocatable object from the old offload driver with ``-fgpu-rdc``: one section
    ``__CLANG_OFFLOAD_BUNDLE__<entry id>`` per target."""
    c = Container("bundle", "__CLANG_OFFLOAD_BUNDLE__*", sections[0].offset)
    for sec in sections:
        try:
            bid = parse_bundle_id(sec.name[len(_BUNDLE_PREFIX) :])
        except FormatError as exc:
            c.problems.append(msg(exc))
            continue
        if not bid.is_host and bid.target:
            c.targets.append(bid.target)
    return c
