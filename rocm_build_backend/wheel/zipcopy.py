"""Copying one zip member into a new wheel, hashing it on the way: as a stream, or raw.

``copy_stream`` copies inflated bytes in bounded chunks; ``copy_raw`` copies a deflated or
stored member's compressed bytes as they are (a large extension module is not recompressed)
and inflates them on the side only to hash them and check their size and CRC against the
zip's central directory, so a damaged member is refused, not copied. Every byte written goes
through ``_emit`` (one place to watch it).

It knows nothing of stamps, RECORD or names; it never reads a member whole into memory.
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Callable, Protocol

from rocm_build_backend.errors import WheelError

if TYPE_CHECKING:  # pragma: no cover
    import zipfile

CHUNK = 1 << 20


class Digest(Protocol):
    """What a hashlib object offers that the copy uses."""

    def update(self, data: bytes, /) -> None: ...

    def digest(self) -> bytes: ...


def _emit(dst: IO[bytes], chunk: bytes) -> None:
    """Every byte of member data written to the new wheel goes through here."""
    dst.write(chunk)


def copy_stream(src: IO[bytes], dst: IO[bytes], digest: Digest) -> int:
    """Copy a member in bounded chunks, hashing as it goes; returns the byte count."""
    size = 0
    while True:
        chunk = src.read(CHUNK)
        if not chunk:
            return size
        digest.update(chunk)
        _emit(dst, chunk)
        size += len(chunk)


def record_hash(digest: Digest) -> str:
    """A RECORD hash field: ``sha256=`` and the urlsafe base64 digest without padding."""
    import base64

    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")


def can_copy_raw(zout: "zipfile.ZipFile", info: "zipfile.ZipInfo") -> bool:
    """Whether ``info`` can be copied without recompressing (stored or deflated, not encrypted)."""
    import zipfile

    return (
        info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
        and not info.flag_bits & 0x1
        and all(hasattr(zout, a) for a in ("fp", "start_dir", "filelist", "NameToInfo", "_writecheck", "_writing"))
        and not getattr(zout, "_writing")
    )


def _seek_data(src_fp: IO[bytes], src_size: int, info: "zipfile.ZipInfo") -> None:
    """Move ``src_fp`` to the member's compressed bytes, checking its local header."""
    import struct

    src_fp.seek(info.header_offset)
    head = src_fp.read(30)
    if len(head) != 30 or head[:4] != b"PK\x03\x04":
        raise WheelError(f"{info.filename}: no local file header where the directory says")
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    start = info.header_offset + 30 + name_len + extra_len
    if start + info.compress_size > src_size:
        raise WheelError(f"{info.filename}: its data runs past the end of the wheel")
    src_fp.seek(start)


def _start_member(zout: "zipfile.ZipFile", info: "zipfile.ZipInfo", zinfo: "zipfile.ZipInfo") -> IO[bytes]:
    """Write ``zinfo``'s local header (sizes and CRC from ``info``) and return the output file."""
    import zipfile

    zinfo.compress_type = info.compress_type
    zinfo.file_size = info.file_size
    zinfo.compress_size = info.compress_size
    zinfo.CRC = info.CRC
    zinfo.flag_bits = 0
    zip64 = info.file_size > zipfile.ZIP64_LIMIT or info.compress_size > zipfile.ZIP64_LIMIT
    out: IO[bytes] = zout.fp  # type: ignore[assignment]  # an open ZipFile in "w" mode has its file
    out.seek(zout.start_dir)
    zinfo.header_offset = out.tell()
    zout._writecheck(zinfo)  # type: ignore[attr-defined]  # private API, presence checked by can_copy_raw
    zout._didModify = True  # type: ignore[attr-defined]  # private API, as above
    out.write(zinfo.FileHeader(zip64))
    return out


def pump_member(read: Callable[[int], bytes], info: "zipfile.ZipInfo", *,
                raw_sink: Callable[[bytes], None] | None, take: Callable[[bytes], None]) -> int:
    """Read a stored or deflated member's compressed bytes with ``read(n)`` (positioned at its
    data), give them to ``raw_sink`` and the inflated bytes to ``take``, in bounded chunks.

    The size and CRC are checked against the zip directory as the bytes go by, so a damaged
    member is a WheelError, never passed on whole. Returns the member's size.
    """
    import zipfile
    import zlib

    inflate = zlib.decompressobj(-15) if info.compress_type == zipfile.ZIP_DEFLATED else None
    size = crc = 0
    left = info.compress_size

    def inflated(data: bytes) -> None:
        nonlocal size, crc
        size += len(data)
        if size > info.file_size:
            raise WheelError(f"{info.filename} is damaged: it inflates past its recorded size")
        crc = zlib.crc32(data, crc)
        take(data)

    try:
        while left:
            chunk = read(min(CHUNK, left))
            if not chunk:
                raise WheelError(f"{info.filename}: the wheel ends inside it")
            left -= len(chunk)
            if raw_sink is not None:
                raw_sink(chunk)
            if inflate is None:
                inflated(chunk)
                continue
            data = inflate.decompress(chunk, CHUNK)
            while data:
                inflated(data)
                data = inflate.decompress(inflate.unconsumed_tail, CHUNK) if inflate.unconsumed_tail else b""
        if inflate is not None:
            inflated(inflate.flush())
            if not inflate.eof:
                raise WheelError(f"{info.filename} is damaged: its deflate stream is cut short")
    except zlib.error as exc:
        raise WheelError(f"{info.filename} is damaged: {exc}") from None
    if size != info.file_size or crc != info.CRC:
        raise WheelError(f"{info.filename} is damaged: its size or CRC differs from the zip directory")
    return size


def copy_raw(src_fp: IO[bytes], src_size: int, info: "zipfile.ZipInfo", zout: "zipfile.ZipFile",
             zinfo: "zipfile.ZipInfo", digest: Digest) -> int:
    """Copy a member's compressed bytes as they are; inflate on the side only to hash and check.

    Recompressing a large extension module costs far more than reading it; the bytes written
    are the same compressed stream the backend made. The CRC and size are checked against the
    central directory, so a damaged member is refused, not copied.
    """

    _seek_data(src_fp, src_size, info)
    out = _start_member(zout, info, zinfo)
    size = pump_member(src_fp.read, info, raw_sink=lambda chunk: _emit(out, chunk), take=digest.update)
    zout.start_dir = out.tell()
    zout.filelist.append(zinfo)
    zout.NameToInfo[zinfo.filename] = zinfo
    return size
