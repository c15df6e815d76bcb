"""Zip member streaming for ``thin``: read one member into a bounded buffer, copy a member's
compressed bytes as they are (through ``wheel.zipcopy``, the one module that writes raw zip
members), write a buffer as a new deflated member.

Every member's data is checked against the zip directory (size and CRC) as it is read, so
a damaged member is an error, never copied on. Every member inflated is charged, before it is
inflated, to the budget of the wheel being written (``binary.budget``: 64 times the wheel's
size plus 64 MiB). A member is held in memory up to ``MEMORY_CAP`` bytes inflated; a larger
one is inflated into an unlinked temporary file in the output folder (after checking the
folder has the space, and written with ``write`` so a full disk is an ``OSError``, never a
SIGBUS) and then mapped (``mmap``), so memory stays bounded whatever the wheel holds.
Nothing here decides what to thin, and nothing prints.
"""

from __future__ import annotations

import errno
import mmap
import os
import tempfile
import zipfile
import zlib
from typing import IO, Any, Callable, Union

from rocm_build_backend.binary.budget import charge
from rocm_build_backend.errors import WheelError
from rocm_build_backend.wheel import zipcopy
from rocm_build_backend.wheel.zipcopy import CHUNK, new_info

__all__ = [
    "MEMORY_CAP",
    "Buffer",
    "read_member",
    "head_of",
    "new_info",
    "copy_raw",
    "copy_compressed",
    "write_buffer",
    "file_size",
    "charge_member",
    "need_space",
    "release",
    "hash_member",
]

MEMORY_CAP = 256 << 20  # a member larger than this (inflated) goes through a temporary file
Buffer = Union[bytearray, mmap.mmap]


def _chunks(
    zf: zipfile.ZipFile, raw: IO[bytes], info: zipfile.ZipInfo, total: int, sink: Callable[[bytes], None]
) -> int:
    """Feed the member's inflated bytes to ``sink(bytes)``, checking size and CRC. Returns the size."""
    if info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        read = zipcopy.reader_at(raw, zipcopy.data_start(raw, info, total))
        return zipcopy.pump_member(read, info, raw_sink=None, take=sink)
    size = crc = 0
    with _opened(zf, info) as fh:
        while chunk := _read_some(fh, info):
            size += len(chunk)
            if size > info.file_size:
                raise WheelError(f"{info.filename} is damaged: it inflates past its recorded size")
            crc = zlib.crc32(chunk, crc)
            sink(chunk)  # its own errors (a full disk) are not the member's damage
    if size != info.file_size or crc != info.CRC:
        raise WheelError(f"{info.filename} is damaged: its size or CRC differs from the zip directory")
    return size


_DAMAGE = (zipfile.BadZipFile, EOFError, NotImplementedError, RuntimeError, ValueError, OSError, zlib.error)


def _opened(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> IO[bytes]:
    try:
        return zf.open(info)
    except _DAMAGE as exc:
        raise WheelError(f"{info.filename} is damaged: {exc}") from None


def _read_some(fh: IO[bytes], info: zipfile.ZipInfo) -> bytes:
    try:
        return fh.read(CHUNK)
    except _DAMAGE as exc:
        raise WheelError(f"{info.filename} is damaged: {exc}") from None


def charge_member(info: zipfile.ZipInfo) -> None:
    """Charge the wheel's budget for inflating ``info`` (its size as the directory says; the
    pump refuses a member that inflates past it)."""
    charge(info.file_size, f"{info.filename} inflated")


def need_space(folder: str, size: int) -> None:
    """OSError(ENOSPC) when ``folder``'s file system has fewer than ``size`` bytes free."""
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        return  # cannot tell: the writes will say
    if st.f_bavail * st.f_frsize < size:
        raise OSError(
            errno.ENOSPC,
            f"No space left on device: {size:,} bytes needed for a temporary copy, {st.f_bavail * st.f_frsize:,} free",
            folder,
        )


class _Filler:
    def __init__(self, buf: Buffer) -> None:
        self.buf, self.pos = buf, 0

    def __call__(self, data: bytes) -> None:
        self.buf[self.pos : self.pos + len(data)] = data
        self.pos += len(data)


def read_member(zf: zipfile.ZipFile, raw: IO[bytes], info: zipfile.ZipInfo, total: int, tmpdir: str) -> Buffer:
    """The member's bytes in a writable buffer of exactly its size (checked)."""
    charge_member(info)
    if info.file_size > MEMORY_CAP:
        return _mapped(zf, raw, info, total, tmpdir)
    buf = bytearray(info.file_size)
    if info.file_size:
        _chunks(zf, raw, info, total, _Filler(buf))
    return buf


def _mapped(zf: zipfile.ZipFile, raw: IO[bytes], info: zipfile.ZipInfo, total: int, tmpdir: str) -> mmap.mmap:
    """The member inflated into an unlinked temporary file in ``tmpdir``, then mapped: every
    byte is written before the mapping exists, so a full disk fails a write."""
    need_space(tmpdir, info.file_size)
    fh = tempfile.TemporaryFile(dir=tmpdir)
    try:
        _chunks(zf, raw, info, total, lambda data: None if fh.write(data) else None)
        fh.flush()
        return mmap.mmap(fh.fileno(), info.file_size)
    finally:
        fh.close()  # the mapping keeps the (unlinked) file alive


def release(buf: Buffer) -> None:
    """Close a mapped buffer; one still exported (a view kept by an exception being handled)
    is closed when the last view goes."""
    if isinstance(buf, mmap.mmap):
        try:
            buf.close()
        except BufferError:
            pass


def head_of(zf: zipfile.ZipFile, info: zipfile.ZipInfo, n: int = 64) -> bytes:
    """The member's first ``n`` bytes (its magic)."""
    try:
        with zf.open(info) as fh:
            return fh.read(n)
    except (zlib.error, zipfile.BadZipFile, EOFError, NotImplementedError, RuntimeError, ValueError) as exc:
        raise WheelError(f"{info.filename} is damaged: {exc}") from None


def copy_raw(
    zf: zipfile.ZipFile,
    raw: IO[bytes],
    total: int,
    info: zipfile.ZipInfo,
    zout: zipfile.ZipFile,
    zinfo: zipfile.ZipInfo,
    digest: Any,
) -> int:
    """Copy a stored or deflated member's compressed bytes unchanged (hashing the inflated
    bytes on the side); other compressions are recompressed through zipfile."""
    charge_member(info)
    if not zipcopy.can_copy_raw(zout, info):
        zinfo.file_size = info.file_size
        with zout.open(zinfo, "w", force_zip64=info.file_size > zipfile.ZIP64_LIMIT) as w:

            def sink(data: bytes) -> None:
                digest.update(data)
                w.write(data)

            return _chunks(zf, raw, info, total, sink)
    return zipcopy.copy_raw(raw, total, info, zout, zinfo, digest.update)


def copy_compressed(
    raw: IO[bytes],
    total: int,
    info: zipfile.ZipInfo,
    zout: zipfile.ZipFile,
    zinfo: zipfile.ZipInfo,
    buf: Buffer,
    digest: Any,
) -> int:
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


def write_buffer(zout: zipfile.ZipFile, zinfo: zipfile.ZipInfo, buf: Buffer | bytes, size: int, digest: Any) -> int:
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


def hash_member(zf: zipfile.ZipFile, raw: IO[bytes], info: zipfile.ZipInfo, total: int, digest: Any) -> None:
    """Feed the member's inflated bytes to ``digest`` (checked, charged), keeping none."""
    charge_member(info)
    _chunks(zf, raw, info, total, digest.update)


def file_size(path: str) -> int:
    return os.stat(path).st_size
