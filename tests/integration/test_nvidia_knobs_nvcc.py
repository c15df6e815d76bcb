"""nvcc obeying the CUDA knobs computed from code targets, and the scikit-build-core CUDA sample
built with them (no GPU needed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rocm_build_backend.binary.audit import audit_paths
from rocm_build_backend.gpu.nvidia.knobs import cuda_knobs
from helpers import copy_sample, only_wheel, pip_wheel

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
KERNEL = 'extern "C" __global__ void inc(int *x) { x[threadIdx.x] += 1; }\n'


def names(targets):
    return [str(t) for t in targets]


needs_nvcc = pytest.mark.skipif(NVCC is None, reason="needs nvcc")


@needs_nvcc
@pytest.mark.parametrize("targets, ptx", [(["sm_80", "sm_90"], "none"), (["sm_90a"], "highest"), (["sm_100f"], "none")])
def test_nvcc_emits_exactly_the_knobs_targets(tmp_path, targets, ptx):
    """With no target on the command line, NVCC_APPEND_FLAGS alone decides the code."""
    (tmp_path / "k.cu").write_text(KERNEL)
    k = cuda_knobs(targets, ptx)
    env = dict(os.environ, NVCC_APPEND_FLAGS=k.env["NVCC_APPEND_FLAGS"])
    out = tmp_path / "k.so"
    subprocess.run(
        [NVCC, "-shared", "-Xcompiler", "-fPIC", "k.cu", "-o", str(out)],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    report = audit_paths([str(out)]).to_json()
    assert sorted(report["targets"]) == sorted(names(k.code))


@needs_nvcc
@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_skbuild_cuda_sample_builds_for_explicit_targets(tmp_path):
    """sample_projects/skbuild_cuda through scikit-build-core with CMAKE_ARGS from the knobs."""
    pytest.importorskip("scikit_build_core")
    project = copy_sample("skbuild_cuda", tmp_path)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            'build-backend = "rocm_build_backend"', 'build-backend = "scikit_build_core.build"'
        )
    )
    k = cuda_knobs(["sm_80", "sm_90"])
    env = {key: v for key, v in os.environ.items() if key not in ("CMAKE_ARGS", "CUDAARCHS", "NVCC_APPEND_FLAGS")}
    env["PATH"] = str(Path(NVCC).parent) + os.pathsep + env.get("PATH", "")
    env["CMAKE_ARGS"] = f"-DCMAKE_CUDA_ARCHITECTURES={k.cmake['CMAKE_CUDA_ARCHITECTURES']}"
    proc = pip_wheel(project, tmp_path / "dist", env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = audit_paths([str(only_wheel(tmp_path / "dist"))]).to_json()
    assert report["targets"] == ["sm_80", "sm_90"]


@needs_nvcc
@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_skbuild_cuda_sample_refuses_to_guess(tmp_path):
    pytest.importorskip("scikit_build_core")
    project = copy_sample("skbuild_cuda", tmp_path)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            'build-backend = "rocm_build_backend"', 'build-backend = "scikit_build_core.build"'
        )
    )
    env = {key: v for key, v in os.environ.items() if key not in ("CMAKE_ARGS", "CUDAARCHS", "NVCC_APPEND_FLAGS")}
    env["PATH"] = str(Path(NVCC).parent) + os.pathsep + env.get("PATH", "")
    proc = pip_wheel(project, tmp_path / "dist", env)
    assert proc.returncode != 0
    assert "CMAKE_CUDA_ARCHITECTURES is not set" in proc.stdout + proc.stderr
