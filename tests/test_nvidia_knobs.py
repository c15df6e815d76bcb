"""The CUDA knobs computed from code targets, and nvcc obeying them (no GPU needed)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from rocm_build_backend.binary.audit import audit_paths
from rocm_build_backend.errors import ConfigError
from rocm_build_backend.gpu.nvidia.knobs import cuda_knobs, with_ptx
from rocm_build_backend.gpu.nvidia.targets import parse_cmake_architectures, parse_torch_arch_list

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
KERNEL = 'extern "C" __global__ void inc(int *x) { x[threadIdx.x] += 1; }\n'


def names(targets):
    return [str(t) for t in targets]


def test_one_target():
    k = cuda_knobs(["sm_90"])
    assert k.env == {
        "TORCH_CUDA_ARCH_LIST": "9.0",
        "CMAKE_CUDA_ARCHITECTURES": "90-real",
        "CUDAARCHS": "90-real",
        "NVCC_APPEND_FLAGS": "-gencode=arch=compute_90,code=sm_90",
    }
    assert k.cmake == {"CMAKE_CUDA_ARCHITECTURES": "90-real"}


@pytest.mark.parametrize("targets, ptx, code", [
    (["sm_80", "sm_90"], "none", ["sm_80", "sm_90"]),
    (["sm_80", "sm_90"], "highest", ["sm_80", "sm_90", "compute_90"]),
    (["sm_80", "sm_90"], "all", ["sm_80", "compute_80", "sm_90", "compute_90"]),
    (["sm_90a"], "highest", ["sm_90a", "compute_90"]),  # PTX without 'a': forward compatible
    (["sm_100f"], "highest", ["sm_100f", "compute_100f"]),
    (["compute_80"], "none", ["compute_80"]),
])
def test_ptx_choice(targets, ptx, code):
    assert names(with_ptx(targets, ptx)) == code


def test_bad_ptx_choice_and_no_targets():
    with pytest.raises(ConfigError, match="ptx"):
        with_ptx(["sm_90"], "some")
    with pytest.raises(ConfigError):
        with_ptx([], "none")


@pytest.mark.parametrize("targets, ptx", [
    (["sm_80", "sm_90"], "highest"), (["sm_90a"], "none"), (["sm_75", "sm_120"], "all"), (["sm_86"], "none"),
])
def test_each_spelling_reads_back_as_the_same_code(targets, ptx):
    k = cuda_knobs(targets, ptx)
    assert parse_cmake_architectures(k.env["CMAKE_CUDA_ARCHITECTURES"]) == k.code
    assert parse_torch_arch_list(k.env["TORCH_CUDA_ARCH_LIST"]) == k.code


def test_spellings_that_cannot_say_it_exactly_say_so():
    k = cuda_knobs(["sm_100f"])
    assert k.env["TORCH_CUDA_ARCH_LIST"] == "10.0"  # torch 2.11 refuses 10.0f
    assert "compute_100f,code=sm_100f" in k.env["NVCC_APPEND_FLAGS"]
    assert any("family" in n for n in k.notes)
    k = cuda_knobs(["compute_80"])
    assert k.env["TORCH_CUDA_ARCH_LIST"] == "8.0+PTX" and k.env["CMAKE_CUDA_ARCHITECTURES"] == "80-virtual"
    assert any("PTX alone" in n for n in k.notes)


def test_user_nvcc_flags_are_kept_but_not_their_targets():
    user = {"NVCC_APPEND_FLAGS": "-lineinfo -gencode arch=compute_70,code=sm_70 -arch=sm_80 --threads 4"}
    k = cuda_knobs(["sm_90"], user_env=user)
    assert shlex.split(k.env["NVCC_APPEND_FLAGS"]) == ["-lineinfo", "--threads", "4", "-gencode=arch=compute_90,code=sm_90"]
    assert any("replaced" in n for n in k.notes)


needs_nvcc = pytest.mark.skipif(NVCC is None, reason="needs nvcc")


@needs_nvcc
@pytest.mark.parametrize("targets, ptx", [(["sm_80", "sm_90"], "none"), (["sm_90a"], "highest"), (["sm_100f"], "none")])
def test_nvcc_emits_exactly_the_knobs_targets(tmp_path, targets, ptx):
    """With no target on the command line, NVCC_APPEND_FLAGS alone decides the code."""
    (tmp_path / "k.cu").write_text(KERNEL)
    k = cuda_knobs(targets, ptx)
    env = dict(os.environ, NVCC_APPEND_FLAGS=k.env["NVCC_APPEND_FLAGS"])
    out = tmp_path / "k.so"
    subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "k.cu", "-o", str(out)], cwd=tmp_path,
                   env=env, check=True, capture_output=True, timeout=300)
    report = audit_paths([str(out)]).to_json()
    assert sorted(report["targets"]) == sorted(names(k.code))


@needs_nvcc
@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_skbuild_cuda_sample_builds_for_explicit_targets(tmp_path):
    """sample_projects/skbuild_cuda through scikit-build-core with CMAKE_ARGS from the knobs."""
    pytest.importorskip("scikit_build_core")
    from conftest import copy_sample, only_wheel, pip_wheel

    project = copy_sample("skbuild_cuda", tmp_path)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('build-backend = "rocm_build_backend"',
                                                       'build-backend = "scikit_build_core.build"'))
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
    from conftest import copy_sample, pip_wheel

    project = copy_sample("skbuild_cuda", tmp_path)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('build-backend = "rocm_build_backend"',
                                                       'build-backend = "scikit_build_core.build"'))
    env = {key: v for key, v in os.environ.items() if key not in ("CMAKE_ARGS", "CUDAARCHS", "NVCC_APPEND_FLAGS")}
    env["PATH"] = str(Path(NVCC).parent) + os.pathsep + env.get("PATH", "")
    proc = pip_wheel(project, tmp_path / "dist", env)
    assert proc.returncode != 0
    assert "CMAKE_CUDA_ARCHITECTURES is not set" in proc.stdout + proc.stderr
