"""Zip member streaming for ``thin``: read one member into a bounded buffer, copy a member's
compressed bytes as they are (through ``wheel.zipcopy``, the one module that writes raw zip
members), write a buffer as a new deflated member.

Every member's data is checked against the zip directory (size and CRC) as it is read, so
a damaged member is an error, never copied on. A member is held in memory up to
``MEMORY_CAP`` bytes inflated; a larger one is inflated into an unlinked temporary file in
the output folder and mapped (``mmap``), so memory stays bounded whatever the wheel holds.
Nothing here decides what to thin, and nothing prints.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import zipfile
import zlib
from typing import IO, Any, Callable, Union

from rocm_build_backend.errors import WheelError
from rocm_build_backend.wheel import zipcopy
from rocm_build_backend.wheel.zipcopy import CHUNK, new_info

__all__ = ["MEMORY_CAP", "Buffer", "read_member", "head_of", "new_info", "copy_raw",
           "copy_compressed", "write_buffer", "file_size"]

MEMORY_CAP = 256 << 20  # a member larger than this (inflated) goes through a temporary file
Buffer = Union[bytearray, mmap.mmap]


def _chunks(zf: zipfile.ZipFile, raw: IO[bytes], info: zipfile.ZipInfo, total: int,
            sink: Callable[[bytes], None]) -> int:
    """Feed the member's inflated bytes to ``sink(bytes)``, checking size and CRC. Returns the size."""
    if info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        read = zipcopy.reader_at(raw, zipcopy.data_start(raw, info, total))
        return zipcopy.pump_member(read, info, raw_sink=None, take=sink)
    size = crc = 0
    try:
        with zf.open(info) as fh:
            while chunk := fh.read(CHUNK):
                size += len(chunk)
                if size > info.file_size:
                    raise WheelError(f"{info.filename} is damaged: it inflates past its recorded size")
                crc = zlib.crc32(chunk, crc)
                sink(chunk)
    except (zipfile.BadZipFile, EOFError, NotImplementedError, RuntimeError, ValueError, OSError) as exc:
        raise WheelError(f"{info.filename} is damaged: {exc}") from None
    if size != info.file_size or crc != info.CRC:
        raise WheelError(f"{info.filename} is damaged: its size or CRC differs from the zip directory")
    return size


class _Filler:
    def __init__(self, buf: Buffer) -> None:
        self.buf, self.pos = buf, 0

    def __call__(self, data: bytes) -> None:
        self.buf[self.pos : self.pos + len(data)] = data
        self.pos += len(data)


def read_member(zf: zipfile.ZipFile, raw: IO[bytes], info: zipfile.ZipInfo, total: int,
                tmpdir: str) -> Buffer:
    """The member's bytes in a writable buffer of exactly its size (checked)."""
    if info.file_size <= MEMORY_CAP:
        buf: Buffer = bytearray(info.file_size)
    else:
        fh = tempfile.TemporaryFile(dir=tmpdir)
        try:
            fh.truncate(info.file_size)
            buf = mmap.mmap(fh.fileno(), info.file_size)
        finally:
            fh.close()  # the mapping keeps the (unlinked) file alive
    if info.file_size:
        _chunks(zf, raw, info, total, _Filler(buf))
    return buf


def head_of(zf: zipfile.ZipFile, info: zipfile.ZipInfo, n: int = 64) -> bytes:
    """The member's first ``n`` bytes (its magic)."""
    try:
        with zf.open(info) as fh:
            return fh.read(n)
    except (zlib.error, zipfile.BadZipFile, EOFError, NotImplementedError, RuntimeError, ValueError) as exc:
        raise WheelError(f"{info.filename} is damaged: {exc}") from None


def copy_raw(zf: zipfile.ZipFile, raw: IO[bytes], total: int, info: zipfile.ZipInfo,
             zout: zipfile.ZipFile, zinfo: zipfile.ZipInfo, digest: Any) -> int:
    """Copy a stored or deflated member's compressed bytes unchanged (hashing the inflated
    bytes on the side); other compressions are recompressed through zipfile."""
    if not zipcopy.can_copy_raw(zout, info):
        zinfo.file_size = info.file_size
        with zout.open(zinfo, "w", force_zip64=info.file_size > zipfile.ZIP64_LIMIT) as w:
            def sink(data: bytes) -> None:
                digest.update(data)
                w.write(data)

            return _chunks(zf, raw, info, total, sink)
    return zipcopy.copy_raw(raw, total, info, zout, zinfo, digest.update)


def copy_compressed(raw: IO[bytes], total: int, info: zipfile.ZipInfo, zout: zipfile.ZipFile,
                    zinfo: zipfile.ZipInfo, buf: Buffer, digest: Any) -> int:
    """A member already read (and checked) into ``buf``: hash ``buf``, copy the compressed
    bytes as they are when the compression allows, else write ``buf`` compressed again."""
    if not zipcopy.can_copy_raw(zout, info):
        return write_buffer(zout, zinfo, buf, len(buf), digest)
    view = memoryview(buf)
    for pos in range(0, len(buf), CHUNK):
        digest.update(view[pos : pos + CHUNK])
    view.release()
    zipcopy.copy_checked(raw, total, info, zout, zinfo)
    return len(buf)


def write_buffer(zout: zipfile.ZipFile, zinfo: zipfile.ZipInfo, buf: Buffer | bytes, size: int,
                 digest: Any) -> int:
    """Write ``buf[:size]`` as a new member, in chunks."""
    zinfo.file_size = size
    view = memoryview(buf)
    with zout.open(zinfo, "w", force_zip64=size > zipfile.ZIP64_LIMIT) as w:
        for pos in range(0, size, CHUNK):
            piece = view[pos : min(size, pos + CHUNK)]
            digest.update(piece)
            w.write(piece)
    view.release()
    return size


def file_size(path: str) -> int:
    return os.stat(path).st_size
