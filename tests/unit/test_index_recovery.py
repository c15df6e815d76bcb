"""The index on a full disk, after kill -9, from the earlier state format, and with files
rewritten behind its back: one clear line, pages that only link files that exist, and a next
run that finishes the work and removes what the failed one left.

The full disk is real: a 3 MB tmpfs mounted for the test (root only; skipped with the reason
otherwise), filled up to a chosen number of free bytes, so every write of the run can fail in
turn: the staging copy, the ``.metadata`` file, a page, the state database.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocm_build_backend.wheel.index import run as I
from helpers import ROOT, anchors, fat_wheel, inconsistencies, make_wheel


def cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )


def listed_anywhere(out: Path, fn: str) -> bool:
    return any(fn in text for page in out.glob("*/simple/*/index.html") for _attrs, text in anchors(page).anchors)


def leftovers(out: Path) -> list[Path]:
    return [p for p in out.rglob("*") if p.name.endswith(".tmp")]


@pytest.fixture
def small_fs(tmp_path):
    """A 3 MB tmpfs; skipped where it cannot be mounted."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a full disk is made with a small tmpfs, and mounting one needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(mnt: Path, free: int) -> Path:
    """Fill the filesystem, then give back ``free`` bytes."""
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, bytes(65536))
    except OSError:
        pass
    try:
        while True:
            os.write(fd, bytes(4096))
    except OSError:
        pass
    os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - free))
    return filler


def test_a_full_disk_stops_the_run_with_one_line_and_the_next_run_finishes_it(tmp_path, small_fs):
    wheels = tmp_path / "wheels"
    rng = random.Random(1)
    for i, target in enumerate(["gfx90a", "gfx942", "gfx90a", "gfx942", "gfx90a"]):
        make_wheel(wheels, f"p{i}", "1.0", device={f"p{i}/_k.so": [target]}, placeholder=rng.randbytes(40_000))
    out = small_fs / "out"
    assert cli("index", wheels, "-o", out).returncode == 0
    backup = tmp_path / "backup"
    shutil.copytree(out, backup, symlinks=True)
    gone = "p1-1.0-py3-none-any.whl"
    (wheels / gone).rename(tmp_path / gone)  # removed from the folder ...
    make_wheel(wheels, "p9", "1.0", device={"p9/_k.so": ["gfx942"]}, placeholder=rng.randbytes(40_000))  # ... one added
    hosted_gone = [p.relative_to(backup) for p in backup.glob(f"files/*/{gone}*")]
    assert len(hosted_gone) == 2  # the copy and its .metadata

    def attempt(free: int) -> subprocess.CompletedProcess:
        shutil.rmtree(out)
        shutil.copytree(backup, out, symlinks=True)
        filler = fill(small_fs, free)
        try:
            proc = cli("index", wheels, "-o", out)
            assert "Traceback" not in proc.stderr, proc.stderr
            if proc.returncode:
                lines = proc.stderr.strip().splitlines()
                assert proc.returncode == 2 and len(lines) == 2, proc.stderr
                assert lines[0].startswith("error: cannot write ") and "No space left on device" in lines[0]
                assert lines[1].startswith("hint: free space")
            assert inconsistencies(out) == []  # a client reading now finds every file its page links
            outcome = (proc.returncode, listed_anywhere(out, gone))
        finally:
            filler.unlink()
        again = cli("index", wheels, "-o", out)  # room again: the next run finishes the work
        assert again.returncode == 0, again.stdout + again.stderr
        assert not listed_anywhere(out, gone) and listed_anywhere(out, "p9-1.0-py3-none-any.whl")
        assert not any((out / rel).exists() for rel in hosted_gone)  # never installable again
        assert inconsistencies(out) == [] and leftovers(out) == []
        final = cli("index", wheels, "-o", out)
        assert final.returncode == 0 and "0 pages written" in final.stdout
        return outcome

    outcomes = {0: attempt(0)}
    lo, hi = 0, 1 << 20  # the least room the run needs, to a 4 KiB page
    while hi - lo > 4096:
        mid = (lo + hi) // 2 // 4096 * 4096
        outcomes[mid] = attempt(mid)
        lo, hi = (lo, mid) if outcomes[mid][0] == 0 else (mid, hi)
    for free in range(hi - 4096, max(0, hi - 9 * 4096), -4096):  # each write near the end failing in turn
        outcomes.setdefault(free, attempt(free))
    failed = {free: listed for free, (code, listed) in outcomes.items() if code}
    assert failed and 0 in failed and outcomes[hi][0] == 0
    # some failures came after the pages no longer listed the removed wheel, before the state
    # said so: the runs after them removed its copy all the same
    assert any(not listed for listed in failed.values()), outcomes


KILLED = """\
import os, signal, sys
from pathlib import Path
from rocm_build_backend.wheel.index.run import build_index
where = sys.argv[3]
real_replace, real_unlink = os.replace, os.unlink
def replacing(src, dst, **kw):
    if str(dst).endswith(where):
        os.kill(os.getpid(), signal.SIGKILL)  # its temporary file (or staging copy) is left
    real_replace(src, dst, **kw)
def unlinking(path, **kw):
    real_unlink(path, **kw)
    if str(path).endswith(where):
        os.kill(os.getpid(), signal.SIGKILL)  # half the removals done
os.replace, os.unlink = replacing, unlinking
build_index(Path(sys.argv[1]), Path(sys.argv[2]))
"""


@pytest.mark.parametrize("where", ["p9-1.0-py3-none-any.whl", "index.html", "p1-1.0-py3-none-any.whl"])
def test_kill_9_leftovers_are_removed_and_the_work_finished_by_the_next_run(tmp_path, where):
    wheels = tmp_path / "wheels"
    for i, target in enumerate(["gfx90a", "gfx942", "gfx90a"]):
        make_wheel(wheels, f"p{i}", "1.0", device={f"p{i}/_k.so": [target]})
    out = tmp_path / "out"
    I.build_index(wheels, out)
    gone = wheels / "p1-1.0-py3-none-any.whl"
    hosted_gone = list(out.glob(f"files/*/{gone.name}*"))
    gone.unlink()
    make_wheel(wheels, "p9", "1.0", device={"p9/_k.so": ["gfx942"]})
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    proc = subprocess.run(
        [sys.executable, str(script), str(wheels), str(out), where],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = leftovers(out)
    assert left or where == gone.name, "the kill left nothing to clean up"
    assert inconsistencies(out) == []
    result = I.build_index(wheels, out)
    assert inconsistencies(out) == [] and leftovers(out) == []
    assert {p.relative_to(out).as_posix() for p in left} <= set(result.removed)
    assert not listed_anywhere(out, gone.name) and not any(p.exists() for p in hosted_gone)
    assert listed_anywhere(out, "p9-1.0-py3-none-any.whl")
    assert I.build_index(wheels, out).written == []


def rewrite_in_place(whl: Path, data: bytes) -> None:
    """New bytes of the same size into the same inode, its mtime put back (as ``cp -p``, rsync
    -t or a build tool with a fixed timestamp leave it)."""
    st = whl.stat()
    assert len(data) == st.st_size
    with open(whl, "r+b") as fh:
        fh.write(data)
    os.utime(whl, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_wheel_rewritten_with_the_same_size_and_time_is_read_again(tmp_path, monkeypatch):
    rng = random.Random(7)
    builds: list[Path] = []
    for i in range(200):  # three builds of the same size (the compressed RECORD varies by a byte or two)
        whl = make_wheel(
            tmp_path / f"build{i}", "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"]}, placeholder=rng.randbytes(2000)
        )
        if not builds or whl.stat().st_size == builds[0].stat().st_size:
            builds.append(whl)
        if len(builds) == 3:
            break
    assert len(builds) == 3
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    whl = wheels / builds[0].name
    shutil.copyfile(builds[0], whl)
    out = tmp_path / "out"
    I.build_index(wheels, out)
    page = out / "gfx90a/simple/pkg/index.html"
    rewrite_in_place(whl, builds[1].read_bytes())  # the ctime still moves
    again = I.build_index(wheels, out)
    assert again.read == 1 and "gfx90a/simple/pkg/index.html" in again.pages_written
    assert inconsistencies(out) == []
    # where the ctime would not tell (a coarse-timestamp filesystem), a wheel changed within the
    # timestamp granularity of the run that listed it is hashed again by the next run
    from rocm_build_backend.wheel.index import wheels as W

    monkeypatch.setattr(W, "fingerprint", lambda st: f"{st.st_size}:{st.st_mtime_ns}")
    os.utime(whl)  # written just now ...
    I.build_index(wheels, out)  # ... so the fingerprint this run records is racy
    rewrite_in_place(whl, builds[2].read_bytes())
    before = page.read_text()
    third = I.build_index(wheels, out)
    assert third.read == 1 and page.read_text() != before and inconsistencies(out) == []
    old = time.time_ns() - 3600 * 10**9
    os.utime(whl, ns=(old, old))
    I.build_index(wheels, out)
    assert I.build_index(wheels, out).read == 0  # an hour old: trusted as listed


def test_a_named_target_with_nothing_to_serve_exits_1_and_the_top_page_lists_the_indexes(tmp_path):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"]})
    out = tmp_path / "out"
    proc = cli("index", "--targets", "gfx90a,gfx942", wheels, "-o", out)
    assert proc.returncode == 1 and "gfx942: nothing to serve" in proc.stdout, proc.stdout + proc.stderr
    assert (out / "gfx942/simple/index.html").is_file()  # an empty index, served, but not a success
    top = anchors(out / "index.html")
    assert [(a["href"], t) for a, t in top.anchors] == [("gfx90a/simple/", "gfx90a"), ("gfx942/simple/", "gfx942")]
    again = cli("index", "--targets", "gfx942", "--json", wheels, "-o", out)
    doc = json.loads(again.stdout)
    assert again.returncode == 1 and doc["nothing_to_serve"] == ["gfx942"]
    assert cli("index", "--targets", "gfx90a", wheels, "-o", out).returncode == 0
    # a page of the user's own at OUT/index.html is left alone
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "index.html").write_text("my landing page")
    result = I.build_index(wheels, theirs)
    assert (theirs / "index.html").read_text() == "my landing page"
    assert any("index.html" in w for w in result.warnings)


def test_a_full_disk_while_splitting_is_the_one_error_not_a_wrong_cause(tmp_path, small_fs):
    """``index --split`` into a full output stops with the disk's error (exit 2), not with
    "none of the wheels holds device code" after skipping every wheel; with space again the
    same command splits and indexes."""
    wheels = tmp_path / "wheels"
    fat_wheel(wheels)
    out = small_fs / "out"
    filler = fill(small_fs, 200 * 1024)  # room for the state, not for the split wheels
    proc = cli("index", wheels, "-o", out, "--split")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert lines[0].startswith("error:") and "space" in lines[0] and "device code" not in proc.stderr
    assert lines[1].startswith("hint:") and "Traceback" not in proc.stderr
    filler.unlink()
    proc = cli("index", wheels, "-o", out, "--split")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {p.name for p in (out / "gfx942" / "simple" / "pkg").iterdir()} == {"index.html", "index.json"}
    assert inconsistencies(out) == [] and leftovers(out) == []
