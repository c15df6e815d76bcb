"""The command line: real subprocesses, exit codes, JSON shapes, and no traceback for bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import TESTS

DATA = TESTS / "data"


def cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", *map(str, args)], capture_output=True, text=True, cwd=cwd
    )


def test_detect_json_from_recorded_rocminfo():
    proc = cli("detect", "--json", "--rocminfo-output", DATA / "detect" / "apu_gfx1036_plus_rx7900xtx.rocminfo.txt")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["targets"] == ["gfx1100"] and data["source"] == "rocminfo"
    igpu = [d for d in data["devices"] if d["processor"] == "gfx1036"]
    assert igpu and igpu[0]["included"] is False and igpu[0]["kind"] == "apu" and igpu[0]["reason"]
    assert set(data) >= {"targets", "devices", "source", "warnings"}


def test_detect_features_keeps_the_modes():
    proc = cli("detect", "--json", "--features", "--rocminfo-output", DATA / "detect" / "mi300x_4gpu.rocminfo.txt")
    assert json.loads(proc.stdout)["targets"] == ["gfx942:sramecc+:xnack-"]


def test_detect_on_an_empty_root_exits_3_cannot_tell_with_a_hint(tmp_path):
    (tmp_path / "sys").mkdir()
    proc = cli("detect", "--root", tmp_path)
    assert proc.returncode == 3
    assert "hint:" in proc.stderr and "ROCM_BUILD_BACKEND_TARGETS=" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_audit_exit_codes_and_json(tmp_path):
    good = cli(
        "audit", "--json", DATA / "binaries" / "hip_two_tu_cov4.so", DATA / "binaries" / "cuda_sm75_80_90_ptx90.so"
    )
    assert good.returncode == 0, good.stderr
    data = json.loads(good.stdout)
    by_name = {Path(f["path"]).name: f for f in data["files"]}
    assert by_name["hip_two_tu_cov4.so"]["targets"] == ["gfx908", "gfx90a"]
    assert by_name["hip_two_tu_cov4.so"]["complete"] == ["gfx90a"]
    assert by_name["cuda_sm75_80_90_ptx90.so"]["targets"] == ["sm_75", "sm_80", "sm_90", "compute_90"]
    bad = cli("audit", DATA / "binaries" / "trunc_hip_gfx90a_gfx940_cov4.so")
    assert bad.returncode == 3 and "truncated" in bad.stdout  # cannot tell all it holds; never 1
    folder = tmp_path / "dir"
    folder.mkdir()
    shutil.copy(DATA / "binaries" / "amdgpu_gfx942_cov5.hsaco", folder / "kernel.bin")  # by magic, not by name
    found = cli("audit", "--json", folder)
    assert json.loads(found.stdout)["targets"] == ["gfx942"]


@pytest.mark.parametrize(
    "args, words",
    [
        (["audit", "/no/such/file"], "no such file or folder"),
        (["check", "/no/such.whl"], "no such wheel"),
        (["detect", "--rocminfo-output", "/no/such/file"], "cannot read"),
        (["plan", ".", "-C", "rocm-build-backend.targets"], "expected KEY=VALUE"),
        (["check", "--targets", "gfx924", "x.whl"], "no such wheel"),
        (["index", "/no/such/dir", "-o", "/tmp/out-never"], "error:"),
    ],
)
def test_bad_input_one_line_no_traceback(args, words):
    proc = cli(*args)
    assert proc.returncode == 2  # a usage or input error, for every verb
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ")


def test_targets_listing():
    proc = cli("targets")
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert "gfx942" in names and "gfx11-generic" in names and "sm_90" not in names
    assert names.index("gfx908") < names.index("gfx90a") < names.index("gfx942") < names.index("gfx1030")


def test_version_and_help():
    assert cli("--version").stdout.startswith("rocm-build-backend ")
    assert "audit" in cli("--help").stdout


@pytest.mark.parametrize("verb", [[], ["detect"], ["check"], ["audit"], ["index"], ["cache"], ["plan"], ["build"]])
def test_help_documents_the_exit_codes(verb):
    text = cli(*verb, "--help").stdout
    for code, words in (("0", "success"), ("1", "definite no"), ("2", "usage or input error"), ("3", "cannot tell")):
        assert f"  {code}  " in text and words in text, (verb, code)


def test_usage_error_exits_2():
    proc = cli("check")  # no wheel given
    assert proc.returncode == 2 and "usage:" in proc.stderr


def test_audit_of_a_file_named_whl_that_is_no_zip(tmp_path):
    fake = tmp_path / "demo-1.0-py3-none-any.whl"
    fake.write_bytes(b"not a zip at all")
    proc = cli("audit", fake)
    assert proc.returncode == 3 and "not a wheel" in proc.stdout + proc.stderr
