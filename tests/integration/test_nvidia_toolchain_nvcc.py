"""The nvcc check against the real nvcc installed here, when there is one."""

from __future__ import annotations

import os

import pytest
from rocm_build_backend.gpu.nvidia.toolchain import check_nvcc, find_nvcc


@pytest.fixture
def env(tmp_path):
    return {"XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": "/nonexistent"}


@pytest.mark.skipif(find_nvcc(os.environ) is None, reason="needs nvcc")
def test_the_real_nvcc(env):
    nvcc = find_nvcc(os.environ)
    found = check_nvcc(["sm_90"], env, nvcc=nvcc)
    assert "sm_90" in found.codes and "compute_90" in found.archs
