"""The wheels of one index run: what changed in the folder, which are read, hosted or skipped.

``list_folder`` lists WHEEL_DIR once (a ``stat`` per wheel) and gives each wheel a
fingerprint (size, mtime, ctime, inode, device) and each bucket of file names a digest;
``diff`` compares those digests with the database's, and reads wheel rows only for buckets
that differ, so a run with nothing changed reads no row. A wheel whose fingerprint changed is
hashed again, and read only when its bytes changed. A file changed within the timestamp
granularity of the moment it was listed could keep its fingerprint, so a wheel whose mtime or
ctime is within ``RACY_NS`` of the listing is "racy": hashed again by the next run.

``read_all`` reads each new or changed wheel once (``index_files.read_wheel``: staged in
``OUT/files/.incoming/``, hashed, facts and METADATA read from that copy); ``host`` moves each
listable one to ``OUT/files/<hash>/`` and writes its PEP 658 ``.metadata`` file. A wheel that
cannot be read, or whose METADATA disagrees with its file name, is skipped with the reason and
leaves nothing in OUT; a write that fails stops the run (``WriteFailed``).

It writes no page and removes nothing that an earlier run wrote.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from rocm_build_backend import progress
from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.wheel.index.files import (
    INCOMING,
    WRITE_ERRORS,
    Layout,
    Record,
    hash_file,
    parallel,
    read_wheel,
    write_failed,
    write_if_changed,
)
from rocm_build_backend.wheel.index.pages import normalize, version_key
from rocm_build_backend.wheel.index.store import BUCKETS, Store, bucket_of
from rocm_build_backend.wheel.index.variants import read_variant_json, variant_label

RACY_NS = 2_000_000_000  # coarser than any timestamp granularity in use (FAT: 2 s)
# a valid project name (PEP 508; the core metadata's Name): ASCII letters and digits, with
# ".", "_" and "-" inside. packaging's file name parser accepts any Unicode letter.
_VALID_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", re.ASCII)
NAME_RULE = (
    "a valid project name has ASCII letters and digits only, with '.', '_' or '-' inside "
    "(PEP 508): no index page can be written for it"
)


@dataclass
class Item:
    """One wheel to index: where it is read from and what its file name says."""

    fn: str
    path: Path
    name: str
    version: Any
    variant: bool
    fp: str = ""
    racy: bool = False
    known_sha: str | None = None  # the database's hash, when only the fingerprint changed
    indexed: bool = False  # the database holds a wheel of this file name

    @property
    def project(self) -> str:
        return normalize(self.name)

    @property
    def bucket(self) -> int:
        return bucket_of(self.fn)


@dataclass
class Read:
    """What reading one wheel gave: a record (and its staged copy), the same bytes, or a reason."""

    item: Item
    rec: Record | None = None
    metadata: bytes | None = None
    stage: Path | None = None
    why: str | None = None
    same: bool = False


@dataclass
class Listing:
    entries: dict[str, tuple[str, str, bool]] = field(default_factory=dict)  # fn -> (path, fingerprint, racy)
    digests: dict[int, str] = field(default_factory=dict)
    racy: set[int] = field(default_factory=set)  # buckets holding a racy wheel


def fingerprint(st: os.stat_result) -> str:
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}:{st.st_dev}"


def parse_name(fn: str, variants: bool) -> tuple[Item | None, str | None]:
    """An ``Item`` for a wheel file name (path not set), or why the name cannot be indexed."""

    base, label = variant_label(fn)
    if label is not None and not variants:
        return None, f"a variant wheel (label {label!r}): index variant wheels with variants"
    try:
        name, version, _build, _tags = parse_wheel_filename(base)
    except InvalidWheelFilename as exc:
        return None, f"not a valid wheel file name ({exc})"
    if not _VALID_NAME.fullmatch(base.split("-", 1)[0]):
        return None, f"its project name {base.split('-', 1)[0]!r} is not valid: {NAME_RULE}"
    return Item(fn, Path(fn), str(name), version, label is not None), None


def _entries(lay: Layout) -> list[tuple[str, str, Any]]:
    """(file name, path, something with ``stat()``) of every wheel to look at."""
    if lay.sources is not None:
        return [(fn, str(path), path) for fn, path in sorted(lay.sources.items())]
    try:
        with os.scandir(lay.wheel_dir) as it:
            return [(e.name, e.path, e) for e in it if e.name.endswith(".whl") and e.is_file()]
    except OSError as exc:
        raise RocmBuildBackendError(f"cannot list {lay.wheel_dir}: {exc.strerror or exc}") from None


def list_folder(lay: Layout, salt: str) -> Listing:
    """Every wheel in WHEEL_DIR (or ``lay.sources``) with its fingerprint; digests per bucket.

    Only names and ``stat`` here: what a name says is looked at for buckets that changed.
    """
    now = time.time_ns() - RACY_NS
    out = Listing()
    lines: dict[int, list[str]] = {}
    for fn, path, entry in _entries(lay):
        try:
            st = entry.stat()
            fp = fingerprint(st)
            racy = st.st_mtime_ns >= now or st.st_ctime_ns >= now
        except OSError as exc:
            fp, racy = f"?{exc.strerror or exc}", True
        b = bucket_of(fn)
        lines.setdefault(b, []).append(f"{fn}\0{fp}\n")
        if racy:
            out.racy.add(b)
        out.entries[fn] = (path, fp, racy)
    prefix = salt.encode("utf-8", "surrogateescape")
    for b in range(BUCKETS):
        h = hashlib.sha1(prefix)
        h.update("".join(sorted(lines.get(b, []))).encode("utf-8", "surrogateescape"))
        out.digests[b] = h.hexdigest()
    return out


@dataclass
class Diff:
    buckets: set[int]  # buckets whose listing changed (their rows were compared)
    to_read: list[Item] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    projects: dict[str, str] = field(default_factory=dict)  # fn -> project of the database's rows
    skipped: dict[str, tuple[int, str]] = field(default_factory=dict)  # fn -> (bucket, why), by name


def diff(store: Store, listing: Listing, variants: bool, force: bool) -> Diff:
    """What changed since the database's listing: only buckets whose digest differs are compared.

    ``force``: every wheel is read again and hosted anew (the layout changed).
    """
    stored = store.bucket_digests()
    changed = {b for b in range(BUCKETS) if force or stored.get(b) != listing.digests[b]}
    out = Diff(changed)
    if not changed:
        return out
    rows = store.rows(changed)
    out.projects = {fn: row[2] for fn, row in rows.items()}
    kept = set()
    for fn, (path, fp, racy) in listing.entries.items():
        b = bucket_of(fn)
        if b not in changed:
            continue
        item, why = parse_name(fn, variants)
        if item is None or fp.startswith("?"):
            out.skipped[fn] = (b, why or f"cannot be read ({fp[1:]})")
            continue
        kept.add(fn)
        item.path, item.fp, item.racy = Path(path), fp, racy
        row = rows.get(fn)
        item.indexed = row is not None
        if row is None or force:
            out.to_read.append(item)
        elif row[0] == fp and not row[3]:
            continue
        else:
            item.known_sha = row[1]
            out.to_read.append(item)
    out.removed = sorted(fn for fn in rows if fn not in kept)
    return out


def _mismatch(rec: Record, fname_name: str, fname_version: Any) -> str | None:
    """Why a wheel's record cannot be listed (METADATA disagrees with its name, unreadable code)."""
    if isinstance(rec.get("name"), str) and not _VALID_NAME.fullmatch(rec["name"]):
        return f"its METADATA names the project {rec['name']!r}, which is not valid: {NAME_RULE}"
    if rec.get("name") is None or normalize(rec["name"]) != normalize(fname_name):
        return f"its METADATA names {rec.get('name')!r}, the file name {fname_name!s}"
    if version_key(rec.get("version") or "")[1] != fname_version:
        return f"its METADATA says version {rec.get('version')}, the file name {fname_version}"
    if not rec.get("known", True):
        return "; ".join(rec.get("problems", [])) or "its device code could not be read"
    return None


def _read(lay: Layout, item: Item) -> Read:
    """Read one new or changed wheel; its staged copy is kept only when it is listable."""

    stage = None
    try:
        if item.known_sha is not None and hash_file(item.path) == item.known_sha:
            return Read(item, same=True)
        stage = lay.stage_for(item.fn)
        rec, metadata = read_wheel(item.path, stage)
        if item.variant:
            rec["variant"] = read_variant_json(stage or item.path, item.fn)
        why = _mismatch(rec, item.name, item.version)
        if why is not None:
            return Read(item, why=why)
        kept, stage = stage, None
        return Read(item, rec, metadata, kept)
    except OSError as exc:
        if exc.errno in WRITE_ERRORS:
            raise write_failed(exc, lay.out_dir, stage) from None
        return Read(item, why=f"cannot be read ({exc.strerror or exc})")
    except (
        RocmBuildBackendError,
        zipfile.BadZipFile,
        ValueError,
        EOFError,
        KeyError,
        zlib.error,
        RuntimeError,
        NotImplementedError,
    ) as exc:
        return Read(
            item, why=exc.message if isinstance(exc, RocmBuildBackendError) else f"not a readable wheel ({exc})"
        )
    finally:
        if stage is not None:
            try:
                stage.unlink()
            except OSError:
                pass


def read_all(lay: Layout, items: list[Item]) -> dict[str, Read]:
    """Read every item (a few at a time); fn -> what reading it gave."""
    if items and lay.copy:
        try:
            (lay.files_dir / INCOMING).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise write_failed(exc, lay.out_dir, lay.files_dir / INCOMING) from None
    done = itertools.count(1)  # next() is atomic: the reading threads share it

    def read(item: Item) -> Read:
        got = _read(lay, item)
        progress.step("reading wheels", next(done), len(items))
        return got

    return parallel(read, items, key=lambda item: item.fn)


def drop_stages(reads: dict[str, Read]) -> None:
    """Remove the staged copies of a run that stops before hosting them."""
    for r in reads.values():
        if r.stage is not None:
            try:
                r.stage.unlink()
            except OSError:
                pass


def hosted_files(lay: Layout, fn: str, rec: Record) -> list[Path]:
    """The files in OUT that serve one wheel: its hosted copy (copy mode) and its ``.metadata``."""
    host = lay.host_for(fn, rec)
    return ([host] if host is not None else []) + [lay.sidecar_for(fn, rec)]


def host(lay: Layout, reads: list[Read]) -> list[str]:
    """Move each listable wheel's staged copy into place and write its ``.metadata``; the files
    written (relative to OUT). ``WriteFailed`` when a write fails.

    A ``.metadata`` file in a hash folder made just now is written in place (no page can link
    it yet); elsewhere it replaces the old one atomically.
    """
    written: list[str] = []
    fresh: set[str] = set()
    path: Path | None = None
    try:
        for r in reads:
            assert r.rec is not None
            path = lay.host_for(r.item.fn, r.rec)
            if path is not None and r.stage is not None:
                try:
                    os.mkdir(path.parent)
                    fresh.add(r.item.fn)
                except FileExistsError:
                    pass
                os.replace(r.stage, path)
                r.stage = None
                written.append(lay.rel(path))
        path = None

        def sidecar(r: Read) -> str | None:
            assert r.rec is not None and r.metadata is not None
            side = lay.sidecar_for(r.item.fn, r.rec)
            try:
                if r.item.fn in fresh:
                    with open(side, "xb") as fh:
                        fh.write(r.metadata)
                elif not write_if_changed(side, r.metadata):
                    return None
            except OSError as exc:
                exc.filename = str(side)
                raise
            return lay.rel(side)

        done = parallel(sidecar, reads, key=lambda r: r.item.fn)
    except OSError as exc:
        raise write_failed(exc, lay.out_dir, path) from None
    return written + [rel for rel in done.values() if rel]
