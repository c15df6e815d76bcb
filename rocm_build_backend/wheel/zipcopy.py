"""The one zip writer trick: a member's compressed bytes copied into a new wheel as they are.

``zipfile`` has no public way to add a member from already-compressed bytes, so
``begin_raw``/``end_raw`` write its local header and register it with ``zipfile``'s private
fields (``fp``, ``start_dir``, ``filelist``, ``NameToInfo``, ``_writecheck``, ``_didModify``,
``_writing``). This module is the only one that touches them, and only after ``can_copy_raw``
has checked that they are there (a Python whose ``zipfile`` changed falls back to
recompressing, never to a broken wheel). ``rewrite`` and ``thin.stream`` copy members through
it; a large extension module is then never recompressed. The version matrix
(``tests/integration/test_version_matrix.py``) checks the raw copy in every CPython the shim
supports (3.10 to 3.14) that is installed.

``pump_member`` reads a member's compressed bytes in bounded chunks and checks its size and
CRC against the zip directory as they go by, so a damaged member is refused, not copied;
``copy_stream`` copies inflated bytes in chunks. Every byte of member data copied raw goes
through ``_emit`` (one place to watch it).

It knows nothing of stamps, RECORD or names; it never reads a member whole into memory.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from typing import IO, Callable, Protocol

from rocm_build_backend.errors import WheelError

CHUNK = 1 << 20
#: what begin_raw/end_raw use of a ZipFile open for writing, beyond its public API
_PRIVATE = ("fp", "start_dir", "filelist", "NameToInfo", "_writecheck", "_didModify", "_writing")


class Digest(Protocol):
    """What a hashlib object offers that the copy uses."""

    def update(self, data: bytes, /) -> None: ...

    def digest(self) -> bytes: ...


def _emit(dst: IO[bytes], chunk: bytes) -> None:
    """Every byte of member data copied raw into the new wheel goes through here."""
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


def new_info(info: zipfile.ZipInfo, name: str) -> zipfile.ZipInfo:
    """A fresh ZipInfo for ``info``'s member under ``name``: its date, compression, mode, comment."""
    zinfo = zipfile.ZipInfo(name, date_time=info.date_time)
    zinfo.compress_type = info.compress_type
    zinfo.create_system = info.create_system
    zinfo.external_attr = info.external_attr
    zinfo.comment = info.comment
    return zinfo


def can_copy_raw(zout: zipfile.ZipFile, info: zipfile.ZipInfo) -> bool:
    """Whether ``info`` can be copied without recompressing: stored or deflated, not
    encrypted, and ``zout`` has the private fields the copy uses and no member open."""
    return (
        info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
        and not info.flag_bits & 0x1
        and all(hasattr(zout, a) for a in _PRIVATE)
        and not getattr(zout, "_writing")
    )


def data_start(src: IO[bytes], info: zipfile.ZipInfo, total: int) -> int:
    """Where a member's compressed bytes start (after its local header, which is checked)."""
    src.seek(info.header_offset)
    head = src.read(30)
    if len(head) != 30 or head[:4] != b"PK\x03\x04":
        raise WheelError(f"{info.filename}: no local file header where the zip directory says")
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    start: int = info.header_offset + 30 + int(name_len) + int(extra_len)
    if start + info.compress_size > total:
        raise WheelError(f"{info.filename}: its data runs past the end of the wheel")
    return start


def reader_at(src: IO[bytes], start: int) -> Callable[[int], bytes]:
    """``read(n)`` from ``start`` on, seeking each time (other readers may share the file)."""
    pos = start

    def read(n: int) -> bytes:
        nonlocal pos
        src.seek(pos)
        chunk = src.read(n)
        pos += len(chunk)
        return chunk

    return read


def begin_raw(zout: zipfile.ZipFile, zinfo: zipfile.ZipInfo, info: zipfile.ZipInfo) -> IO[bytes]:
    """Write the local header of ``zinfo``, whose compressed bytes (sizes and CRC from
    ``info``) follow as they are; returns the file to write them to. Only after
    ``can_copy_raw(zout, info)``."""
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


def end_raw(zout: zipfile.ZipFile, zinfo: zipfile.ZipInfo, out: IO[bytes]) -> None:
    """Register the member ``begin_raw`` started, once its compressed bytes are written."""
    zout.start_dir = out.tell()
    zout.filelist.append(zinfo)
    zout.NameToInfo[zinfo.filename] = zinfo


def pump_member(
    read: Callable[[int], bytes],
    info: zipfile.ZipInfo,
    *,
    raw_sink: Callable[[bytes], None] | None,
    take: Callable[[bytes], None],
) -> int:
    """Read a stored or deflated member's compressed bytes with ``read(n)`` (positioned at its
    data), give them to ``raw_sink`` and the inflated bytes to ``take``, in bounded chunks.

    The size and CRC are checked against the zip directory as the bytes go by, so a damaged
    member is a WheelError, never passed on whole. Returns the member's size.
    """
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


def copy_raw(
    src: IO[bytes],
    total: int,
    info: zipfile.ZipInfo,
    zout: zipfile.ZipFile,
    zinfo: zipfile.ZipInfo,
    take: Callable[[bytes], None],
) -> int:
    """Copy a member's compressed bytes as they are; the inflated bytes go to ``take`` (a
    hash), checked for size and CRC on the way. Only after ``can_copy_raw(zout, info)``.

    Recompressing a large extension module costs far more than reading it; the bytes written
    are the same compressed stream the backend made.
    """
    read = reader_at(src, data_start(src, info, total))
    out = begin_raw(zout, zinfo, info)
    size = pump_member(read, info, raw_sink=lambda chunk: _emit(out, chunk), take=take)
    end_raw(zout, zinfo, out)
    return size


def copy_checked(
    src: IO[bytes], total: int, info: zipfile.ZipInfo, zout: zipfile.ZipFile, zinfo: zipfile.ZipInfo
) -> None:
    """Copy the compressed bytes of a member already read and checked (by ``pump_member``)
    as they are, without inflating them again. Only after ``can_copy_raw(zout, info)``."""
    read = reader_at(src, data_start(src, info, total))
    out = begin_raw(zout, zinfo, info)
    left = info.compress_size
    while left:
        chunk = read(min(CHUNK, left))
        if not chunk:
            raise WheelError(f"{info.filename}: the wheel ends inside it")
        _emit(out, chunk)
        left -= len(chunk)
    end_raw(zout, zinfo, out)
