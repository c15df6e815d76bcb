"""Hostile inputs for check, index and cache: small generated wheels, caches and state files.

Each test builds its input here (a few KB at most) and shows one defect that a wheel or a
folder from someone else could cause: a deletion outside what we made, an unbounded read, a
traceback instead of a verdict, a usage error accepted as success.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_build_backend.wheel.index import run as I
from helpers import damage_member, huge_member, make_wheel, ROOT, run_main, stamp_for


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=120,
    )


# --------------------------------------------------------------------------- index: its state file


def db_rows(out: Path, sql: str, *rows: tuple) -> None:
    """Rows written into the index's database by someone else."""
    import sqlite3

    conn = sqlite3.connect(out / I.DB_NAME, isolation_level=None)
    conn.execute("PRAGMA locking_mode=EXCLUSIVE")
    conn.executemany(sql, rows)
    conn.close()


def test_index_never_deletes_a_path_its_database_names_outside_the_output(tmp_path):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"]})
    out = tmp_path / "out"
    I.build_index(wheels, out)
    victim = tmp_path / "victim.txt"
    victim.write_text("not the index's")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "kept.whl").write_text("not the index's either")
    (out / "escape").symlink_to(outside)
    names = [str(victim), "../victim.txt", "escape/kept.whl"]
    # the database naming them as files to check: each is left alone
    db_rows(out, "INSERT INTO hosted(path, fn, sha256, pending) VALUES(?, 'x.whl', '', 1)", *[(n,) for n in names])
    make_wheel(wheels, "pkg", "2.0", device={"pkg/_k.so": ["gfx90a"]})  # a run with something to do
    third = I.build_index(wheels, out)
    assert victim.read_text() == "not the index's"
    assert (outside / "kept.whl").is_file()
    assert third.removed == []
    assert sum("not a file this index writes" in w for w in third.warnings) == 3, third.warnings


def test_index_database_naming_a_file_it_does_not_make_leaves_it_alone(tmp_path):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"]})
    out = tmp_path / "out"
    I.build_index(wheels, out)
    mine = out / "README.txt"  # the user's own file, inside the output folder
    mine.write_text("index of our wheels")
    db_rows(out, "INSERT INTO hosted(path, fn, sha256, pending) VALUES(?, 'README.txt', '', 1)", ("README.txt",))
    make_wheel(wheels, "pkg", "2.0", device={"pkg/_k.so": ["gfx90a"]})
    I.build_index(wheels, out)
    assert mine.read_text() == "index of our wheels"


# --------------------------------------------------------------------------- damaged METADATA or stamp


HOWS = ["corrupt", "encrypted", "method", "huge"]


def bad_wheel(folder: Path, how: str, member: str) -> Path:
    """A wheel named bad-1.0 whose METADATA or stamp is damaged ``how``."""
    whl = make_wheel(folder, "bad", "1.0", device={"bad/_k.so": ["gfx90a"]})
    name = f"bad-1.0.dist-info/{'METADATA' if member == 'metadata' else 'rocm_build.json'}"
    if how == "huge":
        head = b"Metadata-Version: 2.1\nName: bad\nVersion: 1.0\n\n" if member == "metadata" else b"{"
        huge_member(whl, name, 40 << 20, head)
    else:
        damage_member(whl, name, how)
    return whl


@pytest.mark.parametrize("how", HOWS)
def test_check_says_cannot_tell_for_a_wheel_with_unreadable_metadata(tmp_path, how):
    whl = bad_wheel(tmp_path, how, "metadata")
    proc = cli("check", "--targets", "gfx90a", whl)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "cannot tell" in proc.stdout and "METADATA" in proc.stdout


@pytest.mark.parametrize("how", HOWS)
def test_check_reports_an_unreadable_stamp_without_a_traceback(tmp_path, how):
    whl = bad_wheel(tmp_path, how, "stamp")
    proc = cli("check", "--targets", "gfx90a", "--json", whl)
    assert "Traceback" not in proc.stderr, proc.stderr
    wheel = json.loads(proc.stdout)["wheels"][0]
    assert wheel["stamped"] is False
    assert any("stamp" in p for p in wheel["problems"]), wheel
    if how == "huge":  # not read whole: the stamp has a size limit
        assert any("allowed" in p for p in wheel["problems"]), wheel


@pytest.mark.parametrize("member", ["metadata", "stamp"])
def test_index_skips_unreadable_wheels_and_writes_the_others(tmp_path, member):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "good", "1.0", device={"good/_k.so": ["gfx90a"]})
    for how in HOWS:
        bad_wheel(tmp_path / how, how, member).rename(wheels / f"bad{how}-1.0-py3-none-any.whl")
    out = tmp_path / "out"
    proc = cli("index", "--targets", "gfx90a", wheels, "-o", out)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "good-1.0-py3-none-any.whl" in (out / "gfx90a/simple/good/index.html").read_text()
    hosted = {p.name for p in (out / "files").rglob("*")}
    assert not any(name.startswith("bad") for name in hosted if member == "metadata"), hosted
    assert all(p.stat().st_size < 1 << 20 for p in out.rglob("*") if p.is_file())
    if member == "metadata":
        assert proc.returncode == 1
        for how in HOWS:
            assert f"skipped bad{how}-1.0-py3-none-any.whl: " in proc.stdout, proc.stdout


def test_index_into_an_unwritable_place_is_a_clear_error(tmp_path):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "good", "1.0", device={"good/_k.so": ["gfx90a"]})
    for out in ("/proc/rocm-build-backend-index", "/proc/self/status/x"):
        proc = cli("index", wheels, "-o", out)
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.returncode == 2 and proc.stderr.startswith("error: "), proc.stderr


def pip_cache_with(tmp_path: Path, wheels: list[Path]) -> Path:
    cache = tmp_path / "pip-cache"
    for i, whl in enumerate(wheels):
        folder = cache / "wheels" / "ab" / "cd" / "ef" / f"{i:056x}"
        folder.mkdir(parents=True)
        whl.rename(folder / whl.name)
    return cache


@pytest.mark.parametrize("member", ["metadata", "stamp"])
def test_cache_list_reports_unreadable_wheels_and_carries_on(tmp_path, member):
    good = make_wheel(tmp_path / "g", "good", "1.0", device={"good/_k.so": ["gfx942"]})
    bad = [bad_wheel(tmp_path / how, how, member) for how in HOWS]
    for how, whl in zip(HOWS, bad):
        whl.rename(whl.with_name(f"bad{how}-1.0-py3-none-any.whl"))
    cache = pip_cache_with(tmp_path, [good] + [tmp_path / how / f"bad{how}-1.0-py3-none-any.whl" for how in HOWS])
    proc = cli("cache", "list", "--targets", "gfx90a", "--cache-dir", cache, "--json")
    assert "Traceback" not in proc.stderr, proc.stderr
    entries = {e["wheel"]: e for e in json.loads(proc.stdout)["entries"]}
    assert entries["good-1.0-py3-none-any.whl"]["status"] in ("ok", "fails")  # read and judged
    if member == "metadata":
        for how in HOWS:
            e = entries[f"bad{how}-1.0-py3-none-any.whl"]
            assert e["status"] == "unknown" and "METADATA" in " ".join(e["reasons"]), e


def uv_cache_with_special_files(tmp_path: Path) -> Path:
    cache = tmp_path / "uv-cache"
    archive = cache / "archive-v0" / "a1b2c3d4e5f6"
    (archive / "pkg").mkdir(parents=True)
    (archive / "pkg" / "__init__.py").write_text("")
    dist = archive / "pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "WHEEL").write_text("Wheel-Version: 1.0\n")
    (dist / "METADATA").symlink_to("/dev/zero")
    (dist / "rocm_build.json").symlink_to("/dev/zero")
    wheels = cache / "wheels-v5" / "pypi" / "pkg"
    wheels.mkdir(parents=True)
    os.mkfifo(wheels / "pkg-1.0-py3-none-any.rev")  # a pointer file that is a FIFO
    return cache


def test_cache_reads_regular_files_only(tmp_path):
    cache = uv_cache_with_special_files(tmp_path)
    proc = cli("cache", "list", "--targets", "gfx90a", "--cache-dir", cache, "--json")
    assert "Traceback" not in proc.stderr, proc.stderr
    (entry,) = json.loads(proc.stdout)["entries"]
    assert entry["status"] == "unknown"
    assert "not a regular file" in " ".join(entry["reasons"]), entry


# --------------------------------------------------------------------------- control characters


def test_check_escapes_control_characters_from_the_wheel(tmp_path):
    forged = "\x1b[2J\nok      forged-9.9-py3-none-any.whl"
    device = {f"pkg/_k{forged}.so": [f"gfx90a{forged}"]}
    whl = make_wheel(tmp_path, "pkg", "1.0", device=device, stamp=stamp_for(device, check=False))
    proc = cli("check", "--targets", "gfx90a", whl)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "\x1b" not in proc.stdout
    assert not any(line.startswith("ok      forged") for line in proc.stdout.splitlines()), proc.stdout
    assert "\\x1b[2J\\nok" in proc.stdout


def test_index_and_cache_text_escape_control_characters_in_file_names(tmp_path):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "good", "1.0", device={"good/_k.so": ["gfx90a"]})
    (wheels / "x\x1b[2J\nok-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    proc = cli("index", "--targets", "gfx90a", wheels, "-o", tmp_path / "out")
    assert "\x1b" not in proc.stdout and "\\x1b" in proc.stdout, proc.stdout


# --------------------------------------------------------------------------- --targets values


@pytest.mark.parametrize("value", [";;", ",", " ", ""])
def test_an_empty_target_list_is_a_usage_error(tmp_path, value, capsys):
    wheels = tmp_path / "wheels"
    whl = make_wheel(wheels, "good", "1.0", device={"good/_k.so": ["gfx90a"]})
    cache = tmp_path / "pip-cache"
    (cache / "wheels").mkdir(parents=True)
    for args in (
        ["index", "--targets", value, wheels, "-o", tmp_path / "out"],
        ["index", "--family", "--targets", value, wheels, "-o", tmp_path / "out"],
        ["check", "--targets", value, whl],
        ["cache", "list", "--targets", value, "--cache-dir", cache],
    ):
        code, out, err = run_main(capsys, *args)
        assert code == 2, (args, out, err)
        assert err.startswith("error: ") and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def test_index_family_accepts_family_names_on_the_command_line(tmp_path):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "mi300", "1.0", device={"mi300/_k.so": ["gfx942"]})
    out = tmp_path / "out"
    proc = cli("index", "--family", "--targets", "gfx94X-dcgpu,gfx1100", wheels, "-o", out)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # gfx110X-all was asked for and serves nothing
    assert "gfx110X-all: nothing to serve" in proc.stdout
    assert "mi300" in (out / "gfx94X-dcgpu/simple/index.html").read_text()
    assert (out / "gfx110X-all/simple/index.html").is_file()
    proc = cli("index", "--family", "--targets", "gfx94X-dcgpu", "--json", wheels, "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # every index the output holds is kept up to date, named again or not
    assert json.loads(proc.stdout)["indexes"] == {"gfx94X-dcgpu": ["mi300-1.0-py3-none-any.whl"], "gfx110X-all": []}


def test_build_index_with_no_targets_named_writes_nothing(tmp_path):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "good", "1.0", device={"good/_k.so": ["gfx90a"]})
    from rocm_build_backend.errors import ConfigError

    for value in (";;", [], ["", " "]):
        with pytest.raises(ConfigError):
            I.build_index(wheels, tmp_path / "out", targets=value)
        with pytest.raises(ConfigError):
            I.build_index(wheels, tmp_path / "out", targets=value, family=True)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("how", ["corrupt", "encrypted", "method", "huge"])
def test_read_stamp_raises_a_wheel_error_for_an_unreadable_stamp(tmp_path, how):
    from rocm_build_backend.errors import WheelError
    from rocm_build_backend.wheel.stamp import read_stamp

    whl = bad_wheel(tmp_path, how, "stamp")
    with pytest.raises(WheelError) as exc:
        read_stamp(whl)
    assert "rocm_build.json" in exc.value.message


def test_index_in_place_never_removes_a_wheel_its_state_file_lists(tmp_path):
    out = tmp_path / "out"
    wheels = out / "wheels"  # the wheels live inside the index: served where they are
    whl = make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"]})
    other = make_wheel(wheels, "other", "1.0", device={"other/_k.so": ["gfx90a"]})
    I.build_index(wheels, out, targets=["gfx90a"])
    db_rows(
        out,
        "INSERT OR REPLACE INTO hosted(path, fn, sha256, pending) VALUES(?, ?, '', 1)",
        ("wheels/" + other.name, other.name),
        ("wheels/" + whl.name, whl.name),
    )
    other.rename(tmp_path / other.name)  # gone from the index's folder: its pages and sidecar go
    kept = (tmp_path / other.name).read_bytes()
    result = I.build_index(wheels, out, targets=["gfx90a"])
    assert whl.is_file()
    assert (tmp_path / other.name).read_bytes() == kept
    assert not any(r.endswith(".whl") for r in result.removed), result.removed
    assert "wheels/other-1.0-py3-none-any.whl.metadata" in result.removed


def test_index_removes_staging_copies_a_killed_run_left(tmp_path):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"]})
    out = tmp_path / "out"
    I.build_index(wheels, out)
    incoming = out / "files" / ".incoming"
    incoming.mkdir(exist_ok=True)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()  # a process that has ended
    left = incoming / f".pkg-2.0-py3-none-any.whl.{dead}.140000.tmp"
    left.write_bytes(b"half a wheel")
    running = incoming / f".pkg-3.0-py3-none-any.whl.{os.getpid()}.140000.tmp"  # a live run's, being copied
    running.write_bytes(b"being copied")
    stale = incoming / f".pkg-4.0-py3-none-any.whl.{os.getpid()}.140001.tmp"  # untouched for a long time
    stale.write_bytes(b"left long ago")
    old = 1_000_000_000
    os.utime(stale, (old, old))
    mine = incoming / "notes.tmp"  # not a name the index makes
    mine.write_bytes(b"the user's")
    result = I.build_index(wheels, out)
    assert not left.exists() and not stale.exists()
    assert running.exists() and mine.exists()
    assert result.removed == sorted(p.relative_to(out).as_posix() for p in (left, stale))
