"""After thinning: the kept device code of a library packed to the front of its sections, and
the freed rest cut out of the file (``layout``), so the installed file shrinks too.

Thinning rewrites containers in place and leaves zeros where dropped code was: after each
container, and inside an uncompressed bundle between its kept code objects. ``compacted``

- packs each device section: an uncompressed bundle is rebuilt with its kept code objects
  one after the other (``rewrite_amd.compact_bundle``: byte-identical, at the alignment they
  had); a compressed bundle loses the padding thinning put after its payload (its header then
  gives its true size, as the compiler writes it); a fatbin is already packed; each container
  then moves down to the first place at the same alignment (modulo the section's alignment);
- points every reference at the moved containers (the registration records the loader
  relocates, ``references``); a moved container that nothing points at, or a pointer into a
  container's middle, keeps the whole section as it is;
- cuts the zeros after the last container out of the file.

Addresses of everything else stay as they were. Returns None with the reason when the file
keeps its layout. It neither reads wheels nor prints.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rocm_build_backend.binary import bundle, ccob, decompression, elf, fatbin, layout, walk
from rocm_build_backend.binary.elf import BytesSource, Source
from rocm_build_backend.binary.layout import CannotCompact, Data
from rocm_build_backend.binary.references import Reference, references, retarget
from rocm_build_backend.binary.rewrite_amd import entries_alignment, compact_bundle, read_entries
from rocm_build_backend.errors import FormatError

HIP, NV = ".hip_fatbin", (".nv_fatbin", "__nv_relfatbin")
NOTHING = "too little to cut: less than a page (or than the segment alignment) was freed"


@dataclass
class _Piece:
    start: int  # file offset now
    data: bytes | None  # the container's new bytes, or None: its bytes as they are
    length: int  # its length once packed
    span: int = 0  # the bytes it takes now (thinning may have padded it), when more than length


def _ccob_piece(src: Source, whole: memoryview, pos: int, end: int) -> _Piece:
    """A compressed bundle without the padding after its payload, its header's total to match."""
    version, method = struct.unpack_from("<HH", src.read(pos + 4, 4))
    hsize = {1: 20, 2: 24, 3: 32}.get(version)
    if hsize is None:
        raise CannotCompact(f"a compressed bundle of version {version}")
    pstart = pos + hsize
    if method == 1:
        length, _content = decompression.zstd_frame(src, pstart, end)
    else:
        length = decompression.zlib_stream_length(src, pstart, end)
    head = bytearray(src.read(pos, hsize))
    total = hsize + length
    if version == 2:
        struct.pack_into("<I", head, 8, total)
    elif version == 3:
        struct.pack_into("<Q", head, 8, total)
    span = total
    if version in (2, 3):  # thinning may have padded it with a skippable frame up to the old total
        span = struct.unpack_from("<I" if version == 2 else "<Q", src.read(pos + 8, 8))[0]
    return _Piece(pos, bytes(head) + bytes(whole[pstart : pstart + length]), total, max(span, total))


def _bundle_piece(src: Source, whole: memoryview, pos: int, end: int) -> _Piece:
    """An uncompressed bundle rebuilt with its code objects packed after its entry table (read
    from the file's bytes in memory: a code object may be larger than one source read)."""
    entries, _table_end, bundle_end = read_entries(src, pos, end)
    new = compact_bundle(whole[pos:bundle_end], entries, entries_alignment(entries))
    return _Piece(pos, new, len(new), bundle_end - pos)


def _pieces(whole: memoryview, start: int, stop: int, name: str) -> list[_Piece]:
    """The containers of one section, with their bytes once packed."""
    src = BytesSource(whole)
    out: list[_Piece] = []
    pos = start
    while pos < stop:
        pos = walk.skip_zeros(src, pos, stop)
        if pos >= stop:
            break
        magic = src.read(pos, 4)
        if name in NV and magic == fatbin.FATBIN_MAGIC:
            _m, _v, hsize, fat_size = struct.unpack("<4sHHQ", src.read(pos, 16))
            piece = _Piece(pos, None, hsize + fat_size)
        elif name == HIP and magic == bundle.BUNDLE_MAGIC[:4]:
            piece = _bundle_piece(src, whole, pos, stop)
        elif name == HIP and magic == ccob.CCOB_MAGIC:
            piece = _ccob_piece(src, whole, pos, stop)
        else:
            raise CannotCompact(f"{name}: a container this tool does not move")
        if piece.length <= 0 or pos + piece.length > stop:
            raise CannotCompact(f"{name}: a container that does not fit its section")
        out.append(piece)
        pos += max(piece.length, piece.span, 1)
        if piece.data is not None and len(piece.data) != piece.length:
            raise CannotCompact(f"{name}: a container whose bytes do not match its length")
    return out


@dataclass
class _Packing:
    index: int
    moves: list[tuple[_Piece, int]]
    refs: list[tuple[Reference, int]]  # each pointer and the address it gets
    end: int  # file offset where the packed containers end
    kept: int  # bytes the section keeps in the file


def _plan_pack(
    buf: Data, hdr: elf.ElfHeader, segs: list[layout.Segment], shdrs: list[list[int]], index: int, name: str
) -> _Packing | None:
    """How section ``index`` packs (nothing changed yet); None when there is little to gain."""
    sh = shdrs[index]
    start, size, addr = sh[4], sh[5], sh[3]
    align = max(8, sh[8])
    pieces = _pieces(memoryview(buf), start, start + size, name)
    if not pieces:
        return None
    moves: list[tuple[_Piece, int]] = []
    cursor = start
    for p in pieces:
        new = cursor + (p.start - cursor) % align
        moves.append((p, new))
        cursor = new + p.length
    if cursor > start + size - layout.MIN_CUT:
        return None
    moved = {p.start: new for p, new in moves if new != p.start}
    refs = references(buf, hdr.machine, segs, shdrs, addr, addr + size) if moved else []
    starts = {p.start for p in pieces}
    if any(ref.target - addr + start not in starts for ref in refs):
        raise CannotCompact(f"{name}: a pointer into the middle of device code")
    pointed = {ref.target - addr + start for ref in refs}
    if any(old not in pointed for old in moved):
        raise CannotCompact(f"{name}: a container that moves has no pointer to it")
    changes = [
        (ref, addr + moved[ref.target - addr + start] - start) for ref in refs if ref.target - addr + start in moved
    ]
    return _Packing(index, moves, changes, cursor, -(-(cursor - start) // 8) * 8)


def _apply(buf: Data, shdrs: list[list[int]], p: _Packing) -> None:
    view = memoryview(buf)
    for ref, new_addr in p.refs:
        retarget(buf, ref, new_addr)
    for piece, new in p.moves:  # in file order, each lands at or before where it was
        data = piece.data if piece.data is not None else bytes(view[piece.start : piece.start + piece.length])
        view[new : new + piece.length] = data
    stop = shdrs[p.index][4] + shdrs[p.index][5]
    gaps = [(new + piece.length, nxt) for (piece, new), (_n, nxt) in zip(p.moves, p.moves[1:])]
    for pos, end in gaps + [(p.end, stop)]:  # between the containers and after the last: zeros
        while pos < end:
            n = min(end - pos, 1 << 20)
            view[pos : pos + n] = bytes(n)
            pos += n
    view.release()


def compacted(buf: Data) -> tuple[bytearray | None, str]:
    """The library in ``buf`` with its device sections packed and their free tail cut from the
    file: (new bytes, "") or (None, why it keeps its layout). ``buf`` is packed in place only
    when the cut is possible; new bytes are then returned."""
    try:
        hdr = elf.read_header(BytesSource(buf))  # type: ignore[arg-type]
        if not hdr.is64 or hdr.endian != "<" or hdr.machine in (elf.EM_AMDGPU, elf.EM_CUDA):
            return None, "not a 64-bit little-endian host library"
        segs = layout.segments(buf, hdr)
        table = elf.read_sections(BytesSource(buf), hdr)  # type: ignore[arg-type]
        shdrs = layout.section_headers(buf, hdr)
        plans = []
        for sec in table.sections:
            if sec.name in NV or sec.name == HIP:
                plan = _plan_pack(buf, hdr, segs, shdrs, sec.index, sec.name)
                if plan is not None:
                    plans.append(plan)
        sizes = {p.index: p.kept for p in plans}
        if not plans or not layout.can_shrink(buf, sizes):
            return None, NOTHING
        for p in plans:
            _apply(buf, shdrs, p)
        out = layout.shrink_sections(buf, sizes)
    except (CannotCompact, FormatError) as exc:
        return None, str(getattr(exc, "message", None) or exc)
    return (out, "") if out is not None else (None, NOTHING)
