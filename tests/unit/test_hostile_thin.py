"""Hostile inputs for ``thin``, ``split`` and ``index --split``: generated wheels and output
folders (``hostile_gen.py``). Each test shows one defect a wheel or a folder from someone else
could cause: inflating past the budget, a traceback, a hang, an output the user never asked to
lose, a leftover a later run never removes, a forged terminal line, a laundered RECORD."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import ROOT, one_error
from helpers import hostile as G


def cli(*args: object, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=timeout,
    )


def wheels_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*")) if folder.exists() else []


# --------------------------------------------------------------------------- one budget for inflating


@pytest.mark.parametrize("verb", ["thin", "split"])
def test_a_compressed_bundle_bomb_is_refused_within_the_budget(tmp_path, verb):
    whl = G.ccob_bomb_wheel(tmp_path / "in", 200 * G.MIB)
    assert whl.stat().st_size < 64 << 10
    args = ["--targets", "gfx942"] if verb == "thin" else []
    err = one_error(cli(verb, whl, *args, "--outdir", tmp_path / "out"), 3)
    assert "too large" in err
    assert wheels_in(tmp_path / "out") == []


@pytest.mark.parametrize("verb", ["thin", "split"])
def test_zeros_after_a_library_are_refused_before_they_are_inflated(tmp_path, verb):
    whl = G.zeros_after_elf_wheel(tmp_path / "in", 256 * G.MIB)
    assert whl.stat().st_size < 1 << 20
    args = ["--targets", "gfx942"] if verb == "thin" else []
    err = one_error(cli(verb, whl, *args, "--outdir", tmp_path / "out"), 3)
    assert "too large" in err and "zeros/_hip.so" in err
    assert wheels_in(tmp_path / "out") == []


def test_index_split_skips_a_bomb_with_the_reason_and_indexes_the_rest(tmp_path):
    wheels = tmp_path / "wheels"
    G.ccob_bomb_wheel(wheels, 200 * G.MIB)
    G.fat_wheel(wheels)
    proc = cli("index", "--split", "--json", wheels, "-o", tmp_path / "out")
    assert "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert "too large" in doc["skipped"]["bomb-1.0-py3-none-any.whl"], doc["skipped"]
    assert doc["indexes"]["gfx942"] == ["pkg-1.0+gfx942-py3-none-any.whl"]


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 1 MiB tmpfs (root only; skipped where mounting is not allowed)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


MAPPED = (
    "import sys; from rocm_build_backend.wheel.thin import stream; stream.MEMORY_CAP = 1024; "
    "from rocm_build_backend.cli import main; sys.exit(main(sys.argv[1:]))"
)


def test_a_full_disk_under_a_mapped_member_is_one_clear_error(tmp_path, tiny_tmpfs):
    whl = G.zeros_after_elf_wheel(tmp_path / "in", 4 * G.MIB)  # within the budget; the disk has 1 MiB
    out = tiny_tmpfs / "out"
    for verb, args in (("thin", ["--targets", "gfx942"]), ("split", [])):
        proc = subprocess.run(
            [sys.executable, "-c", MAPPED, verb, str(whl), *args, "--outdir", str(out)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=120,
        )
        err = one_error(proc, 2)
        assert "space" in err, err
        assert wheels_in(out) == []


def test_an_elf_member_with_a_bad_header_through_a_mapped_file_is_one_clear_error(tmp_path):
    whl = G.bad_header_elf_wheel(tmp_path / "in", 8 * G.MIB)
    proc = subprocess.run(
        [sys.executable, "-c", MAPPED, "thin", str(whl), "--targets", "gfx942", "--outdir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    err = one_error(proc, 3)
    assert "badelf/_k.so" in err
    assert wheels_in(tmp_path / "out") == []


# --------------------------------------------------------------------------- output folders and names


def read_only(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
            pytest.skip("root, and chattr +i is not available: cannot make a read-only folder")
    else:
        folder.chmod(0o555)


def writable_again(folder: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
    else:
        folder.chmod(0o755)


@pytest.mark.parametrize("how", ["file", "dangling", "read-only", "zero", "fifo", "folder"])
@pytest.mark.parametrize("verb", ["thin", "split"])
def test_an_output_that_cannot_be_written_is_one_clear_error(tmp_path, verb, how):
    whl = G.fat_wheel(tmp_path / "in")
    out = tmp_path / "out"
    name = "pkg-1.0-py3-none-any.whl" if verb == "thin" else "pkg-1.0+gfx942-py3-none-any.whl"
    if how == "file":
        out.write_text("a file, not a folder")
    elif how == "dangling":
        out.symlink_to(tmp_path / "nowhere")
    elif how == "read-only":
        read_only(out)
    else:
        out.mkdir()
        if how == "folder":
            (out / name).mkdir()
        else:
            G.plant(out / name, how)
    args = ["--targets", "gfx942"] if verb == "thin" else []
    try:
        proc = cli(verb, whl, *args, "--outdir", out, timeout=60)
    finally:
        if how == "read-only":
            writable_again(out)
    one_error(proc, 2)
    if how in ("zero", "fifo", "folder"):
        kept = out / name
        assert kept.is_symlink() if how == "zero" else (kept.is_fifo() if how == "fifo" else kept.is_dir())
        assert sorted(p.name for p in out.iterdir()) == [name]
    if how == "file":
        assert out.read_text() == "a file, not a folder"
    if how == "dangling":
        assert not (tmp_path / "nowhere").exists()


def test_a_thin_result_for_other_targets_is_not_replaced_without_force(tmp_path):
    whl = G.fat_wheel(tmp_path / "in")
    out = tmp_path / "out"
    assert cli("thin", whl, "--targets", "gfx942", "--outdir", out).returncode == 0
    first = (out / whl.name).read_bytes()
    err = one_error(cli("thin", whl, "--targets", "gfx90a", "--outdir", out), 2)
    assert "gfx942" in err and "--force" in err
    assert (out / whl.name).read_bytes() == first
    assert cli("thin", whl, "--targets", "gfx942", "--outdir", out).returncode == 0  # the same targets: a rerun
    proc = cli("thin", whl, "--targets", "gfx90a", "--outdir", out, "--force")
    assert proc.returncode == 0, proc.stderr
    from rocm_build_backend.wheel.stamp import read_stamp

    assert read_stamp(out / whl.name)["requested"]["targets"] == ["gfx90a"]


# --------------------------------------------------------------------------- what a killed run left


def dead_pid() -> int:
    return int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    )


def aged(path: Path) -> Path:
    os.utime(path, (1_000_000_000, 1_000_000_000))
    return path


def test_thin_removes_what_a_killed_thin_left_in_its_output_folder(tmp_path):
    whl = G.fat_wheel(tmp_path / "in")
    out = tmp_path / "out"
    out.mkdir()
    left = out / f".{whl.name}.{dead_pid()}.k2j4h.thin.tmp"
    left.write_bytes(b"half a wheel")
    aged(left)
    running = out / f".{whl.name}.{os.getpid()}.a8f3e.thin.tmp"
    running.write_bytes(b"being written")
    aged(running)
    mine = out / ".notes.thin.tmp"
    mine.write_text("the user's")
    aged(mine)
    proc = cli("thin", whl, "--targets", "gfx942", "--outdir", out)
    assert proc.returncode == 0, proc.stderr
    assert not left.exists()
    assert running.exists() and mine.exists()


def test_index_split_removes_the_work_folder_a_killed_run_left(tmp_path):
    wheels = tmp_path / "wheels"
    G.fat_wheel(wheels)
    out = tmp_path / "out"
    work = out / ".split" / f".tmp-{dead_pid()}-x1y2z3"
    work.mkdir(parents=True)
    (work / "pkg-1.0+gfx942-py3-none-any.whl").write_bytes(b"half")
    aged(work)
    live = out / ".split" / f".tmp-{os.getpid()}-a1b2c3"
    live.mkdir()
    aged(live)
    proc = cli("index", "--split", wheels, "-o", out)
    assert "Traceback" not in proc.stderr and proc.returncode == 0, proc.stderr
    assert not work.exists()
    assert live.exists()


def test_index_split_refuses_a_wheel_whose_split_folder_could_never_be_pruned(tmp_path):
    wheels = tmp_path / "wheels"
    odd = G.fat_wheel(wheels, "pkg-1.0-py3-none-any~x.whl")
    G.write_wheel(wheels / "good-1.0-py3-none-any.whl", G.fat_members(), dist="good-1.0")
    out = tmp_path / "out"
    proc = cli("index", "--split", "--json", wheels, "-o", out)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert odd.name in json.loads(proc.stdout)["skipped"]
    odd.unlink()
    cli("index", "--split", wheels, "-o", out)
    assert [p.name for p in (out / ".split").iterdir()] == [
        f"good-1.0-py3-none-any-{(wheels / 'good-1.0-py3-none-any.whl').stat().st_size}-"
        f"{(wheels / 'good-1.0-py3-none-any.whl').stat().st_mtime_ns}"
    ]


# --------------------------------------------------------------------------- text to the terminal


FORGED = "\x1b[2J\nFAKE: all good"


def test_member_names_in_thin_and_split_output_are_escaped(tmp_path):
    members = G.fat_members()
    members[f"pkg/x{FORGED}.hsaco"] = members.pop("pkg/kernels/gfx942.hsaco")
    whl = G.write_wheel(tmp_path / "in" / "pkg-1.0-py3-none-any.whl", members)
    for verb, args in (("thin", ["--targets", "gfx942"]), ("split", [])):
        proc = cli(verb, whl, *args, "--outdir", tmp_path / verb)
        assert proc.returncode == 0, proc.stderr
        if verb == "thin":
            assert "\\x1b[2J\\nFAKE" in proc.stdout
        assert "\x1b" not in proc.stdout and not any(ln.startswith("FAKE") for ln in proc.stdout.splitlines())


def test_member_names_in_errors_are_escaped(tmp_path):
    members = G.fat_members()
    members[f"pkg/y{FORGED}.so"] = b"\x7fELF\x02\x01\x01" + b"\xff" * 200
    whl = G.write_wheel(tmp_path / "in" / "pkg-1.0-py3-none-any.whl", members)
    proc = cli("thin", whl, "--targets", "gfx942", "--outdir", tmp_path / "out")
    assert proc.returncode == 3
    assert "\x1b" not in proc.stderr and not any(ln.startswith("FAKE") for ln in proc.stderr.splitlines()), proc.stderr


# --------------------------------------------------------------------------- RECORD


@pytest.mark.parametrize("how", ["hash", "size", "missing", "plain"])
@pytest.mark.parametrize("verb", ["thin", "split"])
def test_a_wheel_whose_record_lies_is_refused_not_repaired(tmp_path, verb, how):
    whl = G.lying_record_wheel(tmp_path / "in", how)
    args = ["--targets", "gfx942"] if verb == "thin" else []
    err = one_error(cli(verb, whl, *args, "--outdir", tmp_path / "out"), 3)
    assert "RECORD" in err
    assert wheels_in(tmp_path / "out") == []


def test_a_wheel_whose_record_is_true_is_thinned(tmp_path):
    whl = G.fat_wheel(tmp_path / "in")
    proc = cli("thin", whl, "--targets", "gfx942", "--outdir", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(tmp_path / "out" / whl.name) as zf:
        assert "pkg/kernels/gfx942.hsaco" in zf.namelist()
