"""The nvcc check from nvcc's recorded answers (CUDA 13.0): one line per refused target naming
nvcc's release, and the cache. The real nvcc: tests/integration/test_nvidia_toolchain_nvcc.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocm_build_backend.errors import ToolchainError
from rocm_build_backend.gpu.nvidia.toolchain import check_nvcc, find_nvcc, parse_version
from helpers import TESTS

DATA = TESTS / "data" / "nvidia" / "nvcc-13.0"
NVCC_124 = {  # CUDA 12.4: Maxwell to Hopper, no Blackwell
    "--version": "Cuda compilation tools, release 12.4, V12.4.131\n",
    "--list-gpu-code": "sm_50\nsm_52\nsm_53\nsm_60\nsm_61\nsm_62\nsm_70\nsm_72\nsm_75\nsm_80\nsm_86\nsm_87\nsm_89\nsm_90\n",
    "--list-gpu-arch": "compute_50\ncompute_52\ncompute_53\ncompute_60\ncompute_61\ncompute_62\ncompute_70\ncompute_72\n"
    "compute_75\ncompute_80\ncompute_86\ncompute_87\ncompute_89\ncompute_90\n",
}


def recorded_13():
    return {f"--{name}": (DATA / f"{name}.txt").read_text() for name in ("version", "list-gpu-code", "list-gpu-arch")}


class Runner:
    def __init__(self, answers):
        self.answers, self.calls = answers, 0

    def __call__(self, argv):
        self.calls += 1
        return 0, self.answers[argv[1]]


@pytest.fixture
def fake_nvcc(tmp_path):
    path = tmp_path / "cuda" / "bin" / "nvcc"
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\nexit 1\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def env(tmp_path):
    return {"XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": "/nonexistent"}


def test_release_line():
    assert parse_version(recorded_13()["--version"]) == ("13.0", "V13.0.88")
    with pytest.raises(ToolchainError):
        parse_version("clang version 19\n")


@pytest.mark.parametrize(
    "targets", [["sm_90"], ["sm_90a", "compute_90a"], ["sm_100f", "sm_120a", "sm_110"], ["compute_75"]]
)
def test_cuda_13_accepts(fake_nvcc, env, targets):
    assert check_nvcc(targets, env, run=Runner(recorded_13()), nvcc=fake_nvcc).version == "13.0"


@pytest.mark.parametrize(
    "targets, line",
    [
        (["sm_70"], "sm_70 is not built by CUDA 13.0 or newer; nvcc ({nvcc}) is CUDA 13.0"),
        (["sm_101"], "sm_101 is not built by CUDA 13.0 or newer; nvcc ({nvcc}) is CUDA 13.0"),
    ],
)
def test_cuda_13_refuses_dropped_targets(fake_nvcc, env, targets, line):
    with pytest.raises(ToolchainError) as exc:
        check_nvcc(targets, env, run=Runner(recorded_13()), nvcc=fake_nvcc)
    assert exc.value.message == line.format(nvcc=fake_nvcc)


@pytest.mark.parametrize(
    "target, line",
    [
        ("sm_120", "sm_120 needs CUDA 12.8; nvcc ({nvcc}) is CUDA 12.4"),
        ("sm_100f", "sm_100f needs CUDA 12.9; nvcc ({nvcc}) is CUDA 12.4"),
        ("compute_103", "compute_103 needs CUDA 12.9; nvcc ({nvcc}) is CUDA 12.4"),
    ],
)
def test_older_cuda_names_the_release_needed(fake_nvcc, env, target, line):
    with pytest.raises(ToolchainError) as exc:
        check_nvcc(["sm_90", target], env, run=Runner(NVCC_124), nvcc=fake_nvcc)
    assert exc.value.message == line.format(nvcc=fake_nvcc)
    assert "\n" not in exc.value.message


def test_answers_are_cached_per_nvcc(fake_nvcc, env):
    runner = Runner(recorded_13())
    check_nvcc(["sm_90"], env, run=runner, nvcc=fake_nvcc)
    asked = runner.calls
    check_nvcc(["sm_80"], env, run=runner, nvcc=fake_nvcc)
    assert asked == 3 and runner.calls == 3
    os.utime(fake_nvcc, ns=(1, 1))  # another nvcc at the same path: asked again
    check_nvcc(["sm_80"], env, run=runner, nvcc=fake_nvcc)
    assert runner.calls == 6


def test_no_nvcc(env, monkeypatch):
    from rocm_build_backend.gpu.nvidia import toolchain

    monkeypatch.setattr(toolchain, "DEFAULT_PATHS", ())
    with pytest.raises(ToolchainError, match="no nvcc found"):
        check_nvcc(["sm_90"], {**env, "CUDA_HOME": "/nonexistent"})


def test_cuda_home_is_looked_at(fake_nvcc, env):
    assert find_nvcc({**env, "CUDA_HOME": str(Path(fake_nvcc).parents[1])}) == fake_nvcc
