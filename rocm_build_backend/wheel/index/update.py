"""The pages of one index run: the projects it renders, in which indexes; root pages; removals.

``update_pages`` renders the pages of the projects a run changed (every project of an index
that is new or was redefined), writes those whose bytes changed, project pages first and root
pages last (a root page is rendered once per run, from the ``projects`` table, and only when
a project came, went or was renamed), and records what each page links (``listed``); the
top-level ``OUT/index.html`` lists the indexes. A wheel's verdict is worked out once per kind
of wheel (what its files hold) and index. An index new to the output is written as a whole
tree under a temporary name and moved into place once, so no client sees it half-built. ``remove_unlinked`` then removes the pages no
index produces any more, and each hosted file no page links (``pending`` rows): pages before
the files they link, so a page read at any moment links to files that exist.

It runs inside the caller's transaction and writes only pages, variants JSON files and rows.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rocm_build_backend.gpu.targets import GpuTarget
from rocm_build_backend.wheel.facts import DeviceFile, WheelTargets, modules_from_json
from rocm_build_backend.wheel.index.files import Layout, Record, parallel, tmp_name, write_failed, write_if_changed
from rocm_build_backend.wheel.index.pages import (
    Entry,
    file_sort_key,
    is_top_html,
    project_html,
    project_json,
    root_html,
    root_json,
    top_html,
)
from rocm_build_backend.wheel.index.result import IndexResult
from rocm_build_backend.wheel.index.state import remove_owned
from rocm_build_backend.wheel.index.store import Store
from rocm_build_backend.wheel.index.variants import INDEX as VARIANTS
from rocm_build_backend.wheel.index.variants import json_files
from rocm_build_backend.wheel.index.variants import listed as variants_listed

_PROJECT = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")  # a PEP 503 normalised name
_INDEX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
TOP_PAGE = "index.html"
BATCH = 2000  # pages held in memory before they are written


@dataclass
class IndexDef:
    """One index of this run: the devices a wheel must load on to be listed, and how much to render."""

    name: str
    devices: list[GpuTarget]
    generic_ok: bool = True
    full: bool = False  # render every project: the index is new, redefined, or the layout changed
    new: bool = False  # the output holds no index of this name yet
    requested: bool = False  # named by this run's targets


def facts_of(rec: Record) -> WheelTargets:
    """The ``WheelTargets`` a stored record stands for (its path is only a label)."""

    def device_file(row: list[Any]) -> DeviceFile:
        path, targets, complete, problems, *more = row  # records written before modules have 4
        return DeviceFile(
            path,
            tuple(targets),
            tuple(complete),
            tuple(problems),
            modules_from_json(more[0] if more else None),
            modules_from_json(more[1] if len(more) > 1 else None) or (),
        )

    return WheelTargets(
        path=Path(str(rec.get("name"))),
        name=rec.get("name"),
        version=rec.get("version"),
        stamped=rec.get("stamped", False),
        audited=not rec.get("stamped", False),
        files=[device_file(row) for row in rec.get("files", [])],
        problems=list(rec.get("problems", [])),
        known=rec.get("known", True),
    )


class _Run:
    """The page work of one run (one object, so the steps share their caches and counters)."""

    def __init__(
        self, lay: Layout, store: Store, plan: list[IndexDef], todo: set[str], recovering: bool, result: IndexResult
    ) -> None:
        self.lay, self.store, self.plan, self.todo, self.result = lay, store, plan, todo, result
        self.recovering = recovering
        self.roots = {d.name for d in plan if d.full or recovering}
        self.doomed: list[str] = []
        self.batch: dict[Path, bytes] = {}
        self.bulk: list[tuple[str, str, dict[str, str], str]] = []  # rows of indexes new this run
        self.trees: dict[str, Path] = {}  # new indexes, built under a temporary name
        self.verdicts: dict[tuple[str, str], bool] = {}
        self.kinds: dict[str, str] = {}
        self.orders: dict[str, Any] = {}

    def loads(self, d: IndexDef, fn: str, rec: Record) -> bool:
        """Whether a wheel loads on every device of the index (one verdict per kind of wheel:
        what its files hold, not what they are called)."""
        kind = self.kinds.get(fn)
        if kind is None:
            kind = self.kinds[fn] = repr(
                (rec.get("known", True), rec.get("problems", []), [row[1:] for row in rec.get("files", [])])
            )
        key = (d.name, kind)
        got = self.verdicts.get(key)
        if got is None:
            wt = facts_of(rec)
            got = self.verdicts[key] = all(wt.verdict(dev, generic_ok=d.generic_ok)[0] == "ok" for dev in d.devices)
        return got

    def order(self, fn: str, rec: Record) -> Any:
        """``file_sort_key`` of a wheel, worked out once per run."""
        key = self.orders.get(fn)
        if key is None:
            key = self.orders[fn] = file_sort_key(rec, fn)
        return key

    def page_dir(self, index: str, project: str) -> Path | None:
        if not _INDEX.match(index) or not _PROJECT.match(project):
            self.result.warnings.append(
                f"the state names the project {project!r} in {index!r}, which is not a "
                "page this index writes: left alone"
            )
            return None
        return self.lay.out_dir / index / "simple" / project

    def entries(self, d: IndexDef, project: str, recs: dict[str, Record], page_dir: Path) -> list[Entry]:
        if d.name == VARIANTS:
            # the variant wheels and, as the fallback, the plain wheels of their projects; a wheel whose
            # variant.json fails its checks is skipped (the others are listed)
            files, extra, kept = json_files(self.lay, recs, variants_listed(recs), self.result.skipped)
            fns = sorted(kept, key=lambda f: self.order(f, recs[f]))
            for path, data in files.items():  # written (and recorded) before the page links them
                self.store.add_hosted([(self.lay.rel(path), path.name, _sha(data))])
                if self.write(path, data):
                    self.result.files_written.append(self.lay.rel(path))
            more = extra.get(project, [])
        else:
            fns = sorted(
                (fn for fn, rec in recs.items() if "variant" not in rec and self.loads(d, fn, rec)),
                key=lambda f: self.order(f, recs[f]),
            )
            more = []
        return [(fn, recs[fn], self.lay.href(fn, recs[fn], page_dir)) for fn in fns] + more

    def write(self, path: Path, data: bytes) -> bool:
        try:
            return write_if_changed(path, data)
        except OSError as exc:
            raise write_failed(exc, self.lay.out_dir, path) from None

    def project(self, project: str, recs: dict[str, Record]) -> None:
        for d in self.plan:
            if not (d.full or project in self.todo):
                continue
            page_dir = self.page_dir(d.name, project)
            if page_dir is None:
                continue
            entries = self.entries(d, project, recs, page_dir)
            wheels = [e for e in entries if e[0].endswith(".whl")]
            new = str(wheels[-1][1]["name"]) if wheels else None
            if wheels:
                self.batch[page_dir / "index.html"] = project_html(project, entries)
                self.batch[page_dir / "index.json"] = project_json(project, entries)
            links = {fn: str(rec["sha256"]) for fn, rec, _href in entries} if wheels else {}
            if d.new:  # nothing to compare with: rows written in bulk
                if wheels:
                    self.bulk.append((d.name, project, links, str(new)))
                continue
            old = self.store.display(d.name, project)
            if not wheels and (old is not None or (self.recovering and project in self.todo)):
                self.doomed += [self.lay.rel(page_dir / "index.html"), self.lay.rel(page_dir / "index.json")]
            before = self.store.listed(d.name, project)
            if links != before:
                for fn, sha in before.items():
                    if links.get(fn) != sha:  # a file this page no longer links: removed unless linked elsewhere
                        self.store.check_hosted_of(fn)
                self.store.set_listed(d.name, project, links, before)
            if new != old:
                self.store.set_display(d.name, project, new)
                self.roots.add(d.name)
        if len(self.batch) >= BATCH:
            self.flush()

    def flush(self) -> None:
        pages, self.batch = self.batch, {}
        staged = {p: self.staged(p) for p in pages}
        for folder in sorted({(staged[p] or p).parent for p in pages}, key=str):
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise write_failed(exc, self.lay.out_dir, folder) from None

        def write(page: Path) -> bool:
            where = staged[page]
            if where is None:
                return self.write(page, pages[page])
            try:  # inside a new index's tree that no one can see yet: written once, in place
                with open(where, "xb") as fh:
                    fh.write(pages[page])
            except OSError as exc:
                raise write_failed(exc, self.lay.out_dir, page) from None
            return True

        order = sorted(pages, key=str)
        done = parallel(write, order, key=lambda p: p)
        for page in order:
            if done[page]:
                self.result.pages_written.append(self.lay.rel(page))
            else:
                self.result.unchanged += 1

    def staged(self, page: Path) -> Path | None:
        """Where a page of a new index is written while its tree is built (None: in place)."""
        rel = self.lay.rel(page)
        index, _, rest = rel.partition("/")
        tree = self.trees.get(index)
        return tree / rest if tree is not None else None

    def stage_trees(self) -> None:
        """A new index (none of its name in OUT yet) is built as a whole tree under a temporary
        name and moved into place once, complete: no page of it is seen half-built."""
        for d in self.plan:
            final = self.lay.out_dir / d.name
            if d.new and not self.recovering and _INDEX.match(d.name) and not os.path.lexists(final):
                self.trees[d.name] = tmp_name(final)

    def move_trees(self) -> None:
        for index, tree in self.trees.items():
            try:
                os.rename(tree, self.lay.out_dir / index)
            except OSError as exc:
                raise write_failed(exc, self.lay.out_dir, self.lay.out_dir / index) from None
        self.trees = {}

    def projects(self) -> None:
        """Every project to render, each once, with its records."""
        if not any(d.full for d in self.plan):
            for project in sorted(self.todo):
                self.project(project, self.store.project_records(project))
            return
        seen = set()
        for project, recs in self.store.all_records():
            seen.add(project)
            self.project(project, recs)
        gone = set(self.todo)  # projects with no wheel left that some page may still show
        for d in self.plan:
            if d.full:
                gone |= self.store.project_names(d.name)
        for project in sorted(gone - seen):
            self.project(project, {})

    def write_roots(self) -> None:
        for d in self.plan:
            if d.name not in self.roots or not _INDEX.match(d.name):
                continue
            projects = self.store.index_projects(d.name)
            simple = self.lay.out_dir / d.name / "simple"
            self.batch[simple / "index.html"] = root_html(d.name, projects)
            self.batch[simple / "index.json"] = root_json(projects)
        self.flush()


def _sha(data: bytes) -> str:

    return hashlib.sha256(data).hexdigest()


def update_pages(
    lay: Layout, store: Store, plan: list[IndexDef], todo: set[str], recovering: bool, result: IndexResult
) -> list[str]:
    """Render and write the pages this run changes; the pages no index produces any more (to be
    removed once the root pages no longer list them)."""
    run = _Run(lay, store, plan, todo, recovering, result)
    run.stage_trees()
    run.projects()
    run.flush()
    store.add_rows(run.bulk)
    run.write_roots()
    run.move_trees()
    _write_top(lay, store, result, recovering)
    return run.doomed


def _write_top(lay: Layout, store: Store, result: IndexResult, recovering: bool) -> None:
    """``OUT/index.html``: a link to each index's ``simple/`` (left alone if someone else's)."""
    names = sorted(n for n in store.index_defs() if _INDEX.match(n))
    top = lay.out_dir / TOP_PAGE
    if store.meta("top") != "1" and top.exists() and not _ours(top):
        if store.meta("top") != "theirs":
            result.warnings.append(f"{TOP_PAGE} in the output folder is not one this index wrote: left as it is")
            store.set_meta("top", "theirs")
        return
    data = top_html(names)
    if store.meta("top_page") == _sha(data) and not recovering and top.is_file():
        return
    try:
        if write_if_changed(top, data):
            result.pages_written.append(TOP_PAGE)
    except OSError as exc:
        raise write_failed(exc, lay.out_dir, top) from None
    store.set_meta("top", "1")
    store.set_meta("top_page", _sha(data))


def _ours(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return is_top_html(fh.read(4096))
    except OSError:
        return False


def remove_unlinked(
    lay: Layout, store: Store, doomed: list[str], result: IndexResult, note: Callable[[str | None, str], None]
) -> None:
    """Remove the pages no index produces, then every pending hosted file no page links; the
    rows follow (inside the caller's transaction)."""
    for rel in doomed:
        note(remove_owned(lay.out_dir, rel), rel)
    store.settle_linked()
    for rel, _fn, _sha in store.pending_hosted():  # what is left: no page links it
        note(remove_owned(lay.out_dir, rel), rel)
        store.settle_hosted(rel, keep=False)
