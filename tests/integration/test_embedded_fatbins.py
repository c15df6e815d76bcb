"""Fatbins a library keeps in its data (``binary/embedded.py``), on binaries nvcc 13 builds here:
a library whose ``.nv_fatbin`` is a device-link stub (``-rdc=true``, no kernel) gets a data
section holding real fatbins (``nvcc -fatbin``), as cuFFT keeps its kernels in ``.ldata``. The
real cuFFT is in ``test_real_nvidia_libs.py``."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zipfile

import pytest

from rocm_build_backend.binary import members
from rocm_build_backend.binary.audit import audit_file, audit_wheel
from rocm_build_backend.binary.embedded import MAX_CANDIDATES

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
OBJCOPY = shutil.which("objcopy") or shutil.which("llvm-objcopy-19")
KERNEL = 'extern "C" __global__ void inc(int *x) { x[threadIdx.x] += 1; }\n'
STUB = "__device__ int twice(int x) { return 2 * x; }\nint host_only() { return 1; }\n"
pytestmark = [pytest.mark.skipif(NVCC is None or OBJCOPY is None, reason="needs nvcc and objcopy")]


def _nvcc(tmp_path, *args):
    subprocess.run([NVCC, *args], cwd=tmp_path, check=True, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    d = tmp_path_factory.mktemp("embedded")
    (d / "stub.cu").write_text(STUB)
    (d / "k.cu").write_text(KERNEL)
    _nvcc(
        d,
        "-shared",
        "-Xcompiler",
        "-fPIC",
        "-rdc=true",
        "-gencode=arch=compute_90,code=sm_90",
        "stub.cu",
        "-o",
        "stub.so",
    )
    _nvcc(d, "-fatbin", "-gencode=arch=compute_80,code=sm_80", "k.cu", "-o", "k80.fatbin")
    _nvcc(d, "-fatbin", "-gencode=arch=compute_100,code=sm_100", "k.cu", "-o", "k100.fatbin")
    return d


def _with_data(parts, tmp_path, blob: bytes, section=".lrodata"):
    out = tmp_path / "lib.so"
    (tmp_path / "blob.bin").write_bytes(blob)
    subprocess.run(
        [
            OBJCOPY,
            "--add-section",
            f"{section}={tmp_path / 'blob.bin'}",
            "--set-section-alignment",
            f"{section}=8",
            str(parts / "stub.so"),
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    return out


def _pad(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 8)


def test_stub_only_library_is_searched(parts, tmp_path):
    plain = audit_file(parts / "stub.so")
    assert plain.modules == [] and plain.targets == ["sm_90"]  # the stub: nothing to launch
    blob = b"\x11" * 24 + _pad((parts / "k80.fatbin").read_bytes()) * 3 + _pad((parts / "k100.fatbin").read_bytes())
    lib = audit_file(_with_data(parts, tmp_path, blob))
    assert dict(lib.modules) == {("sm_80",): 3, ("sm_100",): 1}
    assert lib.targets == ["sm_80", "sm_90", "sm_100"] and not lib.problems
    assert all("loaded by the library itself" in c.note for c in lib.containers if c.where == ".lrodata")


def test_a_library_with_kernels_is_not_searched(parts, tmp_path):
    _nvcc(
        tmp_path,
        "-shared",
        "-Xcompiler",
        "-fPIC",
        "-gencode=arch=compute_90,code=sm_90",
        str(parts / "k.cu"),
        "-o",
        "real.so",
    )
    out = tmp_path / "real+data.so"
    (tmp_path / "blob.bin").write_bytes(_pad((parts / "k80.fatbin").read_bytes()))
    subprocess.run(
        [OBJCOPY, "--add-section", f".lrodata={tmp_path / 'blob.bin'}", str(tmp_path / "real.so"), str(out)],
        check=True,
        capture_output=True,
    )
    assert audit_file(out).targets == ["sm_90"]


def test_hostile_data_costs_bounded_work(parts, tmp_path):
    """Empty fatbin headers every 16 bytes: each is a candidate; the search stops at the cap."""
    empty = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 0)
    lib = audit_file(_with_data(parts, tmp_path, empty * (2 * MAX_CANDIDATES)))
    assert any("too many entries" in p for p in lib.problems), lib.problems
    assert not lib.readable


def _as_wheel(tmp_path, lib) -> "os.PathLike[str]":
    wheel = tmp_path / "emb-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(lib, "emb/lib.so")
    return wheel


def test_in_a_wheel_the_data_is_not_read_again(parts, tmp_path, monkeypatch):
    """A deflated member: the first pass remembers where the fatbin magics are, so the search
    of the data reads only there; the answer is the file's, to the byte."""
    filler = bytes(range(256)) * (16 << 10)  # 4 MiB without a magic, then the fatbins
    blob = filler + _pad((parts / "k80.fatbin").read_bytes()) * 3 + _pad((parts / "k100.fatbin").read_bytes())
    lib = _with_data(parts, tmp_path, blob)
    read = []
    real = members.InflateSource.read
    monkeypatch.setattr(members.InflateSource, "read", lambda self, o, n: read.append(n) or real(self, o, n))
    (member,) = audit_wheel(_as_wheel(tmp_path, lib)).files
    assert member.to_json() | {"path": "", "archive": ""} == audit_file(lib).to_json() | {"path": "", "archive": ""}
    assert dict(member.modules) == {("sm_80",): 3, ("sm_100",): 1}
    assert sum(read) < len(filler) // 4


def test_hostile_data_in_a_wheel_costs_bounded_work(parts, tmp_path):
    empty = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 0)
    lib = _with_data(parts, tmp_path, empty * (2 * MAX_CANDIDATES))
    (member,) = audit_wheel(_as_wheel(tmp_path, lib)).files
    assert member.problems == audit_file(lib).problems
    assert any("too many entries" in p for p in member.problems)
