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
    OUT/index.html                     a link to each index's simple/ root
    OUT/.rocm-build-backend-index.sqlite3  the state (index_store.py): per-wheel facts, what
                                       each page links, what was hosted
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

Incremental: a run costs what changed, not the size of the index. The folder is listed once
(one ``stat`` per wheel); when the listing's digests match the state's nothing else is read.
A wheel whose fingerprint (size, mtime, ctime, inode) changed is hashed again and read only if
its bytes changed; only the pages of the projects whose wheels changed are rendered, and a
root page only when a project comes or goes. Every write goes to a temporary file in the same
folder and is moved into place with ``os.replace``, so a reader never sees half a page. Every
index the output holds is kept up to date by every run (named again or not); pages no index
produces any more are removed.

``publish.py`` adds and removes wheels by name instead (``index --add``/``--remove``), for many
jobs publishing into one output.

Consistent at every moment: a hosted wheel is named after its content, so a new wheel under an
old file name is hosted beside the old one; its ``.metadata`` file, then the project pages,
then the root pages are written, and only then is the old copy removed. A page read at any
moment links to files that exist with the hashes it gives. (When WHEEL_DIR is inside OUT the
wheels are served where they are: replacing one there is the user's own step.)

This module lists the folder and hands what changed to ``index_changes.py``, which commits it
in the order that keeps the pages consistent; the plan is ``index_plan.py``, the page bytes
``index_pages.py``, the file work ``index_files.py``. It must not delete anything outside the
output folder nor anything it did not write there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Sequence

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.gpu.targets import GpuTarget
from rocm_build_backend.wheel.index.changes import Options, Session, apply, load_lists, session
from rocm_build_backend.wheel.index.files import FILES_DIR, layout
from rocm_build_backend.wheel.index.pages import API_VERSION, normalize  # noqa: F401 (re-exported)
from rocm_build_backend.wheel.index.plan import families, family_of, index_plan, named_targets  # noqa: F401
from rocm_build_backend.wheel.index.result import SCHEMA_VERSION, IndexResult  # noqa: F401 (re-exported)
from rocm_build_backend.wheel.index.split import prune, split_sources
from rocm_build_backend.wheel.index.store import DB_NAME, DB_VERSION
from rocm_build_backend.wheel.index.wheels import diff, fingerprint, list_folder, read_all

__all__ = [
    "API_VERSION",
    "DB_NAME",
    "families",
    "FILES_DIR",
    "IndexResult",
    "build_index",
    "family_of",
    "normalize",
]


def options(targets: Sequence[str | GpuTarget] | str | None, family: bool, generic_ok: bool, variants: bool) -> Options:
    """The plan options of a run, with the named targets checked (a usage error before any write)."""
    names = None
    if targets is not None:
        names = named_targets(targets)  # an empty list is a usage error, before anything is written
        if not family:
            index_plan(names, False, [])  # an unknown target too
    return Options(names, family, generic_ok, variants)


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
    lists: bool = True,
) -> IndexResult:
    """Write a static PEP 503/691 index per target (or per family) for the wheels in ``wheel_dir``.

    ``targets``: the indexes to write (target IDs; with ``family``, family names or targets);
    by default every target some wheel has code for. ``base_url``: where the wheels are served
    from, when not beside the index. ``generic_ok``: whether generic code counts as loading
    (ROCm 6.4 and newer on the index's users' machines). ``variants``: also write
    ``OUT/variants/simple/`` with every variant wheel and its versions' variants JSON
    (``index_variants.py``); without it variant wheels are skipped. ``split``: a wheel with
    code for several targets is split per target on the way in and the split wheels are
    indexed instead (``index_split.py``). ``lists``: fill ``result.indexes`` with every listed
    wheel (``result.counts`` always says how many).
    """
    opts = options(targets, family, generic_ok, variants)
    lay = layout(Path(wheel_dir), Path(out_dir), base_url)
    result = IndexResult(out_dir=lay.out_dir, metadata_upload=lay.files_dir if lay.base_url is not None else None)
    with session(lay, result, variants) as s:
        if s.store.meta("mode") == "publish":
            raise RocmBuildBackendError(
                f"{lay.out_dir} holds wheels published with --add: a run from one folder would remove them",
                hint=f"add these with: rocm-build-backend index --add {lay.wheel_dir}/*.whl -o {lay.out_dir}",
            )
        used: set[str] = set()
        if split:
            lay.sources, used = split_sources(lay.wheel_dir, lay.out_dir, result.skipped, known=_known(s))
        _mirror(s, opts)
        load_lists(s, lists)
        if split:
            result.removed += prune(lay.out_dir, used)
    return result


def _known(s: Session) -> "Callable[[str, os.stat_result], bool]":
    """Whether a wheel file was indexed as it is, unchanged since (``split`` need not look in it)."""

    def known(fn: str, st: os.stat_result) -> bool:
        row = s.store.row(fn)
        return row is not None and row[0] == fingerprint(st)

    return known


def _mirror(s: Session, opts: Options) -> None:
    """Make the index list exactly the wheels of the folder (or ``lay.sources``)."""
    store, result = s.store, s.result
    args = opts.key()
    listing = list_folder(s.lay, json.dumps([DB_VERSION, s.href, opts.variants]))
    if (
        not s.recovering
        and store.meta("args") == args
        and store.meta("href") == s.href
        and store.bucket_digests() == listing.digests
    ):
        _unchanged(s, len(listing.entries))
        return
    d = diff(store, listing, opts.variants, force=s.href_changed)
    result.skipped.update(store.skipped(set(listing.digests) - d.buckets))
    result.skipped.update({fn: why for fn, (_b, why) in d.skipped.items()})
    reads = read_all(s.lay, d.to_read)
    gone = {fn: d.projects[fn] for fn in d.removed}
    gone.update({fn: d.projects[fn] for fn, r in reads.items() if r.why is not None and fn in d.projects})
    failed = dict(d.skipped)
    failed.update({fn: (r.item.bucket, r.why) for fn, r in reads.items() if r.why is not None})
    result.reused = len(listing.entries) - len(result.skipped) - sum(1 for r in reads.values() if not r.same)
    digests = {b: ("" if b in listing.racy else listing.digests[b]) for b in d.buckets}

    def record() -> None:
        store.set_bucket_digests(digests)
        store.set_skipped(d.buckets, failed)

    apply(s, opts, reads, gone=gone, meta={"mode": "mirror", "args": args}, before_commit=record)


def _unchanged(s: Session, n: int) -> None:
    """Nothing changed since the last run: its counts, and the wheels it skipped, again."""
    store, result = s.store, s.result
    result.skipped.update(store.skipped())
    result.reused = n - len(result.skipped)
    result.counts = {str(k): int(v) for k, v in json.loads(store.meta("counts", "{}")).items()}
    requested = {str(name) for name, req in json.loads(store.meta("plan", "[]")) if req}
    result.nothing_to_serve = [name for name, count in result.counts.items() if name in requested and not count]
