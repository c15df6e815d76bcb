"""The wheels of one index run: which are read again, which are hosted, which are skipped and why.

``gather`` lists WHEEL_DIR, reuses the state file's record of every wheel that has not changed,
reads the others (``index_files.read_wheel``) and hosts each listable one under
``OUT/files/<hash>/`` in copy mode; ``write_sidecars`` writes the PEP 658 ``.metadata`` files.
A wheel that cannot be read or whose METADATA disagrees with its file name is skipped with the
reason and leaves nothing in OUT.

It writes no page and removes nothing that an earlier run wrote.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
import zlib
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.wheel.index.files import Layout, Record, parallel, read_wheel, tmp_name, write_if_changed
from rocm_build_backend.wheel.index.pages import normalize, version_key
from rocm_build_backend.wheel.index.variants import read_variant_json, variant_label
from rocm_build_backend.wheel.reader import pick_dist_info, read_metadata

# (file name, path, stat, name and version from the file name, fresh record or None)
_Todo = tuple[str, Path, os.stat_result, str, Any, "Record | None"]


def _fresh(lay: Layout, fn: str, st: os.stat_result, rec: Record | None) -> bool:
    """Whether the state file's record still describes this wheel (and its hosted copy exists)."""
    if rec is None or rec.get("size") != st.st_size or rec.get("mtime_ns") != st.st_mtime_ns:
        return False
    host = lay.host_for(fn, rec)
    if host is None:
        return True
    try:
        hst = host.stat()
    except OSError:
        return False
    return (hst.st_ino == st.st_ino and hst.st_dev == st.st_dev) or (
        hst.st_size == st.st_size and hst.st_mtime_ns == st.st_mtime_ns)


def _listing(lay: Layout, old_wheels: dict[str, Record], skipped: dict[str, str],
             variants: bool) -> list[_Todo]:
    """The wheels to index, each with its state-file record when that is still fresh.

    A variant wheel (``-<label>.whl``) is indexed only with ``variants``; else it is skipped.
    """
    if lay.sources is not None:
        listing = sorted(lay.sources.items())
    else:
        try:
            listing = sorted((p.name, p) for p in lay.wheel_dir.iterdir() if p.name.endswith(".whl") and p.is_file())
        except OSError as exc:
            raise RocmBuildBackendError(f"cannot list {lay.wheel_dir}: {exc.strerror or exc}") from None
    todo: list[_Todo] = []
    for fn, path in listing:
        base, label = variant_label(fn)
        if label is not None and not variants:
            skipped[fn] = f"a variant wheel (label {label!r}): index variant wheels with variants"
            continue
        try:
            fname_name, fname_version, _build, _tags = parse_wheel_filename(base)
        except InvalidWheelFilename as exc:
            skipped[fn] = f"not a valid wheel file name ({exc})"
            continue
        try:
            st = path.stat()
        except OSError as exc:
            skipped[fn] = f"cannot be read ({exc.strerror or exc})"
            continue
        rec = old_wheels.get(fn)
        if rec is not None and ("variant" in rec) != (label is not None):
            rec = None
        todo.append((fn, path, st, str(fname_name), fname_version, rec if _fresh(lay, fn, st, rec) else None))
    return todo


def _mismatch(rec: Record, fname_name: str, fname_version: Any) -> str | None:
    """Why a wheel's record cannot be listed (METADATA disagrees with its name, unreadable code)."""
    if rec.get("name") is None or normalize(rec["name"]) != normalize(fname_name):
        return f"its METADATA names {rec.get('name')!r}, the file name {fname_name!s}"
    if version_key(rec.get("version") or "")[1] != fname_version:
        return f"its METADATA says version {rec.get('version')}, the file name {fname_version}"
    if not rec.get("known", True):
        return "; ".join(rec.get("problems", [])) or "its device code could not be read"
    return None


# what reading one new wheel gives: (record, METADATA, hosted path or None) or the reason it is skipped
_Read = tuple["tuple[Record, bytes, Path | None] | None", "str | None"]


def _read_and_host(lay: Layout, item: _Todo) -> _Read:
    """Read one new or changed wheel; host it (under its hash) only once it is known to be listable.

    In copy mode the wheel is read from its staging copy, which becomes the hosted file or is
    removed: a wheel that is skipped leaves nothing behind.
    """
    fn, path, _st, fname_name, fname_version, _rec = item
    stage = tmp_name(lay.files_dir / fn) if lay.copy else None
    try:
        rec, metadata = read_wheel(path, stage)
        if variant_label(fn)[1] is not None:
            rec["variant"] = read_variant_json(stage or path, fn)
        why = _mismatch(rec, fname_name, fname_version)
        if why is not None:
            return None, why
        host = lay.host_for(fn, rec)
        if host is not None and stage is not None:
            host.parent.mkdir(exist_ok=True)
            os.replace(stage, host)
            stage = None
        return (rec, metadata, host), None
    except (RocmBuildBackendError, zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError,
            zlib.error, RuntimeError, NotImplementedError) as exc:
        return None, exc.message if isinstance(exc, RocmBuildBackendError) else f"not a readable wheel ({exc})"
    finally:
        if stage is not None:
            try:
                stage.unlink()
            except OSError:
                pass


def gather(lay: Layout, old_wheels: dict[str, Record], skipped: dict[str, str], variants: bool = False) -> tuple[
        dict[str, Record], dict[str, bytes]]:
    """Every listable wheel's record (read only when new or changed) and the METADATA read now.

    A wheel that cannot be read, or whose METADATA disagrees with its file name, is skipped
    with the reason and leaves nothing behind in OUT.
    """
    todo = _listing(lay, old_wheels, skipped, variants)
    if lay.copy and any(item[5] is None for item in todo):
        lay.files_dir.mkdir(exist_ok=True)
    read = parallel(lambda item: _read_and_host(lay, item), [item for item in todo if item[5] is None],
                    key=lambda item: item[0])
    new_wheels: dict[str, Record] = {}
    metadata: dict[str, bytes] = {}
    for fn, _path, _st, fname_name, fname_version, rec in todo:
        if rec is not None:
            why = _mismatch(rec, fname_name, fname_version)
            if why is not None:
                skipped[fn] = why
                continue
            new_wheels[fn] = rec
            continue
        got, why = read[fn]
        if got is None:
            skipped[fn] = why or "not a readable wheel"
            continue
        new_wheels[fn], metadata[fn], _host = got
    return new_wheels, metadata


def write_sidecars(lay: Layout, wheels: dict[str, Record], metadata: dict[str, bytes],
                   skipped: dict[str, str]) -> list[str]:
    """The PEP 658 ``.metadata`` files, byte for byte each wheel's METADATA; the ones written.

    A wheel whose METADATA cannot be read again is moved from ``wheels`` to ``skipped``.
    """
    problems: dict[str, str] = {}

    def one(fn: str) -> str | None:
        side = lay.sidecar_for(fn, wheels[fn])
        data = metadata.get(fn)
        if data is None:
            try:
                current: bytes | None = side.read_bytes()
            except OSError:
                current = None
            if current is not None and hashlib.sha256(current).hexdigest() == wheels[fn]["metadata_sha256"]:
                return None
            try:
                with zipfile.ZipFile(lay.source(fn)) as zf:
                    data = read_metadata(zf, pick_dist_info(zf.namelist(), fn, fn.split("-", 1)[0]), fn)
            except (RocmBuildBackendError, zipfile.BadZipFile, OSError, EOFError) as exc:
                problems[fn] = exc.message if isinstance(exc, RocmBuildBackendError) else str(exc)
                return None
        return lay.rel(side) if write_if_changed(side, data, mkdir=False) else None

    if wheels and not lay.in_place:
        lay.files_dir.mkdir(parents=True, exist_ok=True)
    written = [rel for rel in parallel(one, list(wheels), key=lambda fn: fn).values() if rel]
    for fn, why in problems.items():  # its METADATA cannot be served: it is not listed
        skipped[fn] = why
        del wheels[fn]
    return written
