"""A project without GPU code needs no GPU and no targets; vendor wording follows the vendor asked.

The rule: a project that says it has no GPU code (``verify = "off"``) and finds no GPU and no
targets builds without target variables, stamped ``requested = {"targets": [], "source":
"none"}``. Any other project with no GPU and no targets stops (exit 3), with a hint that says
both ways out; the shim never guesses that a project is pure.
"""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from conftest import copy_sample, error_lines, only_wheel, run
from rocm_build_backend.wheel.stamp import read_stamp
from test_shim_builds import kfd_root

NO_GPU_PATH = "/usr/local/bin:/usr/bin:/bin"  # no rocminfo & co. answer for another machine


def no_gpu(build_env, tmp_path):
    return {**build_env, "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(kfd_root(tmp_path / "none")), "PATH": NO_GPU_PATH}


FRONTENDS = {
    "pip": lambda proj, out: [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v",
                              "-w", out, proj],
    "build": lambda proj, out: [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", out, proj],
    "uv": lambda proj, out: [shutil.which("uv") or "uv", "build", "--no-build-isolation", "--wheel",
                             "--python", sys.executable, "--out-dir", out, proj],
}


@pytest.mark.integration
@pytest.mark.parametrize("sample, frontend", [("pure_python", "pip"), ("pure_python", "uv"),
                                              ("hatch_pure", "build"), ("hatch_pure", "uv")])
def test_a_project_without_gpu_code_builds_without_a_gpu(tmp_path, build_env, sample, frontend):
    if frontend == "uv" and not shutil.which("uv"):
        pytest.skip("uv is not installed")
    if sample == "hatch_pure":
        pytest.importorskip("hatchling")
    project = copy_sample(sample, tmp_path)
    proc = run(FRONTENDS[frontend](project, tmp_path / "out"), env=no_gpu(build_env, tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel = only_wheel(tmp_path / "out")
    assert read_stamp(wheel)["requested"] == {"targets": [], "source": "none"}
    text = proc.stdout + proc.stderr
    assert 'verify = "off": building without GPU targets' in text
    assert "PYTORCH_ROCM_ARCH" not in text  # no target knobs


@pytest.mark.integration
def test_a_gpu_project_without_a_gpu_stops_and_says_both_ways_out(tmp_path, build_env):
    project = copy_sample("setuptools_hip", tmp_path)
    proc = run(FRONTENDS["pip"](project, tmp_path / "out"), env=no_gpu(build_env, tmp_path))
    assert proc.returncode != 0
    lines = error_lines(proc)
    assert lines[0].startswith("rocm-build-backend: error: no AMD GPU found"), lines
    assert "ROCM_BUILD_BACKEND_TARGETS=gfx942" in lines[1] and 'verify = "off"' in lines[1], lines


def plan(*argv, env):
    return run([sys.executable, "-m", "rocm_build_backend", "plan", *argv], env=env)


def test_nvidia_users_are_told_about_nvidia(tmp_path, build_env):
    project = copy_sample("setuptools_hip", tmp_path)
    env = no_gpu(build_env, tmp_path)
    proc = plan(project, "-C", "rocm-build-backend.vendor=nvidia", env=env)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    error, hint = proc.stderr.splitlines()[:2]
    assert error.startswith("error: no NVIDIA GPU found (NVML and nvidia-smi: ") and "AMD" not in error, error
    assert "ROCM_BUILD_BACKEND_TARGETS=sm_90" in hint and "TORCH_CUDA_ARCH_LIST=9.0" in hint, hint
    assert "gfx" not in hint
    # the AMD wording when AMD is asked (or, with no NVIDIA software here, when nothing is)
    amd = plan(project, "-C", "rocm-build-backend.vendor=amd", env=env)
    assert amd.returncode == 3 and amd.stderr.startswith("error: no AMD GPU found ("), amd.stderr
    assert "ROCM_BUILD_BACKEND_TARGETS=gfx942" in amd.stderr and "NVIDIA" not in amd.stderr


def test_detect_shows_every_vendors_probes(tmp_path, build_env):
    env = no_gpu(build_env, tmp_path)
    text = run([sys.executable, "-m", "rocm_build_backend", "detect"], env=env)
    assert text.returncode == 3
    probes = text.stdout.split("probes:\n", 1)[1].splitlines()
    assert probes[0].startswith("  KFD: ") and any(p.startswith("  NVML and nvidia-smi: ") for p in probes), probes
    doc = json.loads(run([sys.executable, "-m", "rocm_build_backend", "detect", "--json"], env=env).stdout)
    assert {"kfd", "nvidia"} <= set(doc["seen"]), doc["seen"]
    # detect read the sysfs root a build reads: the empty KFD tree of ROCM_BUILD_BACKEND_SYSFS_ROOT
    assert doc["seen"]["kfd"].startswith("no GPU nodes"), doc["seen"]
