"""The pinned nvidia-smi: run as a real script, with a stand-in for the real one on PATH."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from rocm_build_backend.gpu.nvidia.pinned import pinned_gpus, write_nvidia_smi
from helpers import TESTS

H200 = TESTS / "data" / "nvidia" / "h200"


@pytest.fixture
def tools(tmp_path):
    """(pinned dir, real dir): the real one prints its arguments."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "nvidia-smi").write_text('#!/bin/sh\necho "REAL $*"\n')
    (real / "nvidia-smi").chmod(0o755)
    return tmp_path / "pinned", real


def smi(pinned: Path, real: Path | None, *args: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(pinned), str(pinned)] + ([str(real)] if real else []) + ["/usr/bin", "/bin"])
    return subprocess.run(
        [str(pinned / "nvidia-smi"), *args], capture_output=True, text=True, env={"PATH": path}, timeout=30
    )


def test_answers_like_the_h200(tools):
    pinned, real = tools
    write_nvidia_smi(pinned, ["sm_90"])
    got = smi(pinned, real, "--query-gpu=index,name,compute_cap,uuid", "--format=csv")
    recorded = (H200 / "nvidia-smi-query-header.csv").read_text().splitlines()
    assert got.returncode == 0
    lines = got.stdout.splitlines()
    assert lines[0] == recorded[0]  # the same header as the real one
    assert lines[1].split(", ")[2] == recorded[1].split(", ")[2] == "9.0"


@pytest.mark.parametrize(
    "args, out",
    [
        (["--query-gpu=compute_cap", "--format=csv,noheader"], "8.0\n9.0\n"),
        (["--query-gpu", "compute_cap", "--format", "csv,noheader,nounits"], "8.0\n9.0\n"),
        (["--query-gpu=index,compute_cap", "--format=csv,noheader", "-i", "1"], "1, 9.0\n"),
        (["--query-gpu=count", "--format=csv,noheader"], "2\n2\n"),
    ],
)
def test_compute_capability_queries(tools, args, out):
    pinned, real = tools
    write_nvidia_smi(pinned, ["sm_80", "sm_90a", "compute_90"])
    got = smi(pinned, real, *args)
    assert (got.returncode, got.stdout) == (0, out)


@pytest.mark.parametrize(
    "args",
    [
        ["-L"],
        [],
        ["--query-gpu=memory.total", "--format=csv"],
        ["--query-gpu=compute_cap,driver_version", "--format=csv"],
        ["--query-gpu=compute_cap", "--format=json"],
        ["--query-gpu=compute_cap", "--format=csv", "-i", "GPU-1234"],
        ["--query-gpu=*", "--format=csv"],
    ],
)
def test_everything_else_goes_to_the_real_one(tools, args):
    pinned, real = tools
    write_nvidia_smi(pinned, ["sm_90"])
    got = smi(pinned, real, *args)
    assert (got.returncode, got.stdout) == (0, "REAL " + " ".join(args) + "\n")


def test_without_a_real_one(tools):
    pinned, _ = tools
    write_nvidia_smi(pinned, ["sm_90"])
    got = smi(pinned, None, "-L")
    assert got.returncode == 127 and "no real nvidia-smi" in got.stderr


def test_pinned_gpus():
    assert pinned_gpus(["sm_100f", "sm_100", "sm_120a"]) == [(10, 0), (12, 0)]
    assert pinned_gpus(["compute_80"]) == [(8, 0)]
