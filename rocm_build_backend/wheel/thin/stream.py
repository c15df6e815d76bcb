"""Zip member streaming for ``thin``: read one member into a bounded buffer, copy a member's
compressed bytes as they are, write a buffer as a new deflated member.

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

import mmap
import os
import struct
import tempfile
import zipfile
import zlib
from typing import IO, Any, Union

from rocm_build_backend.errors import WheelError

CHUNK = 1 << 20
MEMORY_CAP = 256 << 20  # a member larger than this (inflated) goes through a temporary file
Buffer = Union[bytearray, mmap.mmap]


def data_start(raw: IO[bytes], info: zipfile.ZipInfo, total: int) -> int:
    """Where a member's compressed bytes start (after its local header)."""
    raw.seek(info.header_offset)
    head = raw.read(30)
    if len(head) != 30 or head[:4] != b"PK\x03\x04":
        raise WheelError(f"{info.filename}: no local file header where the zip directory says")
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    start: int = info.header_offset + 30 + int(name_len) + int(extra_len)
    if start + info.compress_size > total:
        raise WheelError(f"{info.filename}: its data runs past the end of the wheel")
    return start


def _chunks(zf: zipfile.ZipFile, raw: IO[bytes], info: zipfile.ZipInfo, total: int, sink: Any) -> int:
    """Feed the member's inflated bytes to ``sink(bytes)``, checking size and CRC; the
    compressed bytes go to ``sink.raw(bytes)`` when it has one. Returns the size."""
    from rocm_build_backend.wheel.zipcopy import pump_member

    raw_sink = getattr(sink, "raw", None)
    if info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        pos = data_start(raw, info, total)

        def read(n: int) -> bytes:  # seek each time: the sinks may share the file
            nonlocal pos
            raw.seek(pos)
            chunk = raw.read(n)
            pos += len(chunk)
            return chunk

        return pump_member(read, info, raw_sink=raw_sink, take=sink)
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
    from rocm_build_backend.binary.budget import charge

    charge(info.file_size, f"{info.filename} inflated")


def need_space(folder: str, size: int) -> None:
    """OSError(ENOSPC) when ``folder``'s file system has fewer than ``size`` bytes free."""
    import errno

    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        return  # cannot tell: the writes will say
    if st.f_bavail * st.f_frsize < size:
        raise OSError(errno.ENOSPC, f"No space left on device: {size:,} bytes needed for a temporary copy, "
                                    f"{st.f_bavail * st.f_frsize:,} free", folder)


class _Filler:
    def __init__(self, buf: Buffer) -> None:
        self.buf, self.pos = buf, 0

    def __call__(self, data: bytes) -> None:
        self.buf[self.pos : self.pos + len(data)] = data
        self.pos += len(data)


def read_member(zf: zipfile.ZipFile, raw: IO[bytes], info: zipfile.ZipInfo, total: int,
                tmpdir: str) -> Buffer:
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
        _chunks(zf, raw, info, total, fh.write)
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


def new_info(info: zipfile.ZipInfo, name: str) -> zipfile.ZipInfo:
    z = zipfile.ZipInfo(name, date_time=info.date_time)
    z.compress_type = info.compress_type
    z.create_system = info.create_system
    z.external_attr = info.external_attr
    z.comment = info.comment
    return z


class _RawSink:
    def __init__(self, out: IO[bytes], digest: Any) -> None:
        self.out, self.digest = out, digest

    def __call__(self, data: bytes) -> None:
        self.digest.update(data)

    def raw(self, data: bytes) -> None:
        self.out.write(data)


def _can_copy(info: zipfile.ZipInfo, zout: zipfile.ZipFile) -> bool:
    writing: bool = zout._writing  # type: ignore[attr-defined]  # zipfile's open-for-write flag
    return info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) and not writing


def _begin_raw(zout: zipfile.ZipFile, zinfo: zipfile.ZipInfo, info: zipfile.ZipInfo) -> IO[bytes]:
    """Write the local header of a member whose compressed bytes follow as they are."""
    zinfo.file_size, zinfo.compress_size, zinfo.CRC = info.file_size, info.compress_size, info.CRC
    zinfo.compress_type = info.compress_type
    zinfo.flag_bits = 0
    zip64 = info.file_size > zipfile.ZIP64_LIMIT or info.compress_size > zipfile.ZIP64_LIMIT
    out = zout.fp
    assert out is not None
    out.seek(zout.start_dir)
    zinfo.header_offset = out.tell()
    zout._writecheck(zinfo)  # type: ignore[attr-defined]  # zipfile's own name check
    zout._didModify = True  # type: ignore[attr-defined]
    out.write(zinfo.FileHeader(zip64))
    return out


def _end_raw(zout: zipfile.ZipFile, zinfo: zipfile.ZipInfo, out: IO[bytes]) -> None:
    zout.start_dir = out.tell()
    zout.filelist.append(zinfo)
    zout.NameToInfo[zinfo.filename] = zinfo


def copy_raw(zf: zipfile.ZipFile, raw: IO[bytes], total: int, info: zipfile.ZipInfo,
             zout: zipfile.ZipFile, zinfo: zipfile.ZipInfo, digest: Any) -> int:
    """Copy a stored or deflated member's compressed bytes unchanged (hashing the inflated
    bytes on the side); other compressions are recompressed through zipfile."""
    charge_member(info)
    if not _can_copy(info, zout):
        zinfo.file_size = info.file_size
        with zout.open(zinfo, "w", force_zip64=info.file_size > zipfile.ZIP64_LIMIT) as w:
            def sink(data: bytes) -> None:
                digest.update(data)
                w.write(data)

            return _chunks(zf, raw, info, total, sink)
    out = _begin_raw(zout, zinfo, info)
    size = _chunks(zf, raw, info, total, _RawSink(out, digest))
    _end_raw(zout, zinfo, out)
    return size


def copy_compressed(raw: IO[bytes], total: int, info: zipfile.ZipInfo, zout: zipfile.ZipFile,
                    zinfo: zipfile.ZipInfo, buf: Buffer, digest: Any) -> int:
    """A member already read (and checked) into ``buf``: hash ``buf``, copy the compressed
    bytes as they are when the compression allows, else write ``buf`` compressed again."""
    if not _can_copy(info, zout):
        return write_buffer(zout, zinfo, buf, len(buf), digest)
    view = memoryview(buf)
    for pos in range(0, len(buf), CHUNK):
        digest.update(view[pos : pos + CHUNK])
    view.release()
    start = data_start(raw, info, total)
    out = _begin_raw(zout, zinfo, info)
    left = info.compress_size
    while left:
        raw.seek(start)
        chunk = raw.read(min(CHUNK, left))
        if not chunk:
            raise WheelError(f"{info.filename}: the wheel ends inside it")
        out.write(chunk)
        start += len(chunk)
        left -= len(chunk)
    _end_raw(zout, zinfo, out)
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


def hash_member(zf: zipfile.ZipFile, raw: IO[bytes], info: zipfile.ZipInfo, total: int, digest: Any) -> None:
    """Feed the member's inflated bytes to ``digest`` (checked, charged), keeping none."""
    charge_member(info)
    _chunks(zf, raw, info, total, digest.update)


def file_size(path: str) -> int:
    return os.stat(path).st_size
