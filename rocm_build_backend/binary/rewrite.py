"""Thin one binary to the device code that loads on given targets: ``plan_file`` and
``thin_buffer``.

A file is classified by its magic bytes, like the audit does: an ELF library or object has
its device sections (``.hip_fatbin``, ``.nv_fatbin``, ``__nv_relfatbin``,
``.llvm.offloading``) rewritten in place, every other byte untouched, so the section table,
symbols, program headers and every offset stay valid; a standalone code object or cubin is
kept or dropped whole; a standalone bundle, CCOB or fatbin file is rewritten like a section
and cut after its last container.

The outcome of one file is a ``FileResult``: ``none`` (no device code), ``unchanged``
(everything loads on the targets), ``thinned``, ``dropped`` (nothing in it loads) or
``kept-whole`` (a format this tool cannot rewrite safely; ``reason`` says which). A damaged
container raises ``FormatError``. After a rewrite the new bytes are audited again; when the
audit does not agree with the plan the result is ``kept-whole`` with ``restore`` set, and the
caller puts the original bytes back. A thinned library is then compacted (``compact``): its
kept device code packed and the freed bytes cut from the file, addresses unchanged; the
result's ``data`` holds those bytes, and they must audit exactly as the in-place rewrite did
(else the same restore). Nothing here reads wheels or prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Callable

from rocm_build_backend.binary import amdgpu, bundle, ccob, cubin, elf, fatbin, offload_binary, walk
from rocm_build_backend.binary.audit import audit_bytes
from rocm_build_backend.binary.compact import compacted
from rocm_build_backend.binary.elf import BytesSource, Source
from rocm_build_backend.binary.rewrite_amd import plan_bundle, plan_ccob, plan_offloading
from rocm_build_backend.binary.rewrite_cuda import plan_fatbin
from rocm_build_backend.binary.rewrite_plan import Buffer, CannotThin, Plan, Selector
from rocm_build_backend.errors import FormatError

_Planner = Callable[[Source, int, int, Selector], "tuple[Plan, int, int]"]
_HIP: dict[bytes, _Planner] = {bundle.BUNDLE_MAGIC[:4]: plan_bundle, ccob.CCOB_MAGIC: plan_ccob}
_NV: dict[bytes, _Planner] = {fatbin.FATBIN_MAGIC: plan_fatbin}
_HIP_FILE: dict[bytes, _Planner] = {
    bundle.BUNDLE_MAGIC[:4]: plan_bundle,
    ccob.CCOB_MAGIC: partial(plan_ccob, pad=False),
}
_MAGICS = (bundle.BUNDLE_MAGIC[:4], ccob.CCOB_MAGIC, offload_binary.OFFLOAD_MAGIC, fatbin.FATBIN_MAGIC)


@dataclass
class FileResult:
    action: str  # none, unchanged, thinned, dropped, kept-whole
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    reason: str = ""
    plan: Plan | None = None
    new_size: int | None = None  # a standalone container file is cut here
    restore: bool = False  # the buffer was changed and must be replaced by the original
    data: bytearray | None = None  # the compacted library: write these bytes, not the buffer
    layout: str = ""  # a thinned library: "compacted", or "in place" with layout_reason
    layout_reason: str = ""

    @property
    def targets(self) -> list[str]:
        """Every target the file held before thinning, in the order found, no repeats."""
        return list(dict.fromkeys(self.kept + self.dropped))


def might_hold_device_code(head: bytes) -> bool:
    """Whether a file starting with ``head`` needs to be read to know (ELF or a container)."""
    return head[:4] == elf.ELF_MAGIC or head[:4] in _MAGICS


def _walk(
    src: Source, start: int, end: int, planners: dict[bytes, _Planner], sel: Selector, what: str
) -> tuple[Plan, int]:
    """Plans for every container in ``[start, end)``; (plan, new end of the last one)."""
    plan = Plan()
    pos, new_end = start, start
    while pos < end:
        pos = walk.skip_zeros(src, pos, end)
        if pos >= end:
            break
        magic = src.read(pos, 4)
        planner = planners.get(magic)
        if planner is None:
            if magic in _MAGICS:
                raise CannotThin(f"{what}: a container of a kind this tool does not rewrite here")
            raise FormatError(f"{what}: unrecognised bytes at 0x{pos - start:x}")
        p, old, new = planner(src, pos, end, sel)
        plan.extend(p)
        new_end = new
        if old <= pos:
            raise FormatError(f"{what}: a container at 0x{pos - start:x} has no length")
        pos = old
    return plan, new_end


def _wanted(name: str, typ: int) -> bool:
    return (
        name in (".hip_fatbin", ".nv_fatbin", "__nv_relfatbin", ".llvm.offloading")
        or typ == elf.SHT_LLVM_OFFLOADING
        or name.startswith("__CLANG_OFFLOAD_BUNDLE__")
    )


def _plan_elf(src: Source, hdr: elf.ElfHeader, sel: Selector) -> FileResult:
    if hdr.machine in (elf.EM_AMDGPU, elf.EM_CUDA):
        if hdr.machine == elf.EM_AMDGPU:
            target = amdgpu.code_object_container(hdr).targets[0]
        else:
            target = cubin.cubin_container(src, hdr).targets[0]
        if elf.read_sections(src, hdr, lambda n, t: False).data_end > src.size:
            raise FormatError(f"truncated: the {target} code object is cut short")
        if sel.keeps(target):
            return FileResult("unchanged", kept=[target])
        return FileResult("dropped", dropped=[target])
    table = elf.read_sections(src, hdr, _wanted)
    if table.data_end > src.size:
        raise FormatError(f"truncated: sections end at 0x{table.data_end:x}, the file has {src.size} bytes")
    plan = Plan()
    sections = sorted((s for s in table.sections if s.type != elf.SHT_NOBITS and s.size), key=lambda s: s.offset)
    if not sections:
        return FileResult("none")
    for sec in sections:
        if sec.name.startswith("__CLANG_OFFLOAD_BUNDLE__"):
            raise CannotThin("a relocatable object with one bundle section per target")
        if sec.flags & elf.SHF_COMPRESSED:
            raise CannotThin(f"{sec.name} is a compressed ELF section")
        if sec.name == ".hip_fatbin":
            p, _e = _walk(src, sec.offset, sec.end, _HIP, sel, sec.name)
        elif sec.name in (".nv_fatbin", "__nv_relfatbin"):
            p, _e = _walk(src, sec.offset, sec.end, _NV, sel, sec.name)
        else:
            p = plan_offloading(src, sec.offset, sec.end, sel)
        plan.extend(p)
    return _result(plan)


def _result(plan: Plan, new_size: int | None = None) -> FileResult:
    if not plan.kept and not plan.dropped:
        return FileResult("none")
    if not plan.dropped:
        return FileResult("unchanged", kept=plan.kept)
    return FileResult("thinned", kept=plan.kept, dropped=plan.dropped, plan=plan, new_size=new_size)


def plan_file(buf: Buffer, sel: Selector) -> FileResult:
    """What thinning does to the file whose bytes are ``buf``; raises FormatError when damaged."""
    src = BytesSource(buf)  # type: ignore[arg-type]  # bytearray and mmap are both buffers
    head = src.read(0, 64)
    try:
        if head[:4] == elf.ELF_MAGIC:
            return _plan_elf(src, elf.read_header(src), sel)
        if head[:4] == offload_binary.OFFLOAD_MAGIC:
            raise CannotThin("a standalone OffloadBinary file")
        if head[:4] in _MAGICS:
            planners = _NV if head[:4] == fatbin.FATBIN_MAGIC else _HIP_FILE
            plan, end = _walk(src, 0, src.size, planners, sel, "file")
            if plan.dropped and not plan.kept:
                return FileResult("dropped", dropped=plan.dropped)
            return _result(plan, end)
    except CannotThin as exc:
        return FileResult("kept-whole", reason=str(exc))
    return FileResult("none")


def audit_agrees(buf: Buffer, result: FileResult, name: str) -> str:
    """'' when the audit of the rewritten bytes finds no problem and only kept targets.

    A fatbin container emptied by thinning reads back as holding no entries: expected.
    """
    report = audit_bytes(buf, name)  # type: ignore[arg-type]  # any buffer works
    problems = [p for p in report.problems if "holds no entries" not in p]
    if problems:
        return f"the rewritten file does not read back cleanly ({problems[0]})"
    extra = [t for c in report.containers for t in c.targets if t not in result.kept]
    if extra:
        return f"the rewritten file still holds {', '.join(sorted(set(extra)))}"
    return ""


def thin_buffer(buf: Buffer, sel: Selector, name: str = "file", *, compact: bool = True) -> FileResult:
    """Plan, apply and check; with ``compact``, a thinned library is compacted too (``data``).
    The buffer changes only for a ``thinned`` result, or for a ``kept-whole`` one with
    ``restore`` set: the caller must then put the original back."""
    result = plan_file(buf, sel)
    if result.action != "thinned" or result.plan is None:
        return result
    result.plan.apply(buf)
    view = memoryview(buf)[: result.new_size] if result.new_size is not None else buf
    problem = audit_agrees(view, result, name)
    if problem:
        return FileResult("kept-whole", kept=result.kept, reason=problem, restore=True)
    if result.new_size is None and buf[:4] == elf.ELF_MAGIC:
        return _compacted(buf, result, name) if compact else _in_place(result, "not asked for")
    return result


def _in_place(result: FileResult, why: str) -> FileResult:
    result.layout, result.layout_reason = "in place", why
    return result


def _compacted(buf: Buffer, result: FileResult, name: str) -> FileResult:
    """The thinned library compacted, when its layout allows and its audit stays the same."""

    def facts(data: Buffer) -> tuple[object, ...]:
        r = audit_bytes(data, name)  # type: ignore[arg-type]  # any buffer works
        return r.targets, r.complete, r.modules, r.problems

    before = facts(buf)
    data, why = compacted(buf)
    if facts(data if data is not None else buf) != before:  # (a failed cut may leave buf packed)
        return FileResult(
            "kept-whole",
            kept=result.kept,
            restore=True,
            reason="the compacted file does not read back as the thinned one",
        )
    if data is None:
        return _in_place(result, why)
    result.data, result.layout = data, "compacted"
    return result
