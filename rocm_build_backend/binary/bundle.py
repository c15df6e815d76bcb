"""Clang offload bundles (``__CLANG_OFFLOAD_BUNDLE__``): entry ids and the bundle reader.

Layout: ``clang/docs/ClangOffloadBundler.rst`` and ``OffloadBundler.cpp``. ``read_bundle``
reads one uncompressed bundle within its limit and records problems in the container; it
does not decompress (``ccob``) or walk sections (``walk``).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from rocm_build_backend.binary import magic
from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.amdgpu import amdgpu_code_object, canonical_target
from rocm_build_backend.binary.container import Container, add_note
from rocm_build_backend.binary.elf import BytesSource, FormatError, Source, msg, need

BUNDLE_MAGIC = magic.BUNDLE
MAX_ID = 4096  # a bundle entry id longer than this is not an id
MAX_ENTRIES = 4096  # real bundles hold one entry per target (tens); the list is kept in memory
_HOST_ARCHES = ("x86_64", "i386", "i686", "aarch64", "arm", "powerpc", "ppc64", "ppc64le", "riscv64", "s390x")


class BundleId(NamedTuple):
    kind: str  # host, hip, hipv4, hcc, openmp, ...
    triple: str
    target: str  # canonical target ID; "" for a host entry

    @property
    def is_host(self) -> bool:
        return self.kind == "host" or self.triple.split("-", 1)[0] in _HOST_ARCHES


def _looks_like_target(text: str) -> bool:
    return text.startswith(("gfx", "sm_", "amdgcnspirv")) or text == "generic"


def parse_bundle_id(text: str) -> BundleId:
    """``hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`` -> (hipv4, amdgcn-amd-amdhsa-, gfx90a:xnack-).

    The triple's environment is empty for AMDHSA, hence ``--``. Generic targets contain
    ``-`` themselves (``gfx9-4-generic``), so the target is everything after the triple.
    """
    kind, sep, rest = text.partition("-")
    if not sep or not kind:
        raise FormatError(f"bundle entry id {text!r} has no offload kind")
    parts = rest.split("-", 3)  # arch, vendor, os, remainder
    if len(parts) < 3:
        raise FormatError(f"bundle entry id {text!r} has no target triple")
    arch, vendor, os_ = parts[:3]
    remainder = parts[3] if len(parts) == 4 else ""
    env, target = "", ""
    if remainder.startswith("-"):  # empty environment: "--gfx90a"
        target = remainder[1:]
    elif remainder:
        head = remainder.split("-", 1)[0]
        if _looks_like_target(head):  # old style without environment: "-gfx906"
            target = remainder
        else:
            env, _, target = remainder.partition("-")
    triple = "-".join([arch, vendor, os_, env])
    return BundleId(kind, triple, canonical_target(target) if target else "")


def _valid_id(raw: bytes) -> str | None:
    text = raw.rstrip(b"\0")
    if not text or any(b < 0x21 or b > 0x7E for b in text):
        return None
    return text.decode("ascii")


def read_bundle(
    src: Source, offset: int, limit: int, where: str, *, cut: bool = False, kind: str = "bundle"
) -> tuple[Container, int | None]:
    """An uncompressed clang offload bundle at ``offset``; entries may not pass ``limit``.

    ``cut`` says ``limit`` is where the data stops (a truncated file), not where the
    container must end: an entry past it is then reported as cut off, and its target kept.
    """
    head = need(src, offset, 32, "offload bundle header")
    if head[:24] != BUNDLE_MAGIC:
        raise FormatError("not a clang offload bundle")
    (claimed,) = struct.unpack_from("<Q", head, 24)
    c = Container(kind, where, offset)
    entries, pos, stop = _read_entry_table(src, offset, limit, claimed, cut)
    if len(entries) < claimed:
        reason = stop or "they do not fit in the container"
        c.problems.append(f"bundle at 0x{offset:x} claims {claimed} entries, {len(entries)} read ({reason})")
    if not entries:
        raise FormatError(c.problems[0] if c.problems else "offload bundle with no entries")
    end = _read_code_objects(src, c, entries, offset, limit, cut)
    return c, max(pos, end)


def _read_entry_table(
    src: Source, offset: int, limit: int, claimed: int, cut: bool
) -> tuple[list[tuple[str, int, int]], int, str]:
    """(entries as (id, offset, size), where the table ends, why it stopped early)."""
    pos = offset + 32
    first_code = limit
    entries: list[tuple[str, int, int]] = []
    max_entries = max(0, (limit - offset - 32) // 25)  # every entry takes at least 25 bytes
    if claimed > MAX_ENTRIES and max_entries > MAX_ENTRIES:
        max_entries = MAX_ENTRIES
        too_many = f"too many entries: at most {MAX_ENTRIES} are read"
    else:
        too_many = ""
    for i in range(min(claimed, max_entries)):
        if pos + 24 > min(limit, first_code):
            stop = (
                "the entry table runs into the code objects"
                if pos + 24 <= limit
                else "the entry table runs past the end"
            )
            return entries, pos, stop
        raw = src.read(pos, 24)
        if len(raw) < 24:
            return entries, pos, "truncated: the entry table is cut short"
        eoff, esize, idlen = struct.unpack("<QQQ", raw)
        if idlen == 0 or idlen > MAX_ID:
            return entries, pos, f"entry {i} has an impossible id length {idlen}"
        if pos + 24 + idlen > limit:
            return (
                entries,
                pos,
                "truncated: the entry table is cut short" if cut else "the entry table runs past the end",
            )
        idraw = src.read(pos + 24, idlen)
        if len(idraw) < idlen:
            return entries, pos, "truncated: the entry table is cut short"
        ident = _valid_id(idraw)
        if ident is None:
            return entries, pos, f"entry {i} has an id that is not text"
        entries.append((ident, eoff, esize))
        pos += 24 + idlen
        if eoff and offset + eoff < first_code and eoff >= 32:
            first_code = offset + eoff
    return entries, pos, too_many


def _read_code_objects(
    src: Source, c: Container, entries: list[tuple[str, int, int]], offset: int, limit: int, cut: bool
) -> int:
    """Targets of the device entries into ``c``; returns where the last code object ends."""
    end = 0
    notes: set[str] = set()
    # read code objects in file order: with an inflated zip member this stays one forward pass
    for ident, eoff, esize in sorted(entries, key=lambda e: e[1]):
        try:
            bid = parse_bundle_id(ident)
        except FormatError as exc:
            c.problems.append(msg(exc))
            continue
        if bid.is_host:
            continue
        if esize == 0:
            c.problems.append(f"entry {ident} has no code object (size 0)")
            continue
        start = offset + eoff
        if eoff == 0 or eoff < 32 or start + esize > limit or esize > (1 << 62):
            if cut and eoff >= 32 and start < (1 << 62):
                c.problems.append(f"truncated: the code object of {ident} is cut off")
                c.targets.append(bid.target)
                continue
            c.problems.append(
                f"entry {ident}: code object at +0x{eoff:x} ({esize} bytes) lies outside the "
                f"bundle ({limit - offset} bytes)"
            )
            continue
        end = max(end, start + esize)
        if not bid.target:
            c.problems.append(f"entry {ident} names no target")
            continue
        c.targets.append(bid.target)
        head = src.read(start, 64)
        if len(head) < 64:
            if cut:
                c.problems.append(f"truncated: the code object of {ident} is cut off")
            continue
        problem, note = _check_code_object(head, bid, ident)
        if problem:
            c.problems.append(problem)
        if note:
            notes.add(note)
    for note in sorted(notes):
        add_note(c, note)
    return end


def _check_code_object(head: bytes, bid: BundleId, ident: str) -> tuple[str, str]:
    """Cross-check a bundle entry id against its code object's e_flags; (problem, note)."""
    if head[:4] == b"BC\xc0\xde" or head[:4] == b"\xde\xc0\x17\x0b":
        return "", "LLVM bitcode (linked at load time), not machine code"
    if head[:4] != _elf.ELF_MAGIC:
        return "", ""
    try:
        hdr = _elf.read_header(BytesSource(head))
    except FormatError:
        return f"entry {ident}: damaged code object header", ""
    if hdr.machine != _elf.EM_AMDGPU:
        return "", ""
    info = amdgpu_code_object(hdr)
    if not info.known:
        return "", f"unknown EF_AMDGPU_MACH {info.processor[5:]}"
    want = bid.target
    got = info.target
    if info.version is not None and info.version <= 3:
        want, got = want.split(":")[0], info.processor
    if want != got:
        return f"entry {ident} holds a code object for {got}", ""
    return "", ""
