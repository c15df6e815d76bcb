"""A static package index per GPU target (or per AMD family): ``rocm-build-backend index``.

``build_index(WHEEL_DIR, OUT)`` writes, for each target T::

    OUT/T/simple/index.html            PEP 503 root page: one anchor per project
    OUT/T/simple/index.json            the same as PEP 691 JSON
    OUT/T/simple/<name>/index.html     PEP 503 project page: one anchor per wheel that loads on T
    OUT/T/simple/<name>/index.json     the same as PEP 691 JSON
    OUT/files/<wheel>                  the wheels (hard links when possible, else copies)
    OUT/files/<wheel>.metadata         PEP 658/714 core metadata, byte-for-byte the wheel's METADATA
    OUT/.rocm-build-backend-index.json per-wheel facts, so a later run does not re-hash them

A wheel appears under every target its device code loads on (``compat.py``'s rules, read from
its stamp, or from an audit when it has none); a wheel with no device code appears under all.
Anchors carry ``#sha256=``, ``data-requires-python`` and both ``data-core-metadata`` (PEP 714)
and ``data-dist-info-metadata`` (PEP 658). Names are normalised (PEP 503) and everything written
into HTML is escaped.

Point a client at ``OUT/T/simple/``: ``pip install --index-url file:///srv/OUT/gfx942/simple``,
``uv pip install --index-url http://host/gfx942/simple``. When WHEEL_DIR is inside OUT the wheels
are linked where they are; with ``base_url`` the links point at ``BASE_URL/<wheel>`` and the
``.metadata`` files in ``OUT/files/`` must be uploaded beside the wheels there.

``family=True`` groups AMD targets as AMD's nightly indexes do (``gfx94X-dcgpu``,
``gfx110X-all``, ``gfx120X-all``, ...; see ``index_plan.py``); a wheel appears in a family's
index only when it loads on every member, since anyone in the family may install from it.

Serving the JSON pages (PEP 691): clients send ``Accept: application/vnd.pypi.simple.v1+json,
application/vnd.pypi.simple.v1+html;q=0.1, text/html;q=0.01``. A plain static server (``python
-m http.server``, S3) serves ``index.html`` for ``.../name/`` and that is enough. A server that
negotiates serves ``index.json`` with ``Content-Type: application/vnd.pypi.simple.v1+json`` when
the JSON type ranks first, e.g. nginx::

    map $http_accept $simple_page {
        default                                  index.html;
        "~application/vnd\\.pypi\\.simple\\.v1\\+json" index.json;
    }
    location ~ /simple/ { index $simple_page; types { application/vnd.pypi.simple.v1+json json; text/html html; } }

Over ``file://`` clients read ``index.html`` only.

Incremental: wheels whose name, size and mtime match the state file are not read again; a page
is written only when its bytes change; every write goes to a temporary file in the same folder
and is moved into place with ``os.replace``, so a reader never sees half a page. Pages this run
no longer produces (in the indexes it builds) are removed.

This module strings the steps together and keeps the state file; the plan is
``index_plan.py``, the page bytes ``index_pages.py``, the file work ``index_files.py``. It must
not delete anything outside the output folder nor anything it did not write there.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.gpu.targets import GpuTarget
from rocm_build_backend.wheel.index_files import (
    FILES_DIR,
    Layout,
    Record,
    layout,
    parallel,
    read_wheel,
    write_if_changed,
)
from rocm_build_backend.wheel.index_pages import (  # noqa: F401 (API_VERSION, normalize: re-exported)
    API_VERSION,
    file_sort_key,
    normalize,
    project_html,
    project_json,
    root_html,
    root_json,
    version_key,
)
from rocm_build_backend.wheel.index_plan import FAMILIES, family_of, index_plan, named_targets  # noqa: F401
from rocm_build_backend.wheel.index_state import STATE_NAME, STATE_VERSION, load_state, remove_owned

if TYPE_CHECKING:  # pragma: no cover
    from rocm_build_backend.wheel.facts import WheelTargets

__all__ = [
    "API_VERSION",
    "FAMILIES",
    "FILES_DIR",
    "STATE_NAME",
    "STATE_VERSION",
    "IndexResult",
    "build_index",
    "family_of",
    "normalize",
]

@dataclass
class IndexResult:
    """What ``build_index`` did. Paths are relative to ``out_dir``."""

    out_dir: Path
    indexes: dict[str, list[str]] = field(default_factory=dict)
    pages_written: list[str] = field(default_factory=list)
    files_written: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    read: int = 0
    reused: int = 0
    skipped: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    metadata_upload: Path | None = None

    @property
    def written(self) -> list[str]:
        return self.pages_written + self.files_written

    @property
    def exit_code(self) -> int:
        return 1 if self.skipped else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "out_dir": str(self.out_dir),
            "indexes": {k: list(v) for k, v in self.indexes.items()},
            "pages_written": list(self.pages_written),
            "files_written": list(self.files_written),
            "unchanged": self.unchanged,
            "removed": list(self.removed),
            "wheels_read": self.read,
            "wheels_reused": self.reused,
            "skipped": dict(self.skipped),
            "warnings": list(self.warnings),
            "metadata_upload": str(self.metadata_upload) if self.metadata_upload else None,
            "exit_code": self.exit_code,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        lines = []
        for name, wheels in self.indexes.items():
            lines.append(f"{name}: {len(wheels)} wheel{'s' if len(wheels) != 1 else ''} -> {self.out_dir / name / 'simple'}/")
        lines.append(
            f"{len(self.pages_written)} page{'s' if len(self.pages_written) != 1 else ''} written, "
            f"{self.unchanged} unchanged, {len(self.removed)} removed; "
            f"{self.read} wheel{'s' if self.read != 1 else ''} read, {self.reused} from the cache"
        )
        for fn, why in self.skipped.items():
            lines.append(f"skipped {fn}: {why}")
        lines += [f"warning: {w}" for w in self.warnings]
        if self.metadata_upload:
            lines.append(f"note: upload the .metadata files in {self.metadata_upload} beside the wheels")
        from rocm_build_backend.wheel.printable import printable_lines

        return printable_lines(lines)


# --------------------------------------------------------------------------------------------
# the steps


# (file name, path, stat, hosted copy or None, name and version from the file name, fresh record)
_Todo = tuple[str, Path, os.stat_result, "Path | None", str, Any, "Record | None"]


def _listing(lay: Layout, old_wheels: dict[str, Record], result: IndexResult) -> list[_Todo]:
    """The wheels to index, each with its state-file record when that is still fresh."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        listing = sorted(p for p in lay.wheel_dir.iterdir() if p.name.endswith(".whl") and p.is_file())
    except OSError as exc:
        raise RocmBuildBackendError(f"cannot list {lay.wheel_dir}: {exc.strerror or exc}") from None
    if not listing:
        result.warnings.append(f"{lay.wheel_dir} holds no wheels")
    todo: list[_Todo] = []
    for path in listing:
        fn = path.name
        try:
            fname_name, fname_version, _build, _tags = parse_wheel_filename(fn)
        except InvalidWheelFilename as exc:
            result.skipped[fn] = f"not a valid wheel file name ({exc})"
            continue
        st = path.stat()
        host = lay.host_for(fn)
        rec = old_wheels.get(fn)
        fresh = rec is not None and rec.get("size") == st.st_size and rec.get("mtime_ns") == st.st_mtime_ns
        if fresh and host is not None:
            try:
                hst = host.stat()
                fresh = (hst.st_ino == st.st_ino and hst.st_dev == st.st_dev) or (
                    hst.st_size == st.st_size and hst.st_mtime_ns == st.st_mtime_ns
                )
            except OSError:
                fresh = False
        todo.append((fn, path, st, host, str(fname_name), fname_version, rec if fresh else None))
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


def _gather(lay: Layout, old_wheels: dict[str, Record], result: IndexResult) -> tuple[
        dict[str, Record], dict[str, bytes]]:
    """Every listable wheel's record (read only when new or changed) and the METADATA read now."""
    import zipfile
    import zlib

    todo = _listing(lay, old_wheels, result)
    if lay.copy and any(item[6] is None for item in todo):
        lay.files_dir.mkdir(parents=True, exist_ok=True)

    def read_one(item: _Todo) -> tuple[tuple[Record, bytes] | None, str | None]:
        fn, path, st, host = item[:4]
        try:
            return read_wheel(path, st.st_size, host), None
        except (RocmBuildBackendError, zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError,
                zlib.error, RuntimeError, NotImplementedError) as exc:
            if host is not None and fn not in old_wheels:
                try:
                    host.unlink()
                except OSError:
                    pass
            return None, exc.message if isinstance(exc, RocmBuildBackendError) else f"not a readable wheel ({exc})"

    read = parallel(read_one, [item for item in todo if item[6] is None], key=lambda item: item[0])
    new_wheels: dict[str, Record] = {}
    metadata: dict[str, bytes] = {}
    for fn, _path, st, host, fname_name, fname_version, rec in todo:
        if rec is None:
            got, why = read[fn]
            if got is None:
                result.skipped[fn] = why or "not a readable wheel"
                continue
            rec, metadata[fn] = got
            rec["size"], rec["mtime_ns"] = st.st_size, st.st_mtime_ns
            result.read += 1
            if host is not None:
                result.files_written.append(f"{FILES_DIR}/{fn}")
        else:
            result.reused += 1
        why = _mismatch(rec, fname_name, fname_version)
        if why is None:
            new_wheels[fn] = rec
            continue
        result.skipped[fn] = why
        if host is not None and f"{FILES_DIR}/{fn}" in result.files_written:
            result.files_written.remove(f"{FILES_DIR}/{fn}")
            try:
                host.unlink()
            except OSError:
                pass
    return new_wheels, metadata


def _write_sidecars(lay: Layout, wheels: dict[str, Record], metadata: dict[str, bytes], result: IndexResult) -> None:
    """The PEP 658 ``.metadata`` files, byte for byte each wheel's METADATA."""
    import hashlib
    import zipfile

    from rocm_build_backend.wheel.reader import pick_dist_info, read_metadata

    problems: dict[str, str] = {}

    def one(fn: str) -> str | None:
        side = lay.sidecar_for(fn)
        data = metadata.get(fn)
        if data is None:
            try:
                current: bytes | None = side.read_bytes()
            except OSError:
                current = None
            if current is not None and hashlib.sha256(current).hexdigest() == wheels[fn]["metadata_sha256"]:
                return None
            try:
                with zipfile.ZipFile(lay.wheel_dir / fn) as zf:
                    data = read_metadata(zf, pick_dist_info(zf.namelist(), fn, fn.split("-", 1)[0]), fn)
            except (RocmBuildBackendError, zipfile.BadZipFile, OSError, EOFError) as exc:
                problems[fn] = exc.message if isinstance(exc, RocmBuildBackendError) else str(exc)
                return None
        return lay.rel(side) if write_if_changed(side, data, mkdir=False) else None

    if wheels and not lay.in_place:
        lay.files_dir.mkdir(parents=True, exist_ok=True)
    for rel in parallel(one, list(wheels), key=lambda fn: fn).values():
        if rel:
            result.files_written.append(rel)
    for fn, why in problems.items():  # its METADATA cannot be served: it is not listed
        result.skipped[fn] = why
        del wheels[fn]


def _facts(path: Path, rec: Record) -> "WheelTargets":
    from rocm_build_backend.wheel.facts import DeviceFile, WheelTargets

    return WheelTargets(
        path=path,
        name=rec.get("name"),
        version=rec.get("version"),
        stamped=rec.get("stamped", False),
        audited=not rec.get("stamped", False),
        files=[DeviceFile(p, tuple(t), tuple(c), tuple(pr)) for p, t, c, pr in rec.get("files", [])],
        problems=list(rec.get("problems", [])),
        known=rec.get("known", True),
    )


def _pages_for(lay: Layout, index: str, listed: list[str], wheels: dict[str, Record]) -> dict[Path, bytes]:
    """The root page and one page per project of one index, as bytes."""
    by_project: dict[str, list[str]] = {}
    for fn in listed:
        by_project.setdefault(normalize(wheels[fn]["name"]), []).append(fn)
    simple = lay.out_dir / index / "simple"
    pages: dict[Path, bytes] = {}
    projects = []
    for norm in sorted(by_project):
        fns = sorted(by_project[norm], key=lambda f: file_sort_key(wheels[f], f))
        projects.append((norm, str(wheels[fns[-1]]["name"])))
        page_dir = simple / norm
        entries = [(fn, wheels[fn], lay.href(fn, page_dir)) for fn in fns]
        pages[page_dir / "index.html"] = project_html(norm, entries)
        pages[page_dir / "index.json"] = project_json(norm, entries)
    pages[simple / "index.html"] = root_html(index, projects)
    pages[simple / "index.json"] = root_json(projects)
    return pages


def _publish(lay: Layout, all_pages: dict[Path, bytes], result: IndexResult) -> None:
    """Project pages first, root pages last: a new project is listed once its page exists."""
    for wave in (False, True):
        batch = [p for p in all_pages if (p.parent.name == "simple") == wave]
        for d in sorted({p.parent for p in batch}):
            d.mkdir(parents=True, exist_ok=True)
        done = parallel(lambda p: write_if_changed(p, all_pages[p], mkdir=False), batch, key=lambda p: p)
        for page in batch:
            if done[page]:
                result.pages_written.append(lay.rel(page))
            else:
                result.unchanged += 1


def _note_removal(outcome: str | None, rel: str, result: IndexResult) -> None:
    """Record what ``remove_owned`` did: removed (None), or a warning."""
    if outcome is None:
        result.removed.append(rel)
    elif outcome:
        result.warnings.append(outcome)


def build_index(
    wheel_dir: str | Path,
    out_dir: str | Path,
    *,
    targets: Sequence[str | GpuTarget] | str | None = None,
    family: bool = False,
    base_url: str | None = None,
    generic_ok: bool = True,
) -> IndexResult:
    """Write a static PEP 503/691 index per target (or per family) for the wheels in ``wheel_dir``.

    ``targets``: the indexes to write (target IDs; with ``family``, family names or targets);
    by default every target some wheel has code for. ``base_url``: where the wheels are served
    from, when not beside the index. ``generic_ok``: whether generic code counts as loading
    (ROCm 6.4 and newer on the index's users' machines).
    """
    if targets is not None:
        named_targets(targets)  # an empty list is a usage error, before anything is written
    lay = layout(Path(wheel_dir), Path(out_dir), base_url)
    result = IndexResult(out_dir=lay.out_dir, metadata_upload=lay.files_dir if lay.base_url is not None else None)
    state_path = lay.out_dir / STATE_NAME
    state, damaged = load_state(state_path)
    if damaged:
        result.warnings.append(f"the state file {STATE_NAME} is damaged ({damaged}): rebuilt from the folder; "
                               "nothing it listed was removed")
    wheels, metadata = _gather(lay, state["wheels"], result)
    _write_sidecars(lay, wheels, metadata, result)
    plan = index_plan(targets, family, list(wheels.values()))
    facts = {fn: _facts(lay.wheel_dir / fn, rec) for fn, rec in wheels.items()}
    old_indexes: dict[str, Any] = state["indexes"]
    new_indexes: dict[str, Any] = dict(old_indexes)
    all_pages: dict[Path, bytes] = {}
    stale: list[str] = []
    for index, devices in plan.items():
        listed = [fn for fn, wt in facts.items()
                  if all(wt.verdict(d, generic_ok=generic_ok)[0] == "ok" for d in devices)]
        result.indexes[index] = listed
        pages = _pages_for(lay, index, listed, wheels)
        all_pages.update(pages)
        produced = {lay.rel(p) for p in pages}
        stale += [rel for rel in old_indexes.get(index, {}).get("pages", []) if rel not in produced]
        new_indexes[index] = {"pages": sorted(produced), "wheels": sorted(listed)}
    _publish(lay, all_pages, result)
    for rel in stale:
        _note_removal(remove_owned(lay.out_dir, rel), rel, result)
    # hosted copies and sidecars nobody links to any more
    referenced = {fn for idx in new_indexes.values() for fn in idx.get("wheels", [])}
    hosted = {lay.rel(lay.sidecar_for(fn)) for fn in referenced}
    if lay.copy:
        hosted |= {f"{FILES_DIR}/{fn}" for fn in referenced}
    for rel in state.get("hosted", []):
        if rel not in hosted:
            _note_removal(remove_owned(lay.out_dir, rel), rel, result)
    state = {"version": STATE_VERSION, "wheels": wheels, "indexes": new_indexes, "hosted": sorted(hosted)}
    write_if_changed(state_path, (json.dumps(state, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8"))
    for fn, wt in facts.items():
        if not any(fn in v for v in result.indexes.values()):
            result.warnings.append(f"{fn} loads on none of the indexes written ({', '.join(wt.targets) or 'no code'})")
    return result
