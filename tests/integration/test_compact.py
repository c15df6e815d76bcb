"""Thinned libraries compacted (``binary/compact.py``, ``binary/layout.py``): the freed bytes cut
out of the file, every address unchanged, and the library still loads.

The libraries are built here by clang-19 (HIP, no ROCm) and nvcc 13 (``-cudart none``) from
``tests/data/loadable``: two translation units each (two containers a library registers, one
of which moves), kernels for several GPUs, and host code that must still run after the layout
changed (a table, a global, a C++ exception: ``.rodata``, ``.data``, ``.eh_frame`` and
``.gcc_except_table`` all lie after the device code). Each is loaded by the real dynamic loader
(``dlopen`` through ctypes, in a child process) against a stand-in for the GPU runtime that writes
every container the library registers, as it lies in memory, to a file: what the loaded library
hands the HIP or CUDA runtime must be the kept code, byte for byte."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_build_backend.binary import compact, layout
from rocm_build_backend.binary.audit import audit_bytes
from rocm_build_backend.binary.rewrite import thin_buffer
from rocm_build_backend.binary.rewrite_plan import Selector
from rocm_build_backend.gpu.targets import parse_targets
from helpers import DATA

SRC = DATA / "loadable"
CLANG = shutil.which("clang-19")
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
CC = shutil.which("cc") or shutil.which("gcc")
TOOLS = {k: shutil.which(f"{k}-19") for k in ("clang-offload-bundler", "llvm-readelf", "llvm-objdump")}
HIP = ["-x", "hip", "-nogpuinc", "-nogpulib", "-fPIC", "-O2", "-c"]
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")

LOAD = """
import ctypes, glob, json, os, sys
lib = ctypes.CDLL(os.path.abspath(sys.argv[1]))
print(json.dumps({"checks": [lib.host_check_a(5), lib.host_check_b(7), lib.host_check_a(0)],
                  "registered": sorted(glob.glob(os.path.join(os.environ["STUB_DIR"], "reg-*")))}))
"""


def _run(*argv, cwd):
    subprocess.run([str(a) for a in argv], cwd=cwd, check=True, capture_output=True, timeout=600)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("loadable")
    _run(CC, "-shared", "-fPIC", "-O1", SRC / "runtime_stub.c", "-o", "libstubrt.so", cwd=d)
    return d


def _hip_lib(built, name, *extra):
    if CLANG is None:
        pytest.skip("needs clang-19")
    out = built / name
    if not out.exists():
        _run(
            CLANG,
            *HIP,
            *extra,
            *[f"--offload-arch={t}" for t in ("gfx90a", "gfx942", "gfx1100", "gfx1201")],
            SRC / "a.hip",
            "-o",
            f"{name}.a.o",
            cwd=built,
        )
        _run(
            CLANG,
            *HIP,
            *extra,
            "--offload-arch=gfx942",
            "--offload-arch=gfx1201",
            SRC / "b.hip",
            "-o",
            f"{name}.b.o",
            cwd=built,
        )
        _run(
            CLANG,
            "-shared",
            f"{name}.a.o",
            f"{name}.b.o",
            "-L.",
            "-lstubrt",
            "-lstdc++",
            "-Wl,-rpath,$ORIGIN",
            "-o",
            name,
            cwd=built,
        )
    return out


@pytest.fixture(scope="module")
def hip_lib(built):
    return _hip_lib(built, "libhip.so")


@pytest.fixture(scope="module")
def ccob_lib(built):
    return _hip_lib(built, "libccob.so", "--offload-compress")


@pytest.fixture(scope="module")
def cuda_lib(built):
    if NVCC is None:
        pytest.skip("needs nvcc")
    out = built / "libcuda.so"
    gen = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in (75, 80, 90)]
    _run(
        NVCC,
        "-cudart",
        "none",
        "-Xcompiler",
        "-fPIC",
        "-O2",
        *gen,
        "-gencode=arch=compute_90,code=compute_90",
        "-c",
        SRC / "a.cu",
        "-o",
        "ca.o",
        cwd=built,
    )
    _run(NVCC, "-cudart", "none", "-Xcompiler", "-fPIC", "-O2", *gen[1:], "-c", SRC / "b.cu", "-o", "cb.o", cwd=built)
    _run(
        NVCC,
        "-cudart",
        "none",
        "-shared",
        "ca.o",
        "cb.o",
        "-L.",
        "-lstubrt",
        "-Xlinker",
        "-rpath=$ORIGIN",
        "-o",
        "libcuda.so",
        cwd=built,
    )
    return out


def _load(lib: Path, tmp: Path) -> tuple[list[int], list[bytes]]:
    """Load ``lib`` with the real dynamic loader; (host checks, the containers it registered)."""
    regs = tmp / f"reg-{lib.name}-{len(list(tmp.glob('reg-*')))}"
    regs.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", LOAD, lib],
        env={**os.environ, "STUB_DIR": str(regs)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    return got["checks"], [Path(p).read_bytes() for p in got["registered"]]


def _thin(lib: Path, target: str, tmp: Path, *, compact_it: bool = True):
    """(the thinned library in place, the result, the compacted file written next to the stub)."""
    buf = bytearray(lib.read_bytes())
    in_place = bytearray(buf)
    res = thin_buffer(in_place, Selector(parse_targets(target)), lib.name, compact=False)
    assert res.action == "thinned" and res.layout == "in place"
    res = thin_buffer(buf, Selector(parse_targets(target)), lib.name, compact=compact_it)
    out = tmp / lib.name
    out.write_bytes(res.data if res.data is not None else buf)
    shutil.copy(lib.parent / "libstubrt.so", tmp / "libstubrt.so")
    return in_place, res, out


def _same_audit(a: bytes, b: bytes) -> None:
    ra, rb = audit_bytes(a, "x"), audit_bytes(b, "x")
    assert (ra.targets, ra.complete, ra.modules, ra.problems) == (rb.targets, rb.complete, rb.modules, rb.problems)


def _llvm_clean(path: Path) -> None:
    if TOOLS["llvm-readelf"]:
        out = subprocess.run([TOOLS["llvm-readelf"], "-a", path], capture_output=True, text=True)
        assert out.returncode == 0 and not out.stderr, out.stderr
    if TOOLS["llvm-objdump"]:
        assert subprocess.run([TOOLS["llvm-objdump"], "--offloading", path], capture_output=True).returncode == 0


def _kept_code_objects(bundle_or_ccob: bytes, tmp: Path, target: str) -> tuple[list[str], bytes]:
    """LLVM's own bundler on one registered container: its entries, and the target's code object."""
    (tmp / "c.bin").write_bytes(bundle_or_ccob)
    listed = subprocess.run(
        [TOOLS["clang-offload-bundler"], "--list", "--type=o", "--input=c.bin"],
        cwd=tmp,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    entry = next(e for e in listed if e.endswith(target))
    subprocess.run(
        [
            TOOLS["clang-offload-bundler"],
            "--unbundle",
            "--type=o",
            "--input=c.bin",
            f"--targets={entry}",
            "--output=c.co",
        ],
        cwd=tmp,
        check=True,
        capture_output=True,
    )
    return sorted(listed), (tmp / "c.co").read_bytes()


@pytest.mark.parametrize("which, at_most", [("hip_lib", 0.6), ("ccob_lib", 0.9)])  # zstd code is small already
def test_a_compacted_hip_library_loads_and_registers_the_kept_code(request, which, at_most, tmp_path):
    lib = request.getfixturevalue(which)
    checks, fat = _load(lib, tmp_path)
    in_place, res, out = _thin(lib, "gfx942", tmp_path)
    assert res.layout == "compacted", res.layout_reason
    assert out.stat().st_size < lib.stat().st_size * at_most
    _same_audit(bytes(in_place), out.read_bytes())
    _llvm_clean(out)
    got_checks, thin = _load(out, tmp_path)
    assert got_checks == checks == [32, 35, -1]  # .rodata, .data and the C++ exception still work
    assert len(thin) == len(fat) == 2
    if TOOLS["clang-offload-bundler"]:
        for before, after in zip(fat, thin):
            entries, code = _kept_code_objects(after, tmp_path, "gfx942")
            assert entries == ["hipv4-amdgcn-amd-amdhsa--gfx942", "host-x86_64-unknown-linux--"]
            assert code == _kept_code_objects(before, tmp_path, "gfx942")[1]  # byte-identical


def test_a_compacted_cuda_library_loads_and_registers_the_kept_fatbins(cuda_lib, tmp_path):
    checks, fat = _load(cuda_lib, tmp_path)
    in_place, res, out = _thin(cuda_lib, "sm_90", tmp_path)
    assert res.layout == "compacted", res.layout_reason
    assert out.stat().st_size < cuda_lib.stat().st_size * 0.7
    _same_audit(bytes(in_place), out.read_bytes())
    _llvm_clean(out)
    got_checks, thin = _load(out, tmp_path)
    assert got_checks == checks
    # each registered container is the in-place rewrite's container, byte for byte
    containers = [c for c in audit_bytes(bytes(in_place), "x").containers if c.where == ".nv_fatbin"]
    sec_off = next(s for s in _sections(bytes(in_place)) if s[0] == ".nv_fatbin")[1]
    assert len(thin) == len(fat) == len(containers) == 2
    for c, registered in zip(containers, thin):
        start = sec_off + c.offset
        assert bytes(in_place[start : start + len(registered)]) == registered
        assert audit_bytes(registered, "r").targets in (["sm_90"], ["sm_90", "compute_90"])


def _sections(data: bytes) -> list[tuple[str, int, int]]:
    from rocm_build_backend.binary import elf

    src = elf.BytesSource(data)
    return [(s.name, s.offset, s.size) for s in elf.read_sections(src, elf.read_header(src)).sections]


def test_an_object_file_is_cut_then_links_and_loads(hip_lib, built, tmp_path):
    """An object (no program headers): the section's free tail and the file shrink; the linker
    reads the cut object and the library it makes loads, with only the kept code."""
    obj = built / "libhip.so.a.o"
    buf = bytearray(obj.read_bytes())
    res = thin_buffer(buf, Selector(parse_targets("gfx942")), obj.name)
    assert res.layout == "compacted", res.layout_reason
    (tmp_path / "a.o").write_bytes(res.data)
    assert len(res.data) < obj.stat().st_size * 0.6
    shutil.copy(built / "libstubrt.so", tmp_path)
    shutil.copy(built / "libhip.so.b.o", tmp_path / "b.o")
    _run(
        CLANG,
        "-shared",
        "a.o",
        "b.o",
        "-L.",
        "-lstubrt",
        "-lstdc++",
        "-Wl,-rpath,$ORIGIN",
        "-o",
        "libre.so",
        cwd=tmp_path,
    )
    checks, regs = _load(tmp_path / "libre.so", tmp_path)
    assert checks == [32, 35, -1]
    assert audit_bytes(regs[0], "r").targets == ["gfx942"]


def test_keep_layout_rewrites_in_place(hip_lib, tmp_path):
    in_place, res, out = _thin(hip_lib, "gfx942", tmp_path, compact_it=False)
    assert res.layout == "in place" and res.data is None
    assert out.stat().st_size == hip_lib.stat().st_size


def test_a_pointer_into_the_middle_of_device_code_keeps_the_layout(cuda_lib):
    """A relocation the loader applies that points inside a container (not at its start): the
    container cannot move, so nothing moves and nothing is cut."""
    buf = bytearray(cuda_lib.read_bytes())
    thin_buffer(buf, Selector(parse_targets("sm_90")), "x", compact=False)
    sections = {name: (off, size) for name, off, size in _sections(bytes(buf))}
    rela_off, rela_size = sections[".rela.dyn"]
    from rocm_build_backend.binary import elf

    nv = next(
        s
        for s in elf.read_sections(elf.BytesSource(bytes(buf)), elf.read_header(elf.BytesSource(bytes(buf)))).sections
        if s.name == ".nv_fatbin"
    )
    for i in range(rela_size // 24):
        at = rela_off + i * 24
        _o, info, addend = struct.unpack_from("<QQq", buf, at)
        if info & 0xFFFFFFFF == 8 and nv.addr <= addend < nv.addr + nv.size and addend != nv.addr:
            struct.pack_into("<q", buf, at + 16, addend + 16)
            break
    else:
        pytest.fail("no relocation points at a moving container")
    data, why = compact.compacted(buf)
    assert data is None and "middle of device code" in why


def test_non_zero_bytes_are_never_cut(hip_lib):
    from rocm_build_backend.binary import elf

    buf = bytearray(hip_lib.read_bytes())
    src = elf.BytesSource(bytes(buf))
    sec = next(s for s in elf.read_sections(src, elf.read_header(src)).sections if s.name == ".hip_fatbin")
    with pytest.raises(layout.CannotCompact, match="not zero"):
        layout.shrink_sections(buf, {sec.index: 4096})


def test_a_bundle_larger_than_one_read_is_packed_whole(hip_lib, tmp_path, monkeypatch):
    """Packing reads a bundle from the file's bytes in memory, not through a source whose reads
    are capped (real code objects reach tens of MiB): lowered here below the bundle's size."""
    from rocm_build_backend.binary import elf

    monkeypatch.setattr(elf, "MAX_READ", 128 << 10)
    in_place, res, out = _thin(hip_lib, "gfx942", tmp_path)
    assert res.layout == "compacted", res.layout_reason
    _same_audit(bytes(in_place), out.read_bytes())
