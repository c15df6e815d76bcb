"""The files of a static index on disk: atomic writes, hosted wheels, one read per wheel.

``atomic_write`` and ``write_if_changed`` put bytes in place with ``os.replace`` (a reader
never sees half a file; an unchanged file is not touched). ``read_wheel`` copies a wheel to a
staging file in ``OUT/files/.incoming/`` (a copy-on-write clone where the filesystem offers
one), hashes it and reads its facts (``reader.py``) and METADATA from that copy; the caller
moves it to ``OUT/files/<hash>/<wheel>``, so a file the pages link to is never replaced or
changed. ``hash_file`` hashes without copying (is a changed file really new?). ``parallel``
runs such work on a few threads (hashing releases the GIL). ``Layout`` says where one run reads
wheels and where it writes pages, hosted copies and sidecars. ``WriteFailed`` is the one error
for a write that fails (no space left, read-only): one line, and the run stops.

It decides nothing about which wheel goes where (``index_plan.py``) and renders no page
(``index_pages.py``).
"""

from __future__ import annotations

import errno
import hashlib
import os
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from rocm_build_backend.binary.printable import printable
from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.wheel.facts import modules_to_json
from rocm_build_backend.wheel.reader import facts_from_zip, parse_metadata, pick_dist_info, read_metadata

T = TypeVar("T")
K = TypeVar("K")
R = TypeVar("R")

Record = dict[str, Any]
FILES_DIR = "files"
INCOMING = ".incoming"  # OUT/files/.incoming: staging copies, moved to OUT/files/<hash>/ once read
HASH_DIR = 16  # hex digits of the wheel's sha256 that name its folder under OUT/files

# errors that only writing gives: the run stops (a wheel that cannot be *read* is skipped instead)
WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


class WriteFailed(RocmBuildBackendError):
    """Writing into the output folder failed (no space left, read-only, over quota)."""


def write_failed(exc: OSError, out_dir: Path, path: Path | str | None = None) -> WriteFailed:
    """The one error line for a failed write: what, where, and that the index stays consistent."""
    where = path if path is not None else exc.filename
    try:
        rel = os.path.relpath(str(where), out_dir) if where else "."
    except ValueError:
        rel = str(where)
    if rel == ".":
        return WriteFailed(
            printable(
                f"cannot write in {out_dir}: {exc.strerror or exc}; the pages still link only files that "
                "exist, and the next run finishes what this one began"
            ),
            hint="free space on (or make writable) the filesystem that holds the output folder, then run again",
        )
    head, _, name = rel.rpartition("/")
    parts = name.split(".")
    if name.startswith(".") and name.endswith(".tmp") and len(parts) > 4:  # a temporary name: say what for
        target = ".".join(parts[1:-3])
        rel = (
            f"a copy of {target} into {FILES_DIR}/"
            if head.endswith(INCOMING)
            else (f"{head}/" if head else "") + target
        )

    return WriteFailed(
        printable(
            f"cannot write {rel} in {out_dir}: {exc.strerror or exc}; the pages still link only "
            "files that exist, and the next run finishes what this one began"
        ),
        hint="free space on (or make writable) the filesystem that holds the output folder, then run again",
    )


def parallel(fn: Callable[[T], R], items: list[T], key: Callable[[T], K]) -> dict[K, R]:
    """``{key(item): fn(item)}``, run on a few threads: hashing and file creation release the GIL.

    Each thread takes every n-th item (no task object per item); the first exception raised
    by any of them is raised here, once all have stopped.
    """
    if len(items) < 8:
        return {key(item): fn(item) for item in items}
    n = min(8, (os.cpu_count() or 1) + 2, len(items))
    results: list[dict[K, R]] = [{} for _ in range(n)]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for item in items[i::n]:
                if errors:
                    return
                results[i][key(item)] = fn(item)
        except BaseException as exc:  # raised in the caller's thread below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    out: dict[K, R] = {}
    for part in results:
        out.update(part)
    return out


def tmp_name(path: Path) -> Path:
    """A temporary name beside ``path``, unique to this process and thread."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def atomic_write(path: Path, data: bytes, *, mkdir: bool = True) -> None:
    """Write ``data`` to a temporary file beside ``path`` and move it into place."""
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_name(path)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def write_if_changed(path: Path, data: bytes, *, mkdir: bool = True) -> bool:
    """``atomic_write`` unless ``path`` already holds exactly ``data``; True when written."""
    try:
        with open(path, "rb") as fh:
            if fh.read() == data:
                return False
    except OSError:
        pass
    atomic_write(path, data, mkdir=mkdir)
    return True


_local = threading.local()


def _buffer() -> memoryview:
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = memoryview(bytearray(1 << 20))
    return buf


def _clone(src_fd: int, dst_fd: int) -> bool:
    """A copy-on-write clone (``FICLONE``: btrfs, XFS, ...); False where the filesystem has none."""
    try:
        import fcntl

        fcntl.ioctl(dst_fd, 0x40049409, src_fd)  # FICLONE
    except (ImportError, OSError, ValueError):
        return False
    return True


def hash_file(path: Path) -> str:
    """The sha256 of a file, read once (no copy)."""

    with open(path, "rb") as fh:
        if hasattr(hashlib, "file_digest"):
            return hashlib.file_digest(fh, "sha256").hexdigest()
        h = hashlib.sha256()  # Python 3.10
        buf = _buffer()
        while n := fh.readinto(buf):
            h.update(buf[:n])
        return h.hexdigest()


def _copy_hash(src: Any, dst: Any) -> Any:
    """Copy ``src`` into ``dst`` (a clone where the filesystem can) and hash the copy's bytes.

    The copy is what gets hashed, read and hosted, so a wheel rewritten in place while or
    after it is indexed cannot change what the pages describe. It gets the mode new files get
    (a hosted wheel must be readable by the web server, whatever the source's mode was).
    """

    h = hashlib.sha256()
    buf = _buffer()
    if _clone(src.fileno(), dst.fileno()):
        while n := dst.readinto(buf):
            h.update(buf[:n])
    else:
        while n := src.readinto(buf):
            h.update(buf[:n])
            dst.write(buf[:n])
    dst.flush()
    dst.seek(0)
    return h


def read_wheel(path: Path, stage: Path | None = None) -> tuple[Record, bytes]:
    """Hash a wheel and read its facts (``reader.py``) and METADATA from the same bytes.

    With ``stage`` the wheel is first copied there (the hosted copy to be; its folder must
    exist) and everything is read from that copy; the caller moves it into place or removes
    it. The record's size and time are the source's, as they were read.
    """

    if stage is None:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            h = hashlib.sha256()
            buf = _buffer()
            while n := fh.readinto(buf):
                h.update(buf[:n])
            fh.seek(0)
            return _record(fh, path, h, st)
    with open(path, "rb") as src, open(stage, "w+b") as dst:
        st = os.fstat(src.fileno())
        return _record(dst, path, _copy_hash(src, dst), st)


def _record(fh: Any, path: Path, h: Any, st: os.stat_result) -> tuple[Record, bytes]:
    """The record of the wheel open as ``fh`` (at its start), hashed as ``h``."""

    with zipfile.ZipFile(fh) as zf:
        dist_info = pick_dist_info(zf.namelist(), path.name, path.name.split("-", 1)[0])
        metadata = read_metadata(zf, dist_info, path.name)
        wt = facts_from_zip(zf, path, audit=False, metadata=metadata)

    meta = parse_metadata(metadata.decode("utf-8", "replace"))
    rec = {
        "sha256": h.hexdigest(),
        "name": wt.name,
        "version": wt.version,
        "requires_python": meta.get("requires-python"),
        "metadata_sha256": hashlib.sha256(metadata).hexdigest(),
        "known": wt.known,
        "stamped": wt.stamped,
        "problems": list(wt.problems),
        # [path, targets, complete, problems, modules, unread]; modules null when not known
        "files": [
            [
                f.path,
                list(f.targets),
                list(f.complete),
                list(f.problems),
                None if f.modules is None else modules_to_json(f.modules),
                modules_to_json(f.unread),
            ]
            for f in wt.files
        ],
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
    }
    return rec, metadata


def inside(child: Path, parent: Path) -> bool:
    """Whether ``child`` is ``parent`` or under it (as paths; nothing is resolved here)."""
    try:
        child.relative_to(parent)
    except ValueError:
        return False
    return True


@dataclass
class Layout:
    """Where this run reads wheels from and where it writes pages, copies and sidecars."""

    wheel_dir: Path
    out_dir: Path
    base_url: str | None
    in_place: bool
    copy: bool
    sources: dict[str, Path] | None = None  # file name -> path, when not all are WHEEL_DIR/<name>

    def source(self, fn: str) -> Path:
        """Where the wheel ``fn`` is read from."""
        return self.sources[fn] if self.sources is not None else self.wheel_dir / fn

    @property
    def files_dir(self) -> Path:
        return self.out_dir / FILES_DIR

    def rel(self, path: Path) -> str:
        text, top = str(path), str(self.out_dir) + os.sep
        if text.startswith(top) and os.sep + ".." not in text[len(top) - 1 :]:
            return text[len(top) :].replace(os.sep, "/")  # the usual case, without resolving anything
        return os.path.relpath(path, self.out_dir).replace(os.sep, "/")

    def host_for(self, fn: str, rec: Record) -> Path | None:
        """Where a hosted copy lives: ``OUT/files/<hash>/<wheel>``, one folder per content."""
        if not self.copy:
            return None
        return Path(f"{self.out_dir}{os.sep}{FILES_DIR}{os.sep}{str(rec['sha256'])[:HASH_DIR]}{os.sep}{fn}")

    def stage_for(self, fn: str) -> Path | None:
        """Where a wheel is staged while it is read (copy mode): ``OUT/files/.incoming/``."""
        return tmp_name(self.files_dir / INCOMING / fn) if self.copy else None

    def sidecar_for(self, fn: str, rec: Record) -> Path:
        """The PEP 658 ``.metadata`` file: beside the wheel (in place, or its hosted copy), else
        (wheels served from ``base_url``) in OUT/files, to be uploaded beside them."""
        if self.in_place:
            return Path(f"{self.source(fn)}.metadata")
        host = self.host_for(fn, rec)
        return Path(f"{host}.metadata") if host is not None else self.files_dir / f"{fn}.metadata"

    def href(self, fn: str, rec: Record, page_dir: Path) -> str:
        """The link from a page in ``page_dir`` (inside OUT) to a wheel."""

        if self.base_url is not None:
            return f"{self.base_url}/{quote(fn)}"
        rel = self.rel(self.source(fn)) if self.in_place else f"{FILES_DIR}/{str(rec['sha256'])[:HASH_DIR]}/{fn}"
        up = "../" * (len(page_dir.parts) - len(self.out_dir.parts))
        return up + "/".join(quote(part) for part in rel.split("/"))


def layout(wheel_dir: Path, out_dir: Path, base_url: str | None) -> Layout:
    """Check the arguments and create OUT; RocmBuildBackendError for a bad one."""
    if not wheel_dir.is_dir():
        raise RocmBuildBackendError(f"{wheel_dir} is not a folder", hint="pass the folder that holds the wheels")
    base_url = _base_url(base_url)
    prepare_out(out_dir)
    in_place = base_url is None and inside(wheel_dir.resolve(), out_dir.resolve())
    return Layout(wheel_dir, out_dir, base_url, in_place, base_url is None and not in_place)


def _base_url(base_url: str | None) -> str | None:
    if base_url is not None:
        base_url = base_url.strip()
        if not base_url or any(c in base_url for c in " \t\r\n\"'<>"):
            raise RocmBuildBackendError(
                f"bad base URL {base_url!r}", hint="pass a URL such as https://cdn.example.com/wheels"
            )
        base_url = base_url.rstrip("/")
    return base_url


def prepare_out(out_dir: Path) -> None:
    """Create OUT and check that it can be written to; RocmBuildBackendError when not."""
    if out_dir.exists() and not out_dir.is_dir():
        raise RocmBuildBackendError(f"{out_dir} exists and is not a folder", hint="pick another output folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = tmp_name(out_dir / ".write-test")
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise RocmBuildBackendError(
            f"cannot write the index into {out_dir}: {exc.strerror or exc}",
            hint="pick an output folder you can write to",
        ) from None
