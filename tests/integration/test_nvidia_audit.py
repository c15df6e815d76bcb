"""The audit on nvcc 13 binaries as the H200 run found them (no GPU needed, nvcc needed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from rocm_build_backend.binary.audit import audit_paths

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
KERNEL = 'extern "C" __global__ void inc(int *x) { x[threadIdx.x] += 1; }\n'
pytestmark = pytest.mark.skipif(NVCC is None, reason="needs nvcc")


def build(tmp_path, *args):
    (tmp_path / "k.cu").write_text(KERNEL)
    out = tmp_path / "k.so"
    subprocess.run(
        [NVCC, "-shared", "-Xcompiler", "-fPIC", *args, "k.cu", "-o", str(out)],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


def test_zstd_ptx_counts_without_a_zstd_decoder(tmp_path, monkeypatch):
    so = build(tmp_path, "-gencode=arch=compute_80,code=[sm_80,compute_80]", "--compress-mode=size")
    for name, module in list(sys.modules.items()):  # a machine without any zstd decoder
        if name.startswith("rocm_build_backend.binary") and hasattr(module, "_zstd_backend"):
            monkeypatch.setattr(module, "_zstd_backend", lambda: None)
    report = audit_paths([str(so)]).to_json()["files"][0]
    assert "compute_80" in report["targets"]
    assert "compute_80" in report["complete"]
    # the device-link stub (a zstd cubin, sm_80 only) cannot be told from code: "cannot tell"
    stub, code = report["containers"]
    assert stub["targets"] == ["sm_80"] and stub.get("read") is False and "zstd" in stub["note"]
    assert code["targets"] == ["sm_80", "compute_80"] and "read" not in code


def test_zstd_stub_is_told_with_the_default_decoder(tmp_path):
    """The decoder every install has (Python 3.14's compression.zstd, or backports.zstd, a
    dependency before 3.14) reads the compressed device-link stub: it is a stub, and the file
    is read completely."""
    from rocm_build_backend.binary.decompression import zstd_module

    assert zstd_module() is not None
    so = build(tmp_path, "-gencode=arch=compute_80,code=[sm_80,compute_80]", "--compress-mode=size")
    report = audit_paths([str(so)]).to_json()["files"][0]
    assert report["complete"] == ["sm_80", "compute_80"]
    stub, code = report["containers"]
    assert stub.get("kernels") is False and "read" not in stub and "read" not in code
