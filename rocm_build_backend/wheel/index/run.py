"""A static package index per GPU target (or per AMD family): ``rocm-build-backend index``.

``build_index(WHEEL_DIR, OUT)`` writes, for each target T::

    OUT/T/simple/index.html            PEP 503 root page: one anchor per project
    OUT/T/simple/index.json            the same as PEP 691 JSON
    OUT/T/simple/<name>/index.html     PEP 503 project page: one anchor per wheel that loads on T
    OUT/T/simple/<name>/index.json     the same as PEP 691 JSON
    OUT/files/<hash>/<wheel>           the wheels, copied (a copy-on-write clone where the
                                       filesystem has them); <hash>: 16 hex digits of its sha256
    OUT/files/<hash>/<wheel>.metadata  PEP 658/714 core metadata, byte-for-byte the wheel's METADATA
    OUT/variants/simple/...            with ``variants=True``: every variant wheel (``-<label>.whl``)
                                       and each ``<name>-<version>-variants.json`` (index_variants.py)
    OUT/.split/<wheel>-<size>-<mtime>/ with ``split=True``: the per-target wheels a fat wheel was
                                       split into, indexed instead of it (index_split.py)
    OUT/.rocm-build-backend-index.json per-wheel facts, so a later run does not re-hash them
    OUT/.rocm-build-backend-index.lock held while a run writes, so concurrent runs take turns

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

Consistent at every moment: a hosted wheel is named after its content, so a new wheel under an
old file name is hosted beside the old one; its ``.metadata`` file, then the project pages,
then the root pages are written, and only then is the old copy removed. A page read at any
moment links to files that exist with the hashes it gives. (When WHEEL_DIR is inside OUT the
wheels are served where they are: replacing one there is the user's own step.)

This module strings the steps together and keeps the state file; the plan is
``index_plan.py``, the page bytes ``index_pages.py``, the file work ``index_files.py``. It must
not delete anything outside the output folder nor anything it did not write there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rocm_build_backend.gpu.targets import GpuTarget
from rocm_build_backend.wheel.facts import DeviceFile, WheelTargets, modules_from_json
from rocm_build_backend.wheel.index.files import (
    FILES_DIR,
    Layout,
    Record,
    layout,
    parallel,
    write_if_changed,
)
from rocm_build_backend.wheel.index.pages import (  # noqa: F401 (API_VERSION, normalize: re-exported)
    API_VERSION,
    Entry,
    file_sort_key,
    normalize,
    project_html,
    project_json,
    root_html,
    root_json,
    version_key,
)
from rocm_build_backend.wheel.index.plan import (  # noqa: F401
    families,
    family_of,
    index_plan,
    named_targets,
)
from rocm_build_backend.wheel.index.split import prune, split_sources
from rocm_build_backend.wheel.index.state import (
    STATE_NAME,
    STATE_VERSION,
    abandoned_stages,
    load_state,
    locked,
    remove_owned,
)
from rocm_build_backend.wheel.index.variants import INDEX, json_files
from rocm_build_backend.wheel.index.variants import listed as variants_listed
from rocm_build_backend.wheel.index.wheels import gather, write_sidecars

__all__ = [
    "API_VERSION",
    "families",
    "FILES_DIR",
    "STATE_NAME",
    "STATE_VERSION",
    "IndexResult",
    "build_index",
    "family_of",
    "normalize",
]

SCHEMA_VERSION = 1  # of the --json output: docs/json/index.md, data/schemas/index.schema.json


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

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
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


# --------------------------------------------------------------------------------------------
# the steps


def _facts(path: Path, rec: Record) -> "WheelTargets":
    def device_file(row: list[Any]) -> DeviceFile:
        path, targets, complete, problems, *more = row  # records written before modules have 4
        return DeviceFile(path, tuple(targets), tuple(complete), tuple(problems),
                          modules_from_json(more[0] if more else None),
                          modules_from_json(more[1] if len(more) > 1 else None) or ())

    return WheelTargets(
        path=path,
        name=rec.get("name"),
        version=rec.get("version"),
        stamped=rec.get("stamped", False),
        audited=not rec.get("stamped", False),
        files=[device_file(row) for row in rec.get("files", [])],
        problems=list(rec.get("problems", [])),
        known=rec.get("known", True),
    )


def _pages_for(lay: Layout, index: str, listed: list[str], wheels: dict[str, Record],
               extra: dict[str, list[Entry]] | None = None) -> dict[Path, bytes]:
    """The root page and one page per project of one index, as bytes; ``extra``: more entries
    per project (the variants JSON files)."""
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
        entries = [(fn, wheels[fn], lay.href(fn, wheels[fn], page_dir)) for fn in fns]
        entries += (extra or {}).get(norm, [])
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
    variants: bool = False,
    split: bool = False,
) -> IndexResult:
    """Write a static PEP 503/691 index per target (or per family) for the wheels in ``wheel_dir``.

    ``targets``: the indexes to write (target IDs; with ``family``, family names or targets);
    by default every target some wheel has code for. ``base_url``: where the wheels are served
    from, when not beside the index. ``generic_ok``: whether generic code counts as loading
    (ROCm 6.4 and newer on the index's users' machines). ``variants``: also write
    ``OUT/variants/simple/`` with every variant wheel and its versions' variants JSON
    (``index_variants.py``); without it variant wheels are skipped. ``split``: a wheel with
    code for several targets is split per target on the way in and the split wheels are
    indexed instead (``index_split.py``).
    """
    if targets is not None:
        named_targets(targets)  # an empty list is a usage error, before anything is written
    lay = layout(Path(wheel_dir), Path(out_dir), base_url)
    with locked(lay.out_dir):  # runs into one folder (CI jobs publishing at once) take turns
        if not split:
            return _build(lay, targets, family, generic_ok, variants)

        skipped: dict[str, str] = {}
        lay.sources, used = split_sources(lay.wheel_dir, lay.out_dir, skipped)
        result = _build(lay, targets, family, generic_ok, variants)
        result.skipped.update(skipped)
        result.removed += prune(lay.out_dir, used)
        return result


def _index_one(lay: Layout, index: str, listed: list[str], wheels: dict[str, Record],
               extra: dict[str, list[Entry]] | None = None, extra_files: Sequence[Path] = ()) -> tuple[
        dict[Path, bytes], dict[str, Any]]:
    """One index's pages, and its entry in the state: its pages, wheels and the files they link to."""
    pages = _pages_for(lay, index, listed, wheels, extra)
    hosted = {lay.rel(lay.sidecar_for(fn, wheels[fn])) for fn in listed} | {lay.rel(p) for p in extra_files}
    if lay.copy:
        hosted |= {lay.rel(lay.host_for(fn, wheels[fn]) or lay.files_dir) for fn in listed}
    return pages, {"pages": sorted(lay.rel(p) for p in pages), "wheels": sorted(listed), "hosted": sorted(hosted)}


def _variant_index(lay: Layout, wheels: dict[str, Record], result: IndexResult) -> tuple[
        dict[Path, bytes], dict[str, Any]]:
    """The variants index: its JSON files written (before any page links them), its pages."""
    listed = variants_listed(wheels)  # the variant wheels, and the plain ones of their projects
    files, extra = json_files(lay, wheels, listed)
    for path, data in files.items():
        if write_if_changed(path, data):
            result.files_written.append(lay.rel(path))
    result.indexes[INDEX] = listed
    return _index_one(lay, INDEX, listed, wheels, extra, sorted(files))


def _build(lay: Layout, targets: Sequence[str | GpuTarget] | str | None, family: bool,
           generic_ok: bool, variants: bool = False) -> IndexResult:
    """``build_index`` with the output folder held: read, host, write pages, then clean up."""
    result = IndexResult(out_dir=lay.out_dir, metadata_upload=lay.files_dir if lay.base_url is not None else None)
    state_path = lay.out_dir / STATE_NAME
    state, damaged = load_state(state_path)
    if damaged:
        result.warnings.append(f"the state file {STATE_NAME} is damaged ({damaged}): rebuilt from the folder; "
                               "nothing it listed was removed")
    for rel in abandoned_stages(lay.out_dir):  # what a killed run left half-copied
        _note_removal(remove_owned(lay.out_dir, rel), rel, result)
    wheels, metadata = gather(lay, state["wheels"], result.skipped, variants)
    result.read, result.reused = len(metadata), len(wheels) - len(metadata)
    result.files_written += [lay.rel(host) for fn in metadata if (host := lay.host_for(fn, wheels[fn]))]
    result.files_written += write_sidecars(lay, wheels, metadata, result.skipped)
    if not wheels and not result.skipped:
        result.warnings.append(f"{lay.wheel_dir} holds no wheels")
    plain = {fn: rec for fn, rec in wheels.items() if "variant" not in rec}
    if variants and targets is None and not any(rec.get("files") for rec in plain.values()):
        plan = {}  # only variant wheels (or none with device code): no per-target index
    else:
        plan = index_plan(targets, family, list(plain.values()))
    facts = {fn: _facts(lay.source(fn), rec) for fn, rec in plain.items()}
    old_indexes: dict[str, Any] = state["indexes"]
    new_indexes: dict[str, Any] = dict(old_indexes)
    all_pages: dict[Path, bytes] = {}
    stale: list[str] = []
    for index, devices in plan.items():
        listed = [fn for fn, wt in facts.items()
                  if all(wt.verdict(d, generic_ok=generic_ok)[0] == "ok" for d in devices)]
        result.indexes[index] = listed
        pages, new_indexes[index] = _index_one(lay, index, listed, wheels)
        all_pages.update(pages)
        stale += [rel for rel in old_indexes.get(index, {}).get("pages", []) if rel not in new_indexes[index]["pages"]]
    if variants:
        pages, new_indexes[INDEX] = _variant_index(lay, wheels, result)
        all_pages.update(pages)
        stale += [rel for rel in old_indexes.get(INDEX, {}).get("pages", []) if rel not in new_indexes[INDEX]["pages"]]
    _publish(lay, all_pages, result)
    for rel in stale:
        _note_removal(remove_owned(lay.out_dir, rel), rel, result)
    # hosted copies and sidecars no page links to any more; an index kept from an older state
    # that does not say what it links to keeps everything this run
    hosted = {rel for idx in new_indexes.values() for rel in idx.get("hosted", [])}
    if all("hosted" in idx for idx in new_indexes.values()):
        for rel in state.get("hosted", []):
            if rel not in hosted:
                _note_removal(remove_owned(lay.out_dir, rel), rel, result)
    else:
        hosted |= set(state.get("hosted", []))
    state = {"version": STATE_VERSION, "wheels": wheels, "indexes": new_indexes, "hosted": sorted(hosted)}
    write_if_changed(state_path, (json.dumps(state, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8"))
    for fn, wt in facts.items():
        if not any(fn in v for v in result.indexes.values()):
            result.warnings.append(f"{fn} loads on none of the indexes written ({', '.join(wt.targets) or 'no code'})")
    return result
