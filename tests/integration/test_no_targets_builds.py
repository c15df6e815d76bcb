"""A project without GPU code builds without a GPU and without targets, with real frontends.

The rule: a project that says it has no GPU code (``verify = "off"``) and finds no GPU and no
targets builds without target variables, stamped ``requested = {"targets": [], "source":
"none"}``. Any other project with no GPU and no targets stops (exit 3), with a hint that says
both ways out; the shim never guesses that a project is pure. The vendor wording of ``plan``
and ``detect`` without a GPU: tests/unit/test_no_targets_wording.py.
"""

from __future__ import annotations

import shutil
import sys

import pytest

from rocm_build_backend.wheel.stamp import read_stamp
from helpers import copy_sample, error_lines, no_gpu_env, only_wheel, run


FRONTENDS = {
    "pip": lambda proj, out: [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-build-isolation",
        "--no-deps",
        "-v",
        "-w",
        out,
        proj,
    ],
    "build": lambda proj, out: [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", out, proj],
    "uv": lambda proj, out: [
        shutil.which("uv") or "uv",
        "build",
        "--no-build-isolation",
        "--wheel",
        "--python",
        sys.executable,
        "--out-dir",
        out,
        proj,
    ],
}


@pytest.mark.parametrize(
    "sample, frontend", [("pure_python", "pip"), ("pure_python", "uv"), ("hatch_pure", "build"), ("hatch_pure", "uv")]
)
def test_a_project_without_gpu_code_builds_without_a_gpu(tmp_path, build_env, sample, frontend):
    if frontend == "uv" and not shutil.which("uv"):
        pytest.skip("uv is not installed")
    if sample == "hatch_pure":
        pytest.importorskip("hatchling")
    project = copy_sample(sample, tmp_path)
    proc = run(FRONTENDS[frontend](project, tmp_path / "out"), env=no_gpu_env(build_env, tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel = only_wheel(tmp_path / "out")
    assert read_stamp(wheel)["requested"] == {"targets": [], "source": "none"}
    text = proc.stdout + proc.stderr
    assert 'verify = "off": building without GPU targets' in text
    assert "PYTORCH_ROCM_ARCH" not in text  # no target knobs


def test_a_gpu_project_without_a_gpu_stops_and_says_both_ways_out(tmp_path, build_env):
    project = copy_sample("setuptools_hip", tmp_path)
    proc = run(FRONTENDS["pip"](project, tmp_path / "out"), env=no_gpu_env(build_env, tmp_path))
    assert proc.returncode != 0
    lines = error_lines(proc)
    assert lines[0].startswith("rocm-build-backend: error: no GPU found"), lines
    assert "ROCM_BUILD_BACKEND_TARGETS=gfx942" in lines[1] and 'verify = "off"' in lines[1], lines
