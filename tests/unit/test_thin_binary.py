"""Thinning single binaries: the real fixtures in tests/data/binaries, read back by our audit
and, where installed, by LLVM 19's own tools (clang-offload-bundler, llvm-objdump,
llvm-readelf): only the kept targets and the host are listed, kept code objects are
byte-identical, host bytes and the section/symbol layout are unchanged."""

from __future__ import annotations

import shutil
import struct
import subprocess

import pytest

from rocm_build_backend.binary import elf
from rocm_build_backend.binary.audit import audit_bytes
from rocm_build_backend.binary.rewrite import plan_file, thin_buffer
from rocm_build_backend.binary.rewrite_plan import Selector
from rocm_build_backend.errors import FormatError
from rocm_build_backend.gpu.targets import parse_targets
from helpers import TESTS

DATA = TESTS / "data" / "binaries"
BUNDLER = shutil.which("clang-offload-bundler-19")
OBJCOPY = shutil.which("llvm-objcopy-19")
OBJDUMP = shutil.which("llvm-objdump-19")
READELF = shutil.which("llvm-readelf-19")


def thin(name: str, targets: str):
    """The in-place rewrite (compaction, which then cuts the file, is tested in tests/integration/test_compact.py)."""
    buf = bytearray((DATA / name).read_bytes())
    result = thin_buffer(buf, Selector(parse_targets(targets)), name, compact=False)
    if result.new_size is not None:
        del buf[result.new_size :]
    return result, bytes(buf)


def section(data: bytes, name: str) -> tuple[int, int]:
    src = elf.BytesSource(data)
    table = elf.read_sections(src, elf.read_header(src), lambda n, t: n == name)
    return table.sections[0].offset, table.sections[0].size


@pytest.mark.parametrize(
    "name, target, kept, dropped",
    [
        ("hip_gfx90a_gfx942_cov5.so", "gfx942", ["gfx942"], ["gfx90a"]),
        ("hip_gfx90a_gfx942_cov5.so", "gfx90a", ["gfx90a"], ["gfx942"]),
        (
            "hip_features_cov4.so",
            "gfx90a",
            ["gfx90a:xnack+", "gfx90a:xnack-"],
            ["gfx906:sramecc+:xnack-", "gfx908:xnack-"],
        ),
        (
            "hip_features_cov4.so",
            "gfx90a:xnack-",
            ["gfx90a:xnack-"],
            ["gfx906:sramecc+:xnack-", "gfx908:xnack-", "gfx90a:xnack+"],
        ),
        ("hip_two_tu_cov4.so", "gfx90a", ["gfx90a", "gfx90a"], ["gfx908"]),
        ("hip_ccob_v2_gfx90a_gfx942_cov5.so", "gfx942", ["gfx942"], ["gfx90a"]),
        ("hip_two_tu_ccob_v2_cov5.so", "gfx90a", ["gfx90a"], ["gfx942", "gfx942"]),
        ("hip_newdriver_rdc_gfx90a_gfx942.so", "gfx90a", ["gfx90a"], ["gfx942"]),
        ("hip_newdriver_rdc_gfx90a_gfx942.o", "gfx942", ["gfx942"], ["gfx90a"]),
        ("synthetic_ccob_v1_zlib.bin", "gfx90a", ["gfx90a"], ["gfx942"]),
        ("synthetic_ccob_v1_zstd.bin", "gfx942", ["gfx942"], ["gfx90a"]),
        ("synthetic_ccob_v2_zlib.bin", "gfx942", ["gfx942"], ["gfx90a"]),
        ("synthetic_ccob_v3_zstd.bin", "gfx90a", ["gfx90a"], ["gfx942"]),
        ("hip_genco_gfx908_gfx90a_bundle.hsaco", "gfx90a", ["gfx90a"], ["gfx908"]),
        ("cuda_sm75_80_90_ptx90.so", "sm_90", ["compute_90", "sm_90"], ["sm_75", "sm_80"]),
        ("cuda_sm75_80_90_ptx90.so", "sm_80", ["sm_80"], ["sm_75", "compute_90", "sm_90"]),
        ("cuda_compress_speed_sm80_ptx90.so", "sm_90", ["compute_90"], ["sm_80"]),
        ("cuda_compress_size_sm80_ptx90.so", "sm_86", ["sm_80"], ["compute_90"]),
        (
            "cuda_sm90a_100a_100f_103_120_ptx120f.so",
            "sm_90",
            ["sm_90a"],
            ["sm_100a", "sm_100f", "sm_103", "sm_120", "compute_120f"],
        ),
        ("cuda_rdc_sm80_sm90.so", "sm_80", ["sm_80", "sm_80"], ["sm_90", "sm_90"]),
        ("cuda_two_tu_dlink_stub.so", "sm_80", ["sm_80", "compute_80", "sm_80"], ["sm_75", "sm_90"]),
        ("cuda_sm80_sm100_ptx100.fatbin", "sm_80", ["sm_80"], ["compute_100", "sm_100"]),
    ],
)
def test_thinned_file_holds_only_the_kept_targets(name, target, kept, dropped):
    result, data = thin(name, target)
    assert result.action == "thinned", result.reason
    assert result.kept == kept and result.dropped == dropped
    report = audit_bytes(data, name)
    assert not [p for p in report.problems if "holds no entries" not in p]
    assert sorted(set(t for c in report.containers for t in c.targets)) == sorted(set(kept))


@pytest.mark.parametrize(
    "name, target, action",
    [
        ("amdgpu_gfx942_cov5.hsaco", "gfx942", "unchanged"),
        ("amdgpu_gfx90a_xnack+_cov4.co", "gfx942", "dropped"),
        ("amdgpu_gfx90a_xnack+_cov4.co", "gfx90a:xnack-", "dropped"),
        ("amdgpu_gfx90a_xnack+_cov4.co", "gfx90a", "unchanged"),
        ("cubin_abi7_sm90a_cuda12.4.cubin", "sm_90", "unchanged"),
        ("cubin_abi8_sm80_cuda13.0.cubin", "sm_90", "dropped"),
        ("ccob_v2_zstd_gfx90a_gfx942.bin", "sm_90", "dropped"),
        ("hip_gfx90a_gfx942_cov5.so", "gfx90a:xnack+", "thinned"),
        ("hip_newdriver_rdc_gfx90a_gfx942.o", "gfx1100", "kept-whole"),
    ],
)
def test_whole_files_are_kept_or_dropped_whole(name, target, action):
    data = (DATA / name).read_bytes()
    result, out = thin(name, target)
    assert result.action == action
    if action in ("unchanged", "kept-whole"):
        assert out == data


@pytest.mark.parametrize(
    "name",
    [
        "bad_hip_bundle_count.so",
        "bad_hip_entry_offset.so",
        "bad_ccob_total_size.bin",
        "bad_ccob_uncompressed_size.bin",
        "bad_cuda_fat_size.so",
        "bad_cuda_zero_entry.so",
        "trunc_hip_two_tu_cov4.so",
        "trunc_ccob_v2_zstd_gfx90a_gfx942.bin",
        "trunc_cuda_sm80_sm100_ptx100.fatbin",
        "trunc_amdgpu_gfx942_cov5.hsaco",
        "trunc_cubin_abi8_sm80_cuda13.0.cubin",
        "trunc_hip_genco_gfx908_gfx90a_bundle.hsaco",
    ],
)
def test_damaged_binaries_raise_and_stay_untouched(name):
    data = bytearray((DATA / name).read_bytes())
    before = bytes(data)
    with pytest.raises(FormatError):
        thin_buffer(data, Selector(parse_targets("gfx942")), name)
    assert bytes(data) == before


def test_host_bytes_and_elf_layout_are_unchanged():
    for name, target in [
        ("hip_two_tu_cov4.so", "gfx90a"),
        ("hip_two_tu_ccob_v2_cov5.so", "gfx942"),
        ("cuda_two_tu_dlink_stub.so", "sm_90"),
    ]:
        old = (DATA / name).read_bytes()
        _r, new = thin(name, target)
        assert len(new) == len(old)
        sec = ".hip_fatbin" if name.startswith("hip") else ".nv_fatbin"
        off, size = section(old, sec)
        assert new[:off] == old[:off] and new[off + size :] == old[off + size :]


def test_a_container_that_keeps_nothing_keeps_its_place():
    _r, new = thin("cuda_two_tu_dlink_stub.so", "sm_90")
    off, _size = section(new, ".nv_fatbin")
    # the sm_75 device-link stub container is emptied: header kept, size 0
    assert new[off : off + 4] == b"\x50\xed\x55\xba" and struct.unpack_from("<Q", new, off + 8)[0] == 0
    # the next container is still where the registration record points
    assert new[off + 0x600 : off + 0x604] == b"\x50\xed\x55\xba"


def test_a_ccob_is_rewritten_with_its_own_version_and_codec():
    for name, version, method in [
        ("synthetic_ccob_v1_zlib.bin", 1, 0),
        ("synthetic_ccob_v2_zlib.bin", 2, 0),
        ("synthetic_ccob_v3_zstd.bin", 3, 1),
        ("ccob_v2_zstd_gfx90a_gfx942.bin", 2, 1),
    ]:
        _r, new = thin(name, "gfx942")
        assert new[:4] == b"CCOB" and struct.unpack_from("<HH", new, 4) == (version, method)
        assert len(new) < len((DATA / name).read_bytes())  # a standalone file is cut, not padded


def test_planning_does_not_change_the_buffer():
    data = bytearray((DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes())
    plan_file(data, Selector(parse_targets("gfx942")))
    assert bytes(data) == (DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes()


# ------------------------------------------------------------------ LLVM's own tools

needs_llvm = pytest.mark.skipif(not (BUNDLER and OBJCOPY and OBJDUMP and READELF), reason="LLVM 19 tools not installed")


def _bundler(args, tmp_path):
    return subprocess.run([BUNDLER, "--type=o", *args], capture_output=True, text=True, cwd=tmp_path)


def _ccob_slices(sec: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(sec):
        if sec[pos : pos + 4] != b"CCOB":
            pos += 1
            continue
        total = struct.unpack_from("<I", sec, pos + 8)[0]
        out.append(sec[pos : pos + total])
        pos += total
    return out


@needs_llvm
@pytest.mark.parametrize(
    "name, target, ids",
    [
        ("hip_gfx90a_gfx942_cov5.so", "gfx942", ["hipv4-amdgcn-amd-amdhsa--gfx942", "host-x86_64-unknown-linux--"]),
        (
            "hip_features_cov4.so",
            "gfx90a",
            [
                "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
                "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
                "host-x86_64-unknown-linux",
            ],
        ),
        (
            "hip_ccob_v2_gfx90a_gfx942_cov5.so",
            "gfx90a",
            ["hipv4-amdgcn-amd-amdhsa--gfx90a", "host-x86_64-unknown-linux--"],
        ),
        (
            "hip_newdriver_rdc_gfx90a_gfx942.so",
            "gfx942",
            ["hip-amdgcn-amd-amdhsa--gfx942", "host-x86_64-unknown-linux--"],
        ),
    ],
)
def test_llvm_bundler_lists_only_the_kept_targets_and_unbundles_them_unchanged(tmp_path, name, target, ids):
    (tmp_path / "old.so").write_bytes((DATA / name).read_bytes())
    _r, new = thin(name, target)
    (tmp_path / "new.so").write_bytes(new)
    for which in ("old", "new"):
        subprocess.run(
            [OBJCOPY, f"--dump-section=.hip_fatbin={which}.fb", f"{which}.so", "/dev/null"], check=True, cwd=tmp_path
        )
    listed = _bundler(["--list", "--input=new.fb"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert sorted(listed.stdout.split()) == sorted(ids)
    for ident in ids[:-1]:
        for which in ("old", "new"):
            r = _bundler(["--unbundle", f"--input={which}.fb", f"--targets={ident}", f"--output={which}.co"], tmp_path)
            assert r.returncode == 0, r.stderr
        assert (tmp_path / "new.co").read_bytes() == (tmp_path / "old.co").read_bytes()
    for tool in ([READELF, "-a", "new.so"],):
        r = subprocess.run(tool, capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode == 0 and "error" not in r.stderr.lower() and "warning" not in r.stderr.lower()
    layout = [
        subprocess.run(
            [READELF, "-S", "-s", "-l", "-h", "--dyn-syms", f], capture_output=True, text=True, cwd=tmp_path
        ).stdout.replace(f, "")
        for f in ("old.so", "new.so")
    ]
    assert layout[0] == layout[1]


@needs_llvm
def test_llvm_reads_each_thinned_ccob_of_a_two_unit_library(tmp_path):
    _r, new = thin("hip_two_tu_ccob_v2_cov5.so", "gfx942")
    off, size = section(new, ".hip_fatbin")
    slices = _ccob_slices(new[off : off + size])
    assert len(slices) == 2
    for i, blob in enumerate(slices):
        (tmp_path / f"c{i}.bin").write_bytes(blob)
        r = _bundler(["--list", f"--input=c{i}.bin"], tmp_path)
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.split()) == ["hipv4-amdgcn-amd-amdhsa--gfx942", "host-x86_64-unknown-linux--"]


@needs_llvm
def test_llvm_objdump_lists_only_the_kept_offloading_image(tmp_path):
    _r, new = thin("hip_newdriver_rdc_gfx90a_gfx942.o", "gfx90a")
    (tmp_path / "new.o").write_bytes(new)
    r = subprocess.run([OBJDUMP, "--offloading", "new.o"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    arches = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("arch")]
    assert arches == ["gfx90a"]


def test_a_compressed_bundle_naming_an_entry_twice_is_kept_whole():
    from rocm_build_backend.binary.rewrite_amd import Entry, compact_bundle
    from rocm_build_backend.binary.rewrite_plan import CannotThin

    twice = [Entry("hipv4-amdgcn-amd-amdhsa--gfx90a", 4096, 16, "gfx90a")] * 2
    with pytest.raises(CannotThin):
        compact_bundle(bytes(8192), twice, 4096)


def test_code_for_a_gpu_the_tables_no_longer_list_is_kept_whole():
    """cupy-cuda11x ships sm_35 cubins (Kepler, gone from CUDA 12): a target the loader rules
    cannot judge keeps its file whole (thinning it used to stop with an unknown-target error)."""
    data = bytearray((DATA / "cuda_sm75_80_90_ptx90.so").read_bytes())
    off, _size = section(bytes(data), ".nv_fatbin")
    entry = off + 16  # the first entry header, right after the container's
    assert struct.unpack_from("<I", data, entry + 28)[0] == 75
    struct.pack_into("<I", data, entry + 28, 35)
    result = thin_buffer(data, Selector(parse_targets("sm_90")), "old.so")
    assert result.action == "kept-whole" and "sm_35" in result.reason
