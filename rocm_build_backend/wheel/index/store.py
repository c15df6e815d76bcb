"""The index's state: ``OUT/.rocm-build-backend-index.sqlite3``, one SQLite database (``sqlite3``).

Why a database: a run that adds, replaces or removes k wheels must read and write state for
those k wheels only. SQLite gives that (rows per wheel, per project page and per hosted file,
found through indexes) and atomic transactions, so a run killed or out of disk space leaves the
state as it was at its last commit, never half a file. A JSON file per project would need its
own journal for the same guarantees; one JSON file (the earlier format) is read and rewritten
whole by every run. The database is opened in WAL mode with exclusive locking: runs already
take turns through ``state.locked``, and exclusive locking needs no shared memory, so it works
wherever the lock does.

Tables: ``wheels`` (one row per indexed wheel: its record, project, hash and the fingerprint
of the file it was read from), ``buckets`` (a digest of the folder listing per bucket of file
names, so a run with nothing changed reads no wheel row), ``skipped`` (what the listing held
that is not listed, and why), ``indexes`` (each index's devices), ``listed`` (which files each
project page links), ``projects`` (each root page's rows), ``hosted`` (every file written into
OUT for a wheel: copies, ``.metadata``, variants JSON; ``pending`` until a run has checked that
a page links it), ``todo`` (projects whose pages a run began to change) and ``meta``.

A damaged database is set aside (renamed ``.damaged``) and rebuilt. Nothing here writes a page
or removes a file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from rocm_build_backend.files import check_output_name, regular_or_none, still_same
from rocm_build_backend.wheel.index.files import Record

DB_NAME = ".rocm-build-backend-index.sqlite3"
DB_VERSION = "2"  # the JSON state file was version 1
BUCKETS = 256

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS wheels(fn TEXT PRIMARY KEY, project TEXT NOT NULL, sha256 TEXT NOT NULL,
    variant INTEGER NOT NULL, codes TEXT NOT NULL, bucket INTEGER NOT NULL, fp TEXT NOT NULL,
    racy INTEGER NOT NULL, rec TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS wheels_project ON wheels(project);
CREATE INDEX IF NOT EXISTS wheels_bucket ON wheels(bucket);
CREATE INDEX IF NOT EXISTS wheels_codes ON wheels(variant, codes);
CREATE TABLE IF NOT EXISTS buckets(bucket INTEGER PRIMARY KEY, digest TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS skipped(fn TEXT PRIMARY KEY, bucket INTEGER NOT NULL, reason TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS skipped_bucket ON skipped(bucket);
CREATE TABLE IF NOT EXISTS indexes(name TEXT PRIMARY KEY, devices TEXT NOT NULL, generic_ok INTEGER NOT NULL,
    built INTEGER NOT NULL, wheels INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS codes(codes TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS listed(idx TEXT NOT NULL, project TEXT NOT NULL, fn TEXT NOT NULL,
    sha256 TEXT NOT NULL, PRIMARY KEY(idx, project, fn));
CREATE INDEX IF NOT EXISTS listed_file ON listed(fn, sha256);
CREATE TABLE IF NOT EXISTS projects(idx TEXT NOT NULL, project TEXT NOT NULL, display TEXT NOT NULL,
    PRIMARY KEY(idx, project));
CREATE TABLE IF NOT EXISTS hosted(path TEXT PRIMARY KEY, fn TEXT NOT NULL, sha256 TEXT NOT NULL,
    pending INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS hosted_fn ON hosted(fn);
CREATE INDEX IF NOT EXISTS hosted_pending ON hosted(pending);
CREATE TABLE IF NOT EXISTS todo(project TEXT PRIMARY KEY);
"""

# (fingerprint, sha256, project, racy) of one wheel row
Row = tuple[str, str, str, bool]


def bucket_of(fn: str) -> int:
    """The bucket of a wheel's file name (``buckets`` holds one listing digest per bucket)."""

    return zlib.crc32(fn.encode("utf-8", "surrogateescape")) % BUCKETS


class StoreError(Exception):
    """The database cannot be opened or read (damaged, not a database, another version)."""


class Store:
    """One open state database; the caller holds OUT's lock for as long as it is open."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path

    # ---------------------------------------------------------------------- transactions

    def begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def close(self) -> None:
        try:
            self.rollback()
        finally:
            self.conn.close()

    # ---------------------------------------------------------------------- meta

    def meta(self, key: str, default: str = "") -> str:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return str(row[0]) if row else default

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (key, value))

    # ---------------------------------------------------------------------- wheels

    def bucket_digests(self) -> dict[int, str]:
        return {int(b): str(d) for b, d in self.conn.execute("SELECT bucket, digest FROM buckets")}

    def set_bucket_digests(self, digests: dict[int, str]) -> None:
        self.conn.executemany("INSERT OR REPLACE INTO buckets(bucket, digest) VALUES(?, ?)", digests.items())

    def rows(self, buckets: Iterable[int] | None = None) -> dict[str, Row]:
        """fn -> (fingerprint, sha256, project, racy) of the wheels in ``buckets`` (None: all)."""
        q = "SELECT fn, fp, sha256, project, racy FROM wheels"
        if buckets is None:
            cur = self.conn.execute(q)
        else:
            wanted = sorted(set(buckets))
            if not wanted:
                return {}
            if len(wanted) == BUCKETS:
                cur = self.conn.execute(q)
            else:
                cur = self.conn.execute(q + f" WHERE bucket IN ({','.join('?' * len(wanted))})", wanted)
        return {str(fn): (str(fp), str(sha), str(project), bool(racy)) for fn, fp, sha, project, racy in cur}

    def row(self, fn: str) -> Row | None:
        got = self.conn.execute("SELECT fp, sha256, project, racy FROM wheels WHERE fn=?", (fn,)).fetchone()
        return (str(got[0]), str(got[1]), str(got[2]), bool(got[3])) if got else None

    def put_wheel(self, fn: str, project: str, rec: Record, fp: str, racy: bool, bucket: int) -> None:
        self.put_wheels([(fn, project, rec, fp, racy, bucket)])

    def put_wheels(self, wheels: Iterable[tuple[str, str, Record, str, bool, int]]) -> None:
        """(fn, project, record, fingerprint, racy, bucket) of wheels to add or replace."""
        rows, kinds = [], set()
        for fn, project, rec, fp, racy, bucket in wheels:
            codes = sorted({c for row in rec.get("files", []) for c in row[2]})
            kind = f"{1 if rec.get('files') else 0} " + " ".join(codes)
            if "variant" not in rec:
                kinds.add(kind)
            rows.append(
                (
                    fn,
                    project,
                    rec["sha256"],
                    1 if "variant" in rec else 0,
                    kind,
                    bucket,
                    fp,
                    1 if racy else 0,
                    json.dumps(rec, sort_keys=True, separators=(",", ":")),
                )
            )
        self.conn.executemany("INSERT OR IGNORE INTO codes(codes) VALUES(?)", ((k,) for k in sorted(kinds)))
        self.conn.executemany(
            "INSERT OR REPLACE INTO wheels(fn, project, sha256, variant, codes, bucket, fp, racy, rec) "
            "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def set_fingerprint(self, fn: str, fp: str, racy: bool) -> None:
        self.conn.execute("UPDATE wheels SET fp=?, racy=? WHERE fn=?", (fp, 1 if racy else 0, fn))

    def delete_wheel(self, fn: str) -> None:
        self.conn.execute("DELETE FROM wheels WHERE fn=?", (fn,))

    def count_wheels(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM wheels").fetchone()[0])

    def project_records(self, project: str) -> dict[str, Record]:
        """fn -> record of every wheel of one project."""
        return {
            str(fn): _record(rec)
            for fn, rec in self.conn.execute("SELECT fn, rec FROM wheels WHERE project=?", (project,))
        }

    def all_records(self) -> Iterator[tuple[str, dict[str, Record]]]:
        """(project, fn -> record) for every project, in project order: for a full rebuild."""
        current, recs = None, dict[str, Record]()
        for project, fn, rec in self.conn.execute("SELECT project, fn, rec FROM wheels ORDER BY project"):
            if project != current:
                if current is not None:
                    yield current, recs
                current, recs = str(project), {}
            recs[str(fn)] = _record(rec)
        if current is not None:
            yield current, recs

    def codes(self) -> list[tuple[bool, list[str]]]:
        """(has device files, complete codes) of each distinct kind of plain wheel indexed so far
        (kept as wheels are added, not as they go: an index, once made, is kept)."""
        out = []
        for (value,) in self.conn.execute("SELECT codes FROM codes"):
            device, *codes = str(value).split(" ")
            out.append((device == "1", [c for c in codes if c]))
        return out

    # ---------------------------------------------------------------------- skipped

    def skipped(self, buckets: Iterable[int] | None = None) -> dict[str, str]:
        """fn -> why, of the wheels earlier runs could not read (in ``buckets``; None: all)."""
        if buckets is None:
            return {str(fn): str(why) for fn, why in self.conn.execute("SELECT fn, reason FROM skipped")}
        wanted = sorted(set(buckets))
        if not wanted:
            return {}
        cur = self.conn.execute(
            f"SELECT fn, reason FROM skipped WHERE bucket IN ({','.join('?' * len(wanted))})", wanted
        )
        return {str(fn): str(why) for fn, why in cur}

    def set_skipped(self, buckets: Iterable[int], skipped: dict[str, tuple[int, str]]) -> None:
        """Replace the skipped wheels of ``buckets`` by ``skipped`` (fn -> (bucket, reason))."""
        wanted = sorted(set(buckets))
        if wanted:
            self.conn.execute(f"DELETE FROM skipped WHERE bucket IN ({','.join('?' * len(wanted))})", wanted)
        self.conn.executemany(
            "INSERT OR REPLACE INTO skipped(fn, bucket, reason) VALUES(?, ?, ?)",
            ((fn, b, why) for fn, (b, why) in skipped.items()),
        )

    # ---------------------------------------------------------------------- indexes

    def index_defs(self) -> dict[str, tuple[list[str], bool, bool]]:
        """name -> (devices, generic_ok, built) of every index this output holds."""
        return {
            str(n): (json.loads(d), bool(g), bool(b))
            for n, d, g, b in self.conn.execute("SELECT name, devices, generic_ok, built FROM indexes")
        }

    def set_index(self, name: str, devices: list[str], generic_ok: bool, built: bool) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO indexes(name, devices, generic_ok, built) VALUES(?, ?, ?, ?)", (name, "[]", 1, 0)
        )
        self.conn.execute(
            "UPDATE indexes SET devices=?, generic_ok=?, built=? WHERE name=?",
            (json.dumps(devices), 1 if generic_ok else 0, 1 if built else 0, name),
        )

    def listed(self, idx: str, project: str) -> dict[str, str]:
        return {
            str(fn): str(sha)
            for fn, sha in self.conn.execute("SELECT fn, sha256 FROM listed WHERE idx=? AND project=?", (idx, project))
        }

    def set_listed(self, idx: str, project: str, files: dict[str, str], before: dict[str, str]) -> None:
        """Replace what one page links (``before``: what it linked); the index's count follows."""
        self.conn.execute("DELETE FROM listed WHERE idx=? AND project=?", (idx, project))
        self.conn.executemany(
            "INSERT INTO listed(idx, project, fn, sha256) VALUES(?, ?, ?, ?)",
            ((idx, project, fn, sha) for fn, sha in files.items()),
        )
        delta = sum(fn.endswith(".whl") for fn in files) - sum(fn.endswith(".whl") for fn in before)
        if delta:
            self.conn.execute("UPDATE indexes SET wheels=wheels+? WHERE name=?", (delta, idx))

    def add_rows(self, rows: list[tuple[str, str, dict[str, str], str]]) -> None:
        """(index, project, fn -> sha256 its page links, display name) of pages new to an index."""
        self.conn.executemany(
            "INSERT OR REPLACE INTO listed(idx, project, fn, sha256) VALUES(?, ?, ?, ?)",
            ((idx, project, fn, sha) for idx, project, links, _d in rows for fn, sha in links.items()),
        )
        self.conn.executemany(
            "INSERT OR REPLACE INTO projects(idx, project, display) VALUES(?, ?, ?)",
            ((idx, project, display) for idx, project, _links, display in rows),
        )
        counts: dict[str, int] = {}
        for idx, _project, links, _d in rows:
            counts[idx] = counts.get(idx, 0) + sum(fn.endswith(".whl") for fn in links)
        self.conn.executemany(
            "UPDATE indexes SET wheels=wheels+? WHERE name=?", ((n, idx) for idx, n in counts.items())
        )

    def listed_wheels(self, idx: str) -> list[str]:
        return [
            str(fn)
            for (fn,) in self.conn.execute("SELECT fn FROM listed WHERE idx=? AND fn LIKE '%.whl' ORDER BY fn", (idx,))
        ]

    def count_listed(self, idx: str) -> int:
        got = self.conn.execute("SELECT wheels FROM indexes WHERE name=?", (idx,)).fetchone()
        return int(got[0]) if got else 0

    def index_projects(self, idx: str) -> list[tuple[str, str]]:
        """(project, display name) of one index's root page, in order."""
        return [
            (str(p), str(d))
            for p, d in self.conn.execute("SELECT project, display FROM projects WHERE idx=? ORDER BY project", (idx,))
        ]

    def project_names(self, idx: str) -> set[str]:
        return {str(p) for (p,) in self.conn.execute("SELECT project FROM projects WHERE idx=?", (idx,))}

    def display(self, idx: str, project: str) -> str | None:
        got = self.conn.execute("SELECT display FROM projects WHERE idx=? AND project=?", (idx, project)).fetchone()
        return str(got[0]) if got else None

    def set_display(self, idx: str, project: str, display: str | None) -> None:
        if display is None:
            self.conn.execute("DELETE FROM projects WHERE idx=? AND project=?", (idx, project))
        else:
            self.conn.execute(
                "INSERT OR REPLACE INTO projects(idx, project, display) VALUES(?, ?, ?)", (idx, project, display)
            )

    # ---------------------------------------------------------------------- hosted files

    def add_hosted(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """(path, fn, sha256) of files about to be written; pending until a run checks them."""
        self.conn.executemany("INSERT OR REPLACE INTO hosted(path, fn, sha256, pending) VALUES(?, ?, ?, 1)", rows)

    def check_hosted_of(self, fn: str) -> None:
        """Mark every hosted file of ``fn`` to be checked: a page may no longer link it."""
        self.conn.execute("UPDATE hosted SET pending=1 WHERE fn=?", (fn,))

    def settle_linked(self) -> None:
        """Every pending hosted file that a page links, or that serves a current wheel, is kept."""
        self.conn.execute(
            "UPDATE hosted SET pending=0 WHERE pending=1 AND sha256 != '' AND ("
            "EXISTS(SELECT 1 FROM listed l WHERE l.fn=hosted.fn AND l.sha256=hosted.sha256) OR "
            "EXISTS(SELECT 1 FROM wheels w WHERE w.fn=hosted.fn AND w.sha256=hosted.sha256))"
        )

    def pending_hosted(self) -> list[tuple[str, str, str]]:
        return [
            (str(p), str(f), str(s))
            for p, f, s in self.conn.execute("SELECT path, fn, sha256 FROM hosted WHERE pending=1 ORDER BY path")
        ]

    def settle_hosted(self, path: str, keep: bool) -> None:
        if keep:
            self.conn.execute("UPDATE hosted SET pending=0 WHERE path=?", (path,))
        else:
            self.conn.execute("DELETE FROM hosted WHERE path=?", (path,))

    # ---------------------------------------------------------------------------------- todo

    def add_todo(self, projects: Iterable[str]) -> None:
        self.conn.executemany("INSERT OR IGNORE INTO todo(project) VALUES(?)", ((p,) for p in projects))

    def todo(self) -> set[str]:
        return {str(p) for (p,) in self.conn.execute("SELECT project FROM todo")}

    def clear_todo(self) -> None:
        self.conn.execute("DELETE FROM todo")


def _record(text: object) -> Record:
    rec = json.loads(str(text))
    if not isinstance(rec, dict):
        raise StoreError("a wheel record is not an object")
    return rec


_SIDE_FILES = ("-wal", "-journal", "-shm")  # what SQLite opens beside the database, by name


def _connect(path: Path) -> sqlite3.Connection:
    for suffix in _SIDE_FILES:  # none of them a link to (or a FIFO in place of) another file
        check_output_name(Path(f"{path}{suffix}"))
    expect = regular_or_none(path)
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    try:
        still_same(path, expect)  # not swapped since the check, before SQLite reads or writes
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")  # runs take turns through OUT's lock anyway
        conn.execute("PRAGMA journal_mode=WAL")  # commits append; no shared memory with EXCLUSIVE
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        version = conn.execute("SELECT value FROM meta WHERE key='version'").fetchone()
        if version is None:
            conn.execute("INSERT INTO meta(key, value) VALUES('version', ?)", (DB_VERSION,))
        elif version[0] != DB_VERSION:
            raise StoreError(f"it is version {version[0]}, not {DB_VERSION}")
    except BaseException:
        conn.close()
        raise
    return conn


def open_store(out_dir: Path) -> tuple[Store, str | None, bool]:
    """Open (or create) OUT's database: (store, why an earlier one was set aside, created now).

    A file that is not a database of this version is renamed ``<name>.damaged`` (replacing an
    earlier one) and a new database is created; the reason comes back for a warning. Disk
    errors (no space) are raised as ``OSError``. A symlink, FIFO, device or folder where the
    database or its side files go is one ``OutputError``, left as it is.
    """
    path = out_dir / DB_NAME
    created = not path.exists()
    try:
        return Store(_connect(path), path), None, created
    except (sqlite3.DatabaseError, StoreError) as exc:
        if _disk_full(exc):
            raise OSError(28, "No space left on device") from None
        why = str(exc) if isinstance(exc, StoreError) else f"it is not a readable database ({exc})"
    for suffix in ("", "-wal", "-journal"):
        try:
            os.replace(f"{path}{suffix}", f"{path}.damaged{suffix}")
        except FileNotFoundError:
            pass
    return Store(_connect(path), path), why, True


def _disk_full(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code == 13 or "disk is full" in str(exc) or "disk I/O error" in str(exc)  # SQLITE_FULL, IOERR


def disk_error(exc: BaseException) -> bool:
    """Whether a ``sqlite3`` error means the disk is full or failing (not a damaged database)."""
    return isinstance(exc, sqlite3.Error) and _disk_full(exc)
