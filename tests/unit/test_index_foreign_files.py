"""Someone else's file where the index keeps its state or its lock, and wheels whose project
name no page can hold: one clear error (exit 2) or one refusal with its reason, and the foreign
file left exactly as it was. Real files, real SQLite, the real command line."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from rocm_build_backend.wheel.index.state import LOCK_NAME
from rocm_build_backend.wheel.index.store import DB_NAME
from helpers import capped_cli, make_wheel, one_error


def _wheels(tmp_path: Path) -> Path:
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"]})
    return wheels


def _foreign_db(tmp_path: Path) -> tuple[Path, str]:
    theirs = tmp_path / "theirs.sqlite3"
    conn = sqlite3.connect(theirs)
    conn.execute("CREATE TABLE mine(x)")
    conn.execute("INSERT INTO mine VALUES (1)")
    conn.commit()
    conn.close()
    return theirs, hashlib.sha256(theirs.read_bytes()).hexdigest()


def _index(wheels: Path, out: Path):
    # a FIFO must never be waited on: the timeout would fail the test, never hang it
    return capped_cli("index", "--targets", "gfx90a", wheels, "-o", out, timeout=120)


def _plant(path: Path, kind: str, target: Path) -> None:
    if kind == "symlink":
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        try:
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # the null device's numbers
        except (PermissionError, OSError) as exc:
            pytest.skip(f"cannot make a device node here: {exc}")


def _untouched(path: Path, kind: str, theirs: Path, digest: str) -> None:
    mode = os.lstat(path).st_mode
    assert {"symlink": stat.S_ISLNK, "fifo": stat.S_ISFIFO, "folder": stat.S_ISDIR, "device": stat.S_ISCHR}[kind](mode)
    assert hashlib.sha256(theirs.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in theirs.parent.glob("theirs.sqlite3*")) == ["theirs.sqlite3"]


@pytest.mark.parametrize("kind", ["symlink", "fifo", "device", "folder"])
def test_a_foreign_file_in_the_databases_place_is_one_error_and_left_alone(tmp_path, kind):
    wheels, out = _wheels(tmp_path), tmp_path / "out"
    out.mkdir()
    theirs, digest = _foreign_db(tmp_path)
    _plant(out / DB_NAME, kind, theirs)
    err = one_error(_index(wheels, out))
    assert f"{DB_NAME} exists and is a" in err and "it is not replaced" in err, err
    _untouched(out / DB_NAME, kind, theirs, digest)
    assert not (out / f"{DB_NAME}.damaged").exists()
    assert not list(out.glob("*/simple/index.html"))


def test_a_symlink_where_sqlite_writes_its_log_is_refused_too(tmp_path):
    wheels, out = _wheels(tmp_path), tmp_path / "out"
    assert _index(wheels, out).returncode == 0
    theirs, digest = _foreign_db(tmp_path)
    (out / f"{DB_NAME}-wal").unlink(missing_ok=True)
    (out / f"{DB_NAME}-wal").symlink_to(theirs)
    err = one_error(_index(wheels, out))
    assert f"{DB_NAME}-wal exists and is a symlink" in err
    _untouched(out / f"{DB_NAME}-wal", "symlink", theirs, digest)


@pytest.mark.parametrize("kind", ["symlink", "fifo", "device", "folder"])
def test_a_foreign_file_in_the_locks_place_is_one_error_and_left_alone(tmp_path, kind):
    wheels, out = _wheels(tmp_path), tmp_path / "out"
    out.mkdir()
    theirs, digest = _foreign_db(tmp_path)
    _plant(out / LOCK_NAME, kind, theirs)
    err = one_error(_index(wheels, out))
    assert f"{LOCK_NAME} exists and is a" in err, err
    _untouched(out / LOCK_NAME, kind, theirs, digest)
    assert not (out / DB_NAME).exists()


def test_a_dangling_lock_symlink_is_not_created_through(tmp_path):
    wheels, out = _wheels(tmp_path), tmp_path / "out"
    out.mkdir()
    (out / LOCK_NAME).symlink_to(tmp_path / "made-through-the-link")
    one_error(_index(wheels, out))
    assert not (tmp_path / "made-through-the-link").exists()


@pytest.mark.parametrize("how", ["folder", "add"])
def test_a_wheel_whose_project_name_is_not_ascii_is_refused_not_hosted(tmp_path, how):
    wheels, out = _wheels(tmp_path), tmp_path / "out"
    bad = make_wheel(wheels, "p\u00e2ckage", "1.0", device={"p\u00e2ckage/_k.so": ["gfx90a"]})
    if how == "folder":
        proc = _index(wheels, out)
    else:
        proc = capped_cli("index", "--add", bad, "-o", out, "--targets", "gfx90a", timeout=120)
    assert "Traceback" not in proc.stderr
    text = proc.stdout + proc.stderr
    assert f"skipped {bad.name}: its project name 'p\u00e2ckage' is not valid" in text, text
    assert "PEP 508" in text and "loads on none" not in text
    assert proc.returncode == 1, text
    assert not [p for p in out.rglob("*") if "ckage" in p.name]  # nothing hosted, no page
