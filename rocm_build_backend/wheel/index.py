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
``gfx110X-all``, ``gfx120X-all``, ...); a wheel appears in a family's index only when it loads
on every member, since anyone in the family may install from it. A target outside the table
below is a family of its own name.

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
"""

from __future__ import annotations

import html
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from rocm_build_backend.errors import ConfigError, RocmBuildBackendError, UnknownTargetError
from rocm_build_backend.gpu.targets import GpuTarget

STATE_NAME = ".rocm-build-backend-index.json"
STATE_VERSION = 1
FILES_DIR = "files"
API_VERSION = "1.1"

# AMD's per-family nightly indexes (TheRock's families; the published indexes are gfx94X-dcgpu,
# gfx950-dcgpu, gfx110X-all, gfx1151 and gfx120X-all). A processor not listed here is a family
# of its own name, as in TheRock.
FAMILIES: dict[str, tuple[str, ...]] = {
    "gfx90X-dcgpu": ("gfx906", "gfx908", "gfx90a"),
    "gfx94X-dcgpu": ("gfx942",),
    "gfx950-dcgpu": ("gfx950",),
    "gfx101X-dgpu": ("gfx1010", "gfx1011", "gfx1012"),
    "gfx103X-dgpu": ("gfx1030", "gfx1032"),
    "gfx103X-igpu": ("gfx1035", "gfx1036"),
    "gfx110X-all": ("gfx1100", "gfx1101", "gfx1102", "gfx1103"),
    "gfx1150": ("gfx1150",),
    "gfx1151": ("gfx1151",),
    "gfx1152": ("gfx1152",),
    "gfx1153": ("gfx1153",),
    "gfx120X-all": ("gfx1200", "gfx1201"),
}


def family_of(processor: str) -> str:
    """The AMD family index a processor belongs to (itself when it has none)."""
    for name, members in FAMILIES.items():
        if processor in members:
            return name
    return processor


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

    def to_dict(self) -> dict:
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
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# small helpers


def normalize(name: str) -> str:
    """PEP 503 normalised project name."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _parallel(fn, items: list, *, key=lambda item: item[0]) -> dict:
    """``{key(item): fn(item)}``, run on a few threads: hashing and file creation release the GIL."""
    if len(items) < 8:
        return {key(item): fn(item) for item in items}
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 1) + 2)) as pool:
        return dict(zip((key(item) for item in items), pool.map(fn, items)))


def _atomic_write(path: Path, data: bytes, *, mkdir: bool = True) -> None:
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
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


def _write_if_changed(path: Path, data: bytes, *, mkdir: bool = True) -> bool:
    try:
        with open(path, "rb") as fh:
            if fh.read() == data:
                return False
    except OSError:
        pass
    _atomic_write(path, data, mkdir=mkdir)
    return True


def _version_key(version: str):
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(version), version)
    except InvalidVersion:
        return (0, None, version)


def _file_sort_key(rec: dict, fn: str):
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(rec["version"])
        return (1, v, fn)
    except (InvalidVersion, TypeError):
        return (0, Version("0"), fn)


_local = threading.local()


def _buffer() -> memoryview:
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = memoryview(bytearray(1 << 20))
    return buf


def _read_wheel(path: Path, size: int, host: Path | None) -> tuple[dict, bytes]:
    """Hash a wheel and read its facts in one open; copy it to ``host`` on the way when asked.

    The bytes are hashed through one reused buffer (no allocation per wheel), then the zip's
    central directory and the two small members are read from the same open file.
    Returns (record for the state file, METADATA bytes).
    """
    import hashlib
    import zipfile

    from rocm_build_backend.wheel.check import _parse_metadata, _pick_dist_info, facts_from_zip

    h = hashlib.sha256()
    linked = host is not None and _link(path, host)
    with open(path, "rb") as fh:
        if host is not None and not linked:
            buf = _buffer()
            tmp = host.with_name(f".{host.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            try:
                with open(tmp, "wb") as dst:
                    while n := fh.readinto(buf):
                        h.update(buf[:n])
                        dst.write(buf[:n])
                import shutil

                shutil.copystat(path, tmp)
                os.replace(tmp, host)
            except BaseException:
                try:
                    tmp.unlink()
                except OSError:
                    pass
                raise
        elif hasattr(hashlib, "file_digest"):
            h = hashlib.file_digest(fh, "sha256")
        else:  # Python 3.10
            buf = _buffer()
            while n := fh.readinto(buf):
                h.update(buf[:n])
        fh.seek(0)
        with zipfile.ZipFile(fh) as zf:
            wt = facts_from_zip(zf, path, audit=False)
            dist_info = _pick_dist_info(zf.namelist(), path.name, path.name.split("-", 1)[0])
            metadata = zf.read(f"{dist_info}/METADATA")
    meta = _parse_metadata(metadata.decode("utf-8", "replace"))
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


def _facts(path: Path, rec: dict):
    from rocm_build_backend.wheel.check import DeviceFile, WheelTargets

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


def _derive_targets(records: Iterable[dict]) -> list[GpuTarget]:
    """The device targets the wheels' code is for, as processors a machine can have."""
    import re

    from rocm_build_backend.gpu.targets import parse_target, sort_targets, table

    found: set[GpuTarget] = set()
    for rec in records:
        for _path, _targets, complete, _problems in rec.get("files", []):
            for code in complete:
                try:
                    t = parse_target(code)
                except UnknownTargetError:
                    continue
                nv = re.fullmatch(r"(?:sm|compute)_([0-9]+)[af]?", t.processor)
                if nv:
                    found.add(GpuTarget(f"sm_{nv.group(1)}"))
                elif t.is_generic:
                    found.update(GpuTarget(p) for p, row in table().items() if row.get("generic") == t.processor)
                else:
                    found.add(GpuTarget(t.processor))
    return sort_targets(found)


def _index_plan(targets, family: bool, records: list[dict]) -> dict[str, list[GpuTarget]]:
    """Index name -> the devices a wheel must load on to be listed there."""
    from rocm_build_backend.gpu.targets import parse_target, parse_targets, split_targets

    plan: dict[str, list[GpuTarget]] = {}
    if targets is None:
        chosen = _derive_targets(records)
        if not chosen:
            raise ConfigError(
                ["no GPU targets to index: none of the wheels holds device code"],
                hint="name the indexes to write: --targets gfx90a,gfx942",
            )
    elif family:
        chosen = []
        names = [str(t) for t in targets] if not isinstance(targets, str) else split_targets(targets)
        problems = []
        for name in split_targets(names):
            if name in FAMILIES:
                plan[name] = [GpuTarget(p) for p in FAMILIES[name]]
                continue
            try:
                chosen.append(parse_target(name))
            except UnknownTargetError as exc:
                problems.append(exc.message)
        if problems:
            raise ConfigError(problems, hint="name AMD targets or families: " + ", ".join(FAMILIES))
    else:
        chosen = [t if isinstance(t, GpuTarget) else None for t in ([] if isinstance(targets, str) else targets)]
        if isinstance(targets, str) or None in chosen:
            chosen = parse_targets([str(t) for t in ([targets] if isinstance(targets, str) else targets)])
    if family:
        for t in chosen:
            fam = family_of(t.processor)
            plan.setdefault(fam, [GpuTarget(p) for p in FAMILIES.get(fam, (t.processor,))])
        return dict(sorted(plan.items(), key=lambda kv: _family_order(kv[0])))
    for t in chosen:
        plan[str(t).replace(":", "_")] = [t]
    return plan


def _family_order(name: str):
    order = list(FAMILIES)
    return (order.index(name), name) if name in order else (len(order), name)


# --------------------------------------------------------------------------------------------
# pages


_HEAD = (
    "<!DOCTYPE html>\n<html>\n  <head>\n"
    f'    <meta name="pypi:repository-version" content="{API_VERSION}">\n'
    "    <title>{title}</title>\n  </head>\n  <body>\n"
)
_TAIL = "  </body>\n</html>\n"


def _root_html(index: str, projects: list[tuple[str, str]]) -> bytes:
    out = [_HEAD.format(title=html.escape(f"Simple index ({index})"))]
    for norm, _display in projects:
        out.append(f'    <a href="{html.escape(norm)}/">{html.escape(norm)}</a><br>\n')
    out.append(_TAIL)
    return "".join(out).encode("utf-8")


def _root_json(projects: list[tuple[str, str]]) -> bytes:
    doc = {"meta": {"api-version": API_VERSION}, "projects": [{"name": d} for _n, d in projects]}
    return (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")


def _project_html(norm: str, entries: list[tuple[str, dict, str]]) -> bytes:
    out = [_HEAD.format(title=html.escape(f"Links for {norm}")), f"    <h1>Links for {html.escape(norm)}</h1>\n"]
    for fn, rec, href in entries:
        attrs = f' href="{html.escape(href + "#sha256=" + rec["sha256"])}"'
        if rec.get("requires_python"):
            attrs += f' data-requires-python="{html.escape(rec["requires_python"])}"'
        meta = html.escape("sha256=" + rec["metadata_sha256"])
        attrs += f' data-core-metadata="{meta}" data-dist-info-metadata="{meta}"'
        out.append(f"    <a{attrs}>{html.escape(fn)}</a><br>\n")
    out.append(_TAIL)
    return "".join(out).encode("utf-8")


def _project_json(norm: str, entries: list[tuple[str, dict, str]]) -> bytes:
    files, versions = [], set()
    for fn, rec, href in entries:
        item = {
            "filename": fn,
            "url": href,
            "hashes": {"sha256": rec["sha256"]},
            "size": rec["size"],
            "core-metadata": {"sha256": rec["metadata_sha256"]},
            "dist-info-metadata": {"sha256": rec["metadata_sha256"]},
        }
        if rec.get("requires_python"):
            item["requires-python"] = rec["requires_python"]
        files.append(item)
        if rec.get("version"):
            versions.add(rec["version"])
    doc = {
        "meta": {"api-version": API_VERSION},
        "name": norm,
        "files": files,
        "versions": sorted(versions, key=_version_key),
    }
    return (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")


# --------------------------------------------------------------------------------------------
# the builder


def _load_state(path: Path) -> dict:
    try:
        state = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {"version": STATE_VERSION, "wheels": {}, "indexes": {}, "hosted": []}
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        return {"version": STATE_VERSION, "wheels": {}, "indexes": {}, "hosted": []}
    state.setdefault("wheels", {})
    state.setdefault("indexes", {})
    state.setdefault("hosted", [])
    return state


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.relative_to(parent)
    except ValueError:
        return False
    return True


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
    from urllib.parse import quote

    wheel_dir, out_dir = Path(wheel_dir), Path(out_dir)
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
    out_dir.mkdir(parents=True, exist_ok=True)
    out_real, wheels_real = out_dir.resolve(), wheel_dir.resolve()
    files_dir = out_dir / FILES_DIR
    in_place = base_url is None and _inside(wheels_real, out_real)
    copy = base_url is None and not in_place
    result = IndexResult(out_dir=out_dir)
    if base_url is not None:
        result.metadata_upload = files_dir
    state_path = out_dir / STATE_NAME
    state = _load_state(state_path)
    old_wheels: dict = state["wheels"]
    new_wheels: dict = {}

    # 1. facts for every wheel, read only when new or changed
    try:
        listing = sorted(p for p in wheel_dir.iterdir() if p.name.endswith(".whl") and p.is_file())
    except OSError as exc:
        raise RocmBuildBackendError(f"cannot list {wheel_dir}: {exc.strerror or exc}") from None
    if not listing:
        result.warnings.append(f"{wheel_dir} holds no wheels")
    import zipfile

    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    metadata_cache: dict[str, bytes] = {}
    todo = []  # (fn, path, stat, host, parsed name, parsed version, cached record or None)
    for path in listing:
        fn = path.name
        try:
            fname_name, fname_version, _build, _tags = parse_wheel_filename(fn)
        except InvalidWheelFilename as exc:
            result.skipped[fn] = f"not a valid wheel file name ({exc})"
            continue
        st = path.stat()
        host = files_dir / fn if copy else None
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
        todo.append((fn, path, st, host, fname_name, fname_version, rec if fresh else None))
    if copy and any(item[6] is None for item in todo):
        files_dir.mkdir(parents=True, exist_ok=True)

    def read_one(item):
        fn, path, st, host, *_rest = item
        try:
            return _read_wheel(path, st.st_size, host), None
        except (RocmBuildBackendError, zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as exc:
            if host is not None and fn not in old_wheels:
                try:
                    host.unlink()
                except OSError:
                    pass
            return None, exc.message if isinstance(exc, RocmBuildBackendError) else f"not a readable wheel ({exc})"

    read = _parallel(read_one, [item for item in todo if item[6] is None])
    for fn, path, st, host, fname_name, fname_version, rec in todo:
        if rec is not None:
            result.reused += 1
        else:
            got, why = read[fn]
            if got is None:
                result.skipped[fn] = why
                continue
            rec, metadata = got
            rec["size"], rec["mtime_ns"] = st.st_size, st.st_mtime_ns
            metadata_cache[fn] = metadata
            result.read += 1
            if host is not None:
                result.files_written.append(f"{FILES_DIR}/{fn}")
        why = None
        if rec.get("name") is None or normalize(rec["name"]) != normalize(str(fname_name)):
            why = f"its METADATA names {rec.get('name')!r}, the file name {fname_name!s}"
        elif _version_key(rec.get("version") or "")[1] != fname_version:
            why = f"its METADATA says version {rec.get('version')}, the file name {fname_version}"
        elif not rec.get("known", True):
            why = "; ".join(rec.get("problems", [])) or "its device code could not be read"
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

    # 2. the .metadata sidecars (PEP 658): beside the wheel in place, else in OUT/files
    def sidecar_for(fn: str) -> Path:
        return (wheel_dir / f"{fn}.metadata") if in_place else (files_dir / f"{fn}.metadata")

    import hashlib

    def sidecar_one(fn: str) -> str | None:
        rec = new_wheels[fn]
        side = sidecar_for(fn)
        data = metadata_cache.get(fn)
        if data is None:
            try:
                current = side.read_bytes()
            except OSError:
                current = None
            if current is not None and hashlib.sha256(current).hexdigest() == rec["metadata_sha256"]:
                return None
            from rocm_build_backend.wheel.check import _pick_dist_info

            with zipfile.ZipFile(wheel_dir / fn) as zf:
                data = zf.read(f"{_pick_dist_info(zf.namelist(), fn, fn.split('-', 1)[0])}/METADATA")
        if _write_if_changed(side, data, mkdir=False):
            return os.path.relpath(side, out_dir).replace(os.sep, "/")
        return None

    if new_wheels and not in_place:
        files_dir.mkdir(parents=True, exist_ok=True)
    for fn, rel in _parallel(sidecar_one, list(new_wheels), key=lambda fn: fn).items():
        if rel:
            result.files_written.append(rel)

    # 3. which wheel goes in which index
    plan = _index_plan(targets, family, list(new_wheels.values()))
    facts = {fn: _facts(wheel_dir / fn, rec) for fn, rec in new_wheels.items()}
    old_indexes: dict = state["indexes"]
    new_indexes: dict = dict(old_indexes)
    all_pages: dict[Path, bytes] = {}
    stale: list[str] = []
    for index, devices in plan.items():
        listed = []
        for fn, wt in facts.items():
            if all(wt.verdict(d, generic_ok=generic_ok)[0] == "ok" for d in devices):
                listed.append(fn)
        result.indexes[index] = listed
        by_project: dict[str, list[str]] = {}
        for fn in listed:
            by_project.setdefault(normalize(new_wheels[fn]["name"]), []).append(fn)
        simple = out_dir / index / "simple"
        pages: dict[Path, bytes] = {}
        projects = []
        for norm in sorted(by_project):
            fns = sorted(by_project[norm], key=lambda f: _file_sort_key(new_wheels[f], f))
            display = new_wheels[fns[-1]]["name"]
            projects.append((norm, display))
            page_dir = simple / norm
            entries = []
            for fn in fns:
                if base_url is not None:
                    href = f"{base_url}/{quote(fn)}"
                else:
                    target = (wheel_dir / fn) if in_place else (files_dir / fn)
                    rel = os.path.relpath(target, page_dir).replace(os.sep, "/")
                    href = "/".join(quote(part) for part in rel.split("/"))
                entries.append((fn, new_wheels[fn], href))
            pages[page_dir / "index.html"] = _project_html(norm, entries)
            pages[page_dir / "index.json"] = _project_json(norm, entries)
        pages[simple / "index.html"] = _root_html(index, projects)
        pages[simple / "index.json"] = _root_json(projects)
        all_pages.update(pages)
        produced = {os.path.relpath(p, out_dir).replace(os.sep, "/") for p in pages}
        for rel in old_indexes.get(index, {}).get("pages", []):
            if rel not in produced:
                stale.append(rel)
        new_indexes[index] = {"pages": sorted(produced), "wheels": sorted(listed)}

    # project pages first, root pages last: a new project is listed once its page exists
    for wave in (False, True):
        batch = [p for p in all_pages if (p.parent.name == "simple") == wave]
        for d in sorted({p.parent for p in batch}):
            d.mkdir(parents=True, exist_ok=True)
        done = _parallel(lambda p: _write_if_changed(p, all_pages[p], mkdir=False), batch, key=lambda p: p)
        for page in batch:
            if done[page]:
                result.pages_written.append(os.path.relpath(page, out_dir).replace(os.sep, "/"))
            else:
                result.unchanged += 1
    for rel in stale:
        _remove(out_dir, rel, result)

    # 4. hosted copies and sidecars nobody links to any more
    referenced = {fn for idx in new_indexes.values() for fn in idx.get("wheels", [])}
    hosted = set()
    for fn in referenced:
        if copy:
            hosted.add(f"{FILES_DIR}/{fn}")
        side = sidecar_for(fn)
        hosted.add(os.path.relpath(side, out_dir).replace(os.sep, "/"))
    for rel in state.get("hosted", []):
        if rel not in hosted:
            _remove(out_dir, rel, result)
    # a wheel dropped from every index keeps no copy: forget its facts only if it is gone
    keep = {fn: rec for fn, rec in new_wheels.items()}
    state = {"version": STATE_VERSION, "wheels": keep, "indexes": new_indexes, "hosted": sorted(hosted)}
    _write_if_changed(state_path, (json.dumps(state, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8"))
    for fn, wt in facts.items():
        if not any(fn in v for v in result.indexes.values()):
            result.warnings.append(f"{fn} loads on none of the indexes written ({', '.join(wt.targets) or 'no code'})")
    return result


def _remove(out_dir: Path, rel: str, result: IndexResult) -> None:
    path = out_dir / rel
    if ".." in Path(rel).parts:
        return
    try:
        path.unlink()
    except FileNotFoundError:
        return
    except OSError as exc:
        result.warnings.append(f"could not remove {rel}: {exc.strerror or exc}")
        return
    result.removed.append(rel)
    parent = path.parent
    while parent != out_dir and _inside(parent, out_dir):
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent
