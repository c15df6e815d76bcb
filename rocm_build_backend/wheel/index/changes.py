"""One run's changes to an index, applied in the order that keeps every page consistent.

``session`` holds OUT's lock and its database open for one run and turns a failed write (no
space left, read-only) into one ``WriteFailed`` line. ``apply`` takes what changed (wheels
read, wheels gone, fingerprints refreshed) and commits it in three steps:

1. **intent**: the run marks the output ``dirty``, records the projects it is about to change
   (``todo``), deletes the rows of wheels that are gone and records every file it is about to
   host (``pending``); then copies and ``.metadata`` files are written;
2. **wheels**: the new wheel rows;
3. **pages**: the pages of the ``todo`` projects are written (project pages, then root pages,
   ``update.py``), pages no index produces and hosted files no page links are removed, and the
   run is marked finished.

A run killed or out of space at any point leaves pages that link only files that exist; the
next run sees ``dirty``, removes the leftovers (``leftovers.py``), renders the ``todo``
projects and every root page again, and so finishes the work (a wheel removed before the
failure stays removed). ``plan`` says which indexes a run maintains: the ones named or derived
now, and every one the output already holds.

It reads no wheel folder and knows nothing of the command line.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rocm_build_backend.errors import ConfigError, RocmBuildBackendError
from rocm_build_backend.gpu.targets import parse_target
from rocm_build_backend.wheel.index.files import Layout, Record, write_failed
from rocm_build_backend.wheel.index.leftovers import sweep
from rocm_build_backend.wheel.index.plan import index_plan
from rocm_build_backend.wheel.index.result import IndexResult
from rocm_build_backend.wheel.index.state import locked
from rocm_build_backend.wheel.index.store import Store, disk_error, open_store
from rocm_build_backend.wheel.index.update import IndexDef, facts_of, remove_unlinked, update_pages
from rocm_build_backend.wheel.index.variants import INDEX as VARIANTS
from rocm_build_backend.wheel.index.wheels import Read, drop_stages, host, hosted_files


@dataclass
class Options:
    """What decides the indexes: named targets (None: from the wheels), families, generic code,
    the variants index."""

    targets: list[str] | None = None
    family: bool = False
    generic_ok: bool = True
    variants: bool = False

    def key(self) -> str:
        return json.dumps([self.targets, self.family, self.generic_ok, self.variants])

    @staticmethod
    def from_key(text: str) -> "Options":
        targets, family, generic_ok, variants = json.loads(text)
        return Options(targets, bool(family), bool(generic_ok), bool(variants))


@dataclass
class Session:
    """One run with OUT's lock held and its database open."""

    lay: Layout
    store: Store
    result: IndexResult
    recovering: bool  # the last run did not finish
    damaged: bool = False  # the state could not be read and was set aside

    @property
    def href(self) -> str:
        lay = self.lay
        return f"base:{lay.base_url}" if lay.base_url is not None else ("in-place" if lay.in_place else "copy")

    @property
    def href_changed(self) -> bool:
        return self.store.meta("href") not in ("", self.href)

    def note(self, outcome: str | None, rel: str) -> None:
        """Record what ``remove_owned`` did: removed (None), or a warning."""
        if outcome is None:
            self.result.removed.append(rel)
        elif outcome:
            self.result.warnings.append(outcome)


@contextmanager
def session(lay: Layout, result: IndexResult, variants: bool) -> Iterator[Session]:
    """OUT's lock and database for one run; what killed runs left is removed first.

    A write that fails (no space left, read-only) becomes one ``WriteFailed``; the database
    keeps its last commit.
    """
    out = lay.out_dir
    with locked(out):
        try:
            store, damaged, _created = open_store(out)
        except (OSError, sqlite3.Error) as exc:
            raise write_failed(exc if isinstance(exc, OSError) else OSError(28, str(exc)), out) from None
        try:
            if damaged:
                result.warnings.append(
                    f"the state file is damaged ({damaged}): rebuilt from the folder; nothing it listed was removed"
                )
            recovering = store.meta("dirty") == "1"
            for rel in sweep(out, everywhere=recovering):
                result.removed.append(rel)
            yield Session(lay, store, result, recovering, damaged=damaged is not None)
        except sqlite3.Error as exc:
            if disk_error(exc):
                raise write_failed(OSError(28, "No space left on device"), out, out / store.path.name) from None
            raise RocmBuildBackendError(
                f"the index's state in {out} cannot be used: {exc}",
                hint=f"remove {store.path} and run again (it is rebuilt)",
            ) from None
        except OSError as exc:
            raise write_failed(exc, out) from None
        finally:
            store.close()


def plan(s: Session, opts: Options, new: list[Record]) -> list[IndexDef]:
    """The indexes this run maintains: named (or derived from the wheels) and every one held."""

    stored = s.store.index_defs()
    if opts.targets is not None:
        wanted = index_plan(opts.targets, opts.family, [])
    else:
        records: list[dict[str, Any]] = [
            {"files": [[None, None, codes]] if device else []} for device, codes in s.store.codes()
        ]
        records += [rec for rec in new if "variant" not in rec]
        if opts.variants and not any(rec["files"] for rec in records):
            wanted = {}  # only variant wheels (or none with device code): no per-target index
        else:
            try:
                wanted = index_plan(None, opts.family, records)
            except ConfigError:
                if not any(name != VARIANTS for name in stored):
                    raise
                wanted = {}
    out = []
    for name, devices in wanted.items():
        old = stored.get(name)
        full = old is None or old[0] != [str(t) for t in devices] or old[1] != opts.generic_ok or not old[2]
        out.append(
            IndexDef(
                name,
                devices,
                opts.generic_ok,
                full or s.href_changed,
                requested=opts.targets is not None,
                new=old is None and not s.recovering,
            )
        )
    for name, (devices_, generic_ok, built) in stored.items():
        if name not in wanted and name != VARIANTS:
            out.append(IndexDef(name, [parse_target(d) for d in devices_], generic_ok, not built or s.href_changed))
    if opts.variants:
        old = stored.get(VARIANTS)
        out.append(
            IndexDef(
                VARIANTS, [], True, old is None or not old[2] or s.href_changed, new=old is None and not s.recovering
            )
        )
    return out


def apply(
    s: Session,
    opts: Options,
    reads: dict[str, Read],
    *,
    gone: dict[str, str],
    meta: dict[str, str] | None = None,
    before_commit: Callable[[], None] | None = None,
) -> list[IndexDef]:
    """Commit one run's changes (the three steps above); the indexes maintained.

    ``reads``: fn -> what reading it gave (a wheel read again whose bytes are the same gets its
    new fingerprint); ``gone``: fn -> project of wheels to remove; ``meta``: more values to
    record when the run finishes, and ``before_commit`` more rows.
    """
    store, lay, result = s.store, s.lay, s.result
    new = [r for r in reads.values() if r.rec is not None]
    for fn, r in reads.items():
        if r.why is not None:
            result.skipped[fn] = r.why
    try:
        indexes = plan(s, opts, [r.rec for r in new if r.rec is not None])
    except BaseException:
        drop_stages(reads)
        raise
    result.read = sum(1 for r in reads.values() if not r.same)
    result.wheels_added = sorted(r.item.fn for r in new)
    result.wheels_removed = sorted(fn for fn in gone if fn not in reads or reads[fn].rec is None)
    try:
        store.begin()  # 1. intent
        store.set_meta("dirty", "1")
        store.add_todo(set(gone.values()) | {r.item.project for r in new})
        for fn in gone:
            store.delete_wheel(fn)
            store.check_hosted_of(fn)
        for item in [r.item for r in reads.values() if r.same]:
            store.set_fingerprint(item.fn, item.fp, item.racy)
        for r in new:
            if r.item.indexed or r.item.fn in gone:  # replaces a wheel: its old files may go
                store.check_hosted_of(r.item.fn)
        store.add_hosted(
            (lay.rel(p), r.item.fn, str(r.rec["sha256"]))
            for r in new
            if r.rec is not None
            for p in hosted_files(lay, r.item.fn, r.rec)
        )
        store.commit()
    except BaseException:
        drop_stages(reads)
        raise
    result.files_written += host(lay, new)
    if new:
        store.begin()  # 2. wheels
        store.put_wheels(
            (r.item.fn, r.item.project, r.rec, r.item.fp, r.item.racy, r.item.bucket) for r in new if r.rec is not None
        )
        store.commit()
    store.begin()  # 3. pages
    todo = store.todo()
    for d in indexes:  # in this transaction: built once its pages are (or never, if it fails)
        store.set_index(d.name, [str(t) for t in d.devices], d.generic_ok, True)
    doomed = update_pages(lay, store, indexes, todo, s.recovering, result)
    remove_unlinked(lay, store, doomed, result, s.note)
    store.clear_todo()
    for key, value in {**(meta or {}), "dirty": "0", "href": s.href}.items():
        store.set_meta(key, value)
    if before_commit is not None:
        before_commit()
    _finish(s, indexes, {r.item.fn: r.rec for r in new if r.rec is not None and "variant" not in r.rec})
    store.commit()
    return indexes


def _finish(s: Session, indexes: list[IndexDef], new_plain: dict[str, Record]) -> None:
    """Counts per index, the requested indexes with nothing to serve, and a warning for each new
    wheel no index lists."""
    store, result = s.store, s.result
    result.counts = {d.name: store.count_listed(d.name) for d in indexes}
    store.set_meta("counts", json.dumps(result.counts))
    store.set_meta("plan", json.dumps([[d.name, d.requested] for d in indexes]))
    empty = [d.name for d in indexes if d.requested and not result.counts[d.name]]
    if store.meta("mode") == "publish":  # other jobs may not have published for it yet
        result.warnings += [f"{name}: nothing to serve yet" for name in empty]
    else:
        result.nothing_to_serve = empty
    for fn, rec in new_plain.items():
        if store.conn.execute("SELECT 1 FROM listed WHERE fn=? LIMIT 1", (fn,)).fetchone() is None:
            targets = facts_of(rec).targets
            result.warnings.append(f"{fn} loads on none of the indexes written ({', '.join(targets) or 'no code'})")


def load_lists(s: Session, lists: bool) -> None:
    """Fill ``result.indexes`` with each index's listed wheels (when asked: one row per wheel)."""
    if lists:
        s.result.indexes = {name: s.store.listed_wheels(name) for name in s.result.counts}
