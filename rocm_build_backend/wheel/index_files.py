"""The files of a static index on disk: atomic writes, hosted wheels, one read per wheel.

``atomic_write`` and ``write_if_changed`` put bytes in place with ``os.replace`` (a reader
never sees half a file; an unchanged file is not touched). ``read_wheel`` hashes a wheel, reads
its facts (``reader.py``) and its METADATA in one open, and hosts it on the way (a hard link,
else a copy). ``parallel`` runs such work on a few threads (hashing releases the GIL). ``Layout`` says
where one run reads wheels and where it writes pages, hosted copies and sidecars.

It decides nothing about which wheel goes where (``index_plan.py``) and renders no page
(``index_pages.py``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rocm_build_backend.errors import RocmBuildBackendError

T = TypeVar("T")
K = TypeVar("K")
R = TypeVar("R")

Record = dict[str, Any]
FILES_DIR = "files"


def parallel(fn: Callable[[T], R], items: list[T], key: Callable[[T], K]) -> dict[K, R]:
    """``{key(item): fn(item)}``, run on a few threads: hashing and file creation release the GIL."""
    if len(items) < 8:
        return {key(item): fn(item) for item in items}
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 1) + 2)) as pool:
        return dict(zip((key(item) for item in items), pool.map(fn, items)))


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


def _link(src: Path, dst: Path) -> bool:
    """Hard-link ``src`` to ``dst`` atomically; False when the filesystem will not."""
    try:
        if os.path.samefile(src, dst):
            return True
    except OSError:
        pass
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.lnk")
    try:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        os.link(src, tmp)
    except OSError:
        return False
    try:
        os.replace(tmp, dst)
    finally:
        try:  # rename() between two links to one file does nothing and leaves both
            tmp.unlink()
        except FileNotFoundError:
            pass
    return True


def _copy_hashing(fh: Any, path: Path, host: Path, h: Any) -> None:
    """Copy the open wheel ``fh`` to ``host`` through a temporary file, hashing as it goes."""
    import shutil

    buf = _buffer()
    tmp = tmp_name(host)
    try:
        with open(tmp, "wb") as dst:
            while n := fh.readinto(buf):
                h.update(buf[:n])
                dst.write(buf[:n])
        shutil.copystat(path, tmp)
        os.replace(tmp, host)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def read_wheel(path: Path, size: int, host: Path | None) -> tuple[Record, bytes]:
    """Hash a wheel and read its facts in one open; copy it to ``host`` on the way when asked.

    The bytes are hashed through one reused buffer (no allocation per wheel), then the zip's
    central directory and the two small members are read from the same open file.
    Returns (record for the state file, METADATA bytes).
    """
    import hashlib
    import zipfile

    from rocm_build_backend.wheel.reader import facts_from_zip, parse_metadata, pick_dist_info, read_metadata

    h: Any = hashlib.sha256()
    linked = host is not None and _link(path, host)
    with open(path, "rb") as fh:
        if host is not None and not linked:
            _copy_hashing(fh, path, host, h)
        elif hasattr(hashlib, "file_digest"):
            h = hashlib.file_digest(fh, "sha256")
        else:  # Python 3.10
            buf = _buffer()
            while n := fh.readinto(buf):
                h.update(buf[:n])
        fh.seek(0)
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
        "files": [[f.path, list(f.targets), list(f.complete), list(f.problems)] for f in wt.files],
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

    @property
    def files_dir(self) -> Path:
        return self.out_dir / FILES_DIR

    def rel(self, path: Path) -> str:
        return os.path.relpath(path, self.out_dir).replace(os.sep, "/")

    def host_for(self, fn: str) -> Path | None:
        return self.files_dir / fn if self.copy else None

    def sidecar_for(self, fn: str) -> Path:
        """The PEP 658 ``.metadata`` file: beside the wheel in place, else in OUT/files."""
        return (self.wheel_dir / f"{fn}.metadata") if self.in_place else (self.files_dir / f"{fn}.metadata")

    def href(self, fn: str, page_dir: Path) -> str:
        from urllib.parse import quote

        if self.base_url is not None:
            return f"{self.base_url}/{quote(fn)}"
        target = (self.wheel_dir / fn) if self.in_place else (self.files_dir / fn)
        rel = os.path.relpath(target, page_dir).replace(os.sep, "/")
        return "/".join(quote(part) for part in rel.split("/"))


def layout(wheel_dir: Path, out_dir: Path, base_url: str | None) -> Layout:
    """Check the arguments and create OUT; RocmBuildBackendError for a bad one."""
    if not wheel_dir.is_dir():
        raise RocmBuildBackendError(f"{wheel_dir} is not a folder", hint="pass the folder that holds the wheels")
    if out_dir.exists() and not out_dir.is_dir():
        raise RocmBuildBackendError(f"{out_dir} exists and is not a folder", hint="pick another output folder")
    if base_url is not None:
        base_url = base_url.strip()
        if not base_url or any(c in base_url for c in " \t\r\n\"'<>"):
            raise RocmBuildBackendError(
                f"bad base URL {base_url!r}", hint="pass a URL such as https://cdn.example.com/wheels"
            )
        base_url = base_url.rstrip("/")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = tmp_name(out_dir / ".write-test")
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise RocmBuildBackendError(f"cannot write the index into {out_dir}: {exc.strerror or exc}",
                                    hint="pick an output folder you can write to") from None
    in_place = base_url is None and inside(wheel_dir.resolve(), out_dir.resolve())
    return Layout(wheel_dir, out_dir, base_url, in_place, base_url is None and not in_place)
