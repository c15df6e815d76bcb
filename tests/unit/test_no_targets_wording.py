"""Without a GPU and without targets, the words follow the vendor asked for: ``plan`` with
``vendor = "nvidia"`` names NVIDIA's probe and ``sm_90`` / ``TORCH_CUDA_ARCH_LIST``, with
``vendor = "amd"`` AMD's; ``detect`` lists every vendor's probes. Builds of projects without
GPU code on such a machine: tests/integration/test_no_targets_builds.py.
"""

from __future__ import annotations

import json
import sys

from helpers import copy_sample, no_gpu_env, run


def plan(*argv, env):
    return run([sys.executable, "-m", "rocm_build_backend", "plan", *argv], env=env)


def test_nvidia_users_are_told_about_nvidia(tmp_path, build_env):
    project = copy_sample("setuptools_hip", tmp_path)
    env = no_gpu_env(build_env, tmp_path)
    proc = plan(project, "-C", "rocm-build-backend.vendor=nvidia", env=env)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    error, hint = proc.stderr.splitlines()[:2]
    assert error.startswith("error: no NVIDIA GPU found (NVML and nvidia-smi: ") and "AMD" not in error, error
    assert "ROCM_BUILD_BACKEND_TARGETS=sm_90" in hint and "TORCH_CUDA_ARCH_LIST=9.0" in hint, hint
    assert "gfx" not in hint
    # the AMD wording when AMD is asked
    amd = plan(project, "-C", "rocm-build-backend.vendor=amd", env=env)
    assert amd.returncode == 3 and amd.stderr.startswith("error: no AMD GPU found ("), amd.stderr
    assert "ROCM_BUILD_BACKEND_TARGETS=gfx942" in amd.stderr and "NVIDIA" not in amd.stderr


def test_detect_shows_every_vendors_probes(tmp_path, build_env):
    env = no_gpu_env(build_env, tmp_path)
    text = run([sys.executable, "-m", "rocm_build_backend", "detect"], env=env)
    assert text.returncode == 3
    probes = text.stdout.split("probes:\n", 1)[1].splitlines()
    assert probes[0].startswith("  KFD: ") and any(p.startswith("  NVML and nvidia-smi: ") for p in probes), probes
    doc = json.loads(run([sys.executable, "-m", "rocm_build_backend", "detect", "--json"], env=env).stdout)
    assert {"kfd", "nvidia"} <= set(doc["seen"]), doc["seen"]
    # detect read the sysfs root a build reads: the empty KFD tree of ROCM_BUILD_BACKEND_SYSFS_ROOT
    assert doc["seen"]["kfd"].startswith("no GPU nodes"), doc["seen"]


def test_with_no_vendor_asked_the_words_name_none_and_the_hint_names_both(tmp_path, build_env):
    """A CUDA project on a machine with only AMD's tools installed: the error says "no GPU found"
    and the hint gives a target of each vendor, not only AMD's."""
    project = copy_sample("torch_cuda_ext", tmp_path)
    proc = plan(project, env=no_gpu_env(build_env, tmp_path))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    error, hint = proc.stderr.splitlines()[:2]
    assert error.startswith("error: no GPU found (") and "AMD GPU" not in error, error
    assert "ROCM_BUILD_BACKEND_TARGETS=gfx942" in hint and "ROCM_BUILD_BACKEND_TARGETS=sm_90" in hint, hint
