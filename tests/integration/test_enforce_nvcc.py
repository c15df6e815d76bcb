"""Enforcement's programs as written, with the real nvcc: every path to nvcc leads to the pinned one,
which cuts compiles to the targets (read back with the audit) and records them; its folder is
written once per content and old ones go."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from rocm_build_backend.binary.audit import audit_paths
from rocm_build_backend.builder.enforce import cache_dir, install, read_record
from rocm_build_backend.gpu.nvidia import enforce as nv_enforce

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
has_nvcc = pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="needs nvcc")


@pytest.fixture
def pinned(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for var in ("CUDA_HOME", "CUDA_PATH", "PYTORCH_NVCC", "CUDACXX", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS"):
        env.pop(var, None)
    record = tmp_path / "record.jsonl"
    variables = install("nvidia", ["sm_90"], env, record)
    return {**env, **variables}, record


def _audit(path: Path) -> list[str]:
    return sorted({t for f in audit_paths([path]).files for t in f.targets})


@has_nvcc
def test_every_path_to_nvcc_leads_to_the_pinned_one(pinned):
    env, _ = pinned
    view = Path(env["CUDA_HOME"])
    ours = str(view / "bin" / "nvcc")
    assert env["PYTORCH_NVCC"] == env["CUDACXX"] == ours and env["CUDA_PATH"] == env["CUDA_HOME"]
    assert shutil.which("nvcc", path=env["PATH"]) == ours
    # headers and libraries resolve through the view to the real toolkit
    assert (view / "include" / "cuda_runtime.h").is_file()
    assert (view / "bin" / "ptxas").exists() and any((view / d).exists() for d in ("lib64", "lib"))


@has_nvcc
def test_the_pinned_nvcc_cuts_compiles_and_records_them(pinned, tmp_path):
    env, record = pinned
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n")
    env["NVCC_APPEND_FLAGS"] = "-gencode=arch=compute_90,code=sm_90"  # the plan's copy: must not undo "whole"
    runs = {
        "cut": [
            "-gencode",
            "arch=compute_80,code=sm_80",
            "-gencode=arch=compute_90,code=sm_90",
            "-gencode=arch=compute_120,code=sm_120",
        ],
        "whole": ["-gencode", "arch=compute_80,code=sm_80"],
        "none": [],
    }
    for name, flags in runs.items():
        out = tmp_path / f"{name}.o"
        subprocess.run(
            [env["CUDACXX"], "-c", str(src), "-o", str(out), *flags], env=env, check=True, capture_output=True
        )
    assert _audit(tmp_path / "cut.o") == ["sm_90"]
    assert _audit(tmp_path / "whole.o") == ["sm_80"]
    assert _audit(tmp_path / "none.o") == ["sm_90"]
    version = subprocess.run([env["CUDACXX"], "--version"], env=env, capture_output=True, text=True, check=True)
    assert "release" in version.stdout
    done = read_record(record)
    assert (done.compiles, done.rewritten, done.added, done.whole_count) == (3, 1, 1, 1)
    assert done.dropped == {"sm_80", "sm_120"} and done.whole == [(["k.cu"], ["sm_80"])]
    assert any("left whole" in line and "k.cu for sm_80" in line for line in done.lines(["sm_90"]))


@has_nvcc
def test_a_view_of_ours_stands_for_its_toolkit(pinned):
    env, _ = pinned
    root = nv_enforce.toolkit_root({"CUDA_HOME": env["CUDA_HOME"], "PATH": os.defpath})
    assert root is not None and "rocm-build-backend" not in str(root)


@has_nvcc
def test_the_folder_is_written_once_and_old_ones_go(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("CUDA_HOME", None)
    base = cache_dir(env)
    first = install("nvidia", ["sm_90"], env, tmp_path / "r")
    again = install("nvidia", ["sm_90"], env, tmp_path / "r")
    assert first["CUDACXX"] == again["CUDACXX"]
    other = install("nvidia", ["sm_80"], env, tmp_path / "r")
    assert other["CUDACXX"] != first["CUDACXX"]
    stale = base / ".tmp-killed"  # a write killed two days ago
    stale.mkdir()
    old = time.time() - 2 * 86400
    os.utime(stale, (old, old))
    unused = Path(other["CUDA_HOME"]).parent
    os.utime(unused, (time.time() - 31 * 86400,) * 2)
    install("nvidia", ["sm_90"], env, tmp_path / "r")
    assert not stale.exists() and not unused.exists() and Path(first["CUDA_HOME"]).is_dir()


@has_nvcc
def test_options_files_are_expanded_and_unknown_target_options_refused(pinned, tmp_path):
    """Targets inside an -optf list beside an includes file, and two -arch options: each cut to sm_90
    (before: run as given, nothing recorded); an unknown option naming a target fails."""
    env, record = pinned
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "scale.h").write_text("#define SCALE 2.0f\n")
    src = tmp_path / "k.cu"
    src.write_text('#include "scale.h"\n__global__ void k(float* x) { x[threadIdx.x] *= SCALE; }\n')
    (tmp_path / "includes_CUDA.rsp").write_text(f'-I"{tmp_path / "inc"}"\n')
    (tmp_path / "a.optf").write_text("-gencode arch=compute_80,code=sm_80\n")
    (tmp_path / "b.optf").write_text("-gencode=arch=compute_90,code=[sm_90,compute_90]\n")
    runs = {  # (the includes file with the targets on the command line: the CMake build in test_enforce_builds)
        "optf": ["--options-file", "includes_CUDA.rsp", "-optf", "a.optf,b.optf"],
        "arch": ["-optf=includes_CUDA.rsp", "-arch=sm_80", "-arch=sm_90"],
    }
    for name, flags in runs.items():
        subprocess.run(
            [env["CUDACXX"], "-c", str(src), "-o", str(tmp_path / f"{name}.o"), *flags],
            env=env,
            check=True,
            capture_output=True,
            cwd=tmp_path,
        )
        assert _audit(tmp_path / f"{name}.o") == ["sm_90"], name
    done = read_record(record)
    assert (done.compiles, done.rewritten) == (2, 2) and done.dropped == {"sm_80", "compute_90"}
    bad = subprocess.run(
        [
            env["CUDACXX"],
            "-c",
            str(src),
            "-o",
            str(tmp_path / "bad.o"),
            "-optf",
            "includes_CUDA.rsp",
            "-forward-unknown-to-host-compiler",
            "--gpu-arch-list=80",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and not (tmp_path / "bad.o").exists()
    assert "unknown option '--gpu-arch-list=80'" in bad.stderr and "enforce = false" in bad.stderr
    assert read_record(record).refused == ["--gpu-arch-list=80"]
