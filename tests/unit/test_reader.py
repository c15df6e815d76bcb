"""The binary readers against real fixtures with known answers (tests/data/binaries).

Each fixture's truth is in manifest.json: per-container targets, their union, and the
targets every container covers. The damaged copies must be reported as damaged, recover
what is recoverable, and never be mistaken for "no GPU code".
"""

from __future__ import annotations

import json
import struct

import pytest

from rocm_build_backend.binary import amdgpu as _amdgpu
from rocm_build_backend.binary import bundle as _bundle
from rocm_build_backend.binary import decompression as _decompression
from rocm_build_backend.binary import fatbin as _fatbin
from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.audit import audit_bytes, audit_file
from rocm_build_backend.binary.decompression import zstd_module
from rocm_build_backend.errors import FormatError
from helpers import TESTS

DATA = TESTS / "data" / "binaries"
MANIFEST = json.loads((DATA / "manifest.json").read_text())
FIXTURES = {f["file"]: f for f in MANIFEST["fixtures"]}
DAMAGED = {f["file"]: f for f in MANIFEST["damaged"]}


def _sorted(lists):
    return sorted(sorted(x) for x in lists)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_matches_manifest(name):
    fx = FIXTURES[name]
    r = audit_file(DATA / name)
    assert r.readable, r.problems
    assert r.problems == []
    assert _sorted(c.targets for c in r.containers) == _sorted(fx["containers"])
    assert set(r.targets) == set(fx["union"])
    assert set(r.complete) == set(fx["all_kernels"])
    assert all(c.read for c in r.containers)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_bytes_and_file_agree(name):
    data = (DATA / name).read_bytes()
    a, b = audit_bytes(data, name), audit_file(DATA / name)
    assert [c.to_json() for c in a.containers] == [c.to_json() for c in b.containers]


def test_container_order_is_file_order():
    r = audit_file(DATA / "hip_two_tu_cov4.so")
    assert [c.offset for c in r.containers] == [0, 0x4000]
    assert [c.targets for c in r.containers] == [["gfx908", "gfx90a"], ["gfx90a"]]
    r = audit_file(DATA / "hip_two_tu_ccob_v2_cov5.so")
    assert [(c.kind, c.offset) for c in r.containers] == [("ccob", 0), ("ccob", 0x1000)]
    r = audit_file(DATA / "cuda_two_tu_dlink_stub.so")
    assert [c.kernels for c in r.containers] == [False, True, True]
    assert "stub" in r.containers[0].note


def _count_stub_checks(monkeypatch):
    calls = []
    real = _fatbin._cubin_has_kernels

    def spy(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(_fatbin, "_cubin_has_kernels", spy)
    return calls


def test_a_container_with_ptx_is_not_decompressed_to_look_for_kernels(monkeypatch):
    """The device-link step writes cubins only: a PTX entry means kernels, whatever order
    the entries come in (the ELF entries come first, and were each looked into)."""
    calls = _count_stub_checks(monkeypatch)
    for name in ("cuda_compress_size_sm80_ptx90.so", "cuda_sm75_80_90_ptx90.so", "cuda_sm80_sm100_ptx100.fatbin"):
        r = audit_file(DATA / name)
        assert sorted(r.complete) == sorted(FIXTURES[name]["all_kernels"]) and all(c.kernels for c in r.containers)
    assert calls == []


def test_containers_with_the_targets_of_one_with_kernels_are_not_looked_into(monkeypatch):
    """400 one-cubin containers for sm_80 and sm_90 alternately: one look per target set,
    not one per container; a stub with targets of its own is still found."""
    cubin = (DATA / "cubin_abi8_sm80_cuda13.0.cubin").read_bytes()
    payload = cubin + bytes(-len(cubin) % 8)
    fat = b""
    for i in range(400):
        entry = (
            struct.pack("<HHIQIIHHIIIQQQ", 2, 0x101, 64, len(payload), 0, 0, 8, 1, 80 + 10 * (i % 2), 0, 0, 0x11, 0, 0)
            + payload
        )
        fat += _fatbin.FATBIN_MAGIC + struct.pack("<HHQ", 1, 16, len(entry)) + entry
    calls = _count_stub_checks(monkeypatch)
    r = audit_bytes(fat, "many.fatbin")
    assert len(r.containers) == 400 and r.complete == [] and r.targets == ["sm_80", "sm_90"]
    assert len(calls) == 2
    stub = audit_file(DATA / "cuda_two_tu_dlink_stub.so")
    assert [c.kernels for c in stub.containers] == [False, True, True]


def test_targets_sorted_like_target_module():
    r = audit_file(DATA / "cuda_sm90a_100a_100f_103_120_ptx120f.so")
    assert r.targets == ["sm_90a", "sm_100a", "sm_100f", "sm_103", "sm_120", "compute_120f"]
    r = audit_file(DATA / "hip_generic_gfx9-generic_gfx11-generic_cov6.so")
    assert r.targets == ["gfx9-generic", "gfx11-generic"]


def test_kinds_found_by_magic_not_extension():
    # --genco writes a bundle, named .hsaco; a raw code object named .co; a fatbin file
    assert audit_file(DATA / "hip_genco_gfx908_gfx90a_bundle.hsaco").kind == "bundle"
    assert audit_file(DATA / "amdgpu_gfx942_cov5.hsaco").kind == "code-object"
    assert audit_file(DATA / "ccob_v2_zstd_gfx90a_gfx942.bin").kind == "ccob"
    assert audit_file(DATA / "cuda_sm80_sm100_ptx100.fatbin").kind == "fatbin"
    assert audit_file(DATA / "cubin_abi7_sm80_cuda12.4.cubin").kind == "cubin"
    renamed = audit_bytes((DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes(), "README.txt")
    assert renamed.targets == ["gfx90a", "gfx942"]
    assert audit_bytes(b"import os\n" * 100, "x.so").kind == "other"


def test_magic_in_data_is_not_device_code():
    # a host library that carries the magics in its data (like libamdhip64's .rodata)
    # but has no device section holds no device code
    data = bytearray((DATA / "cuda_sm75_80_90_ptx90.so").read_bytes())
    hdr = _elf.read_header(_elf.BytesSource(bytes(data)))
    table = _elf.read_sections(_elf.BytesSource(bytes(data)), hdr)
    nv = next(s for s in table.sections if s.name == ".nv_fatbin")
    # rename the section: same bytes, no device section any more
    shstr = table.sections[hdr.shstrndx]
    name_off = data.index(b".nv_fatbin\0", shstr.offset)
    data[name_off : name_off + 10] = b".rodata_xx"
    r = audit_bytes(bytes(data), "lib.so")
    assert r.containers == [] and r.readable
    assert (DATA / "cuda_sm75_80_90_ptx90.so").read_bytes()[nv.offset : nv.offset + 4] == _fatbin.FATBIN_MAGIC


# ------------------------------------------------------------------ e_flags, ids


@pytest.mark.parametrize(
    "flags,abi,want",
    [
        (0x53F, 2, "gfx90a"),
        (0x73F, 2, "gfx90a:xnack+"),
        (0x63F, 2, "gfx90a:xnack-"),
        (0xE2F, 2, "gfx906:sramecc+:xnack-"),
        (0x630, 2, "gfx908:xnack-"),
        (0x54C, 3, "gfx942"),
        (0x540, 2, "gfx940"),
        (0x1000151, 4, "gfx9-generic"),
        (0x1000054, 4, "gfx11-generic"),
        (0x13F, 1, "gfx90a:xnack+"),  # code object v3: 0x100 = xnack on
        (0x33F, 1, "gfx90a:sramecc+:xnack+"),
        (0x56, 3, "mach-0x56"),  # reserved: reported raw, not guessed
    ],
)
def test_amdgpu_e_flags(flags, abi, want):
    hdr = _elf.ElfHeader(True, "<", 64, abi, 3, _elf.EM_AMDGPU, flags, 0, 0, 64, 0, 0)
    info = _amdgpu.amdgpu_code_object(hdr)
    assert info.target == want
    assert info.version == abi + 2
    assert info.generic_version == (1 if abi == 4 else 0)


def test_mach_table_matches_csv_rows():
    table = _amdgpu.mach_table()
    assert len(table) == 80
    assert table[0x3F] == "gfx90a" and table[0x4C] == "gfx942" and table[0x5F] == "gfx9-4-generic"
    assert 0x56 not in table


@pytest.mark.parametrize(
    "text,kind,target",
    [
        ("hipv4-amdgcn-amd-amdhsa--gfx90a", "hipv4", "gfx90a"),
        ("hipv4-amdgcn-amd-amdhsa--gfx906:xnack-:sramecc+", "hipv4", "gfx906:sramecc+:xnack-"),
        ("hip-amdgcn-amd-amdhsa--gfx9-4-generic", "hip", "gfx9-4-generic"),
        ("hip-amdgcn-amd-amdhsa-gfx906", "hip", "gfx906"),
        ("openmp-nvptx64-nvidia-cuda--sm_70", "openmp", "sm_70"),
        ("host-x86_64-unknown-linux", "host", ""),
        ("host-x86_64-unknown-linux--", "host", ""),
        ("hipv4-spirv64-amd-amdhsa--amdgcnspirv", "hipv4", "amdgcnspirv"),
    ],
)
def test_bundle_ids(text, kind, target):
    bid = _bundle.parse_bundle_id(text)
    assert (bid.kind, bid.target) == (kind, target)
    assert bid.is_host == (kind == "host")


@pytest.mark.parametrize("text", ["", "hip", "-amdgcn", "hip-amdgcn"])
def test_bad_bundle_ids(text):
    with pytest.raises(FormatError):
        _bundle.parse_bundle_id(text)


def test_bundle_id_cross_checked_with_e_flags():
    data = bytearray((DATA / "hip_genco_gfx908_gfx90a_bundle.hsaco").read_bytes())
    i = data.index(b"--gfx908")
    data[i + 2 : i + 8] = b"gfx909"  # the id lies; the code object still says gfx908
    r = audit_bytes(bytes(data), "x.hsaco")
    assert "gfx909" in r.targets
    assert any("holds a code object for gfx908" in p for p in r.problems)


def test_cubin_a_suffix_from_nv_compat_only():
    # CUDA 13 does not set 0x8 in e_flags for sm_100a; .nv.compat attribute 9 says it
    hdr = _elf.read_header(_elf.BytesSource((DATA / "cubin_abi8_sm100a_cuda13.0.cubin").read_bytes()))
    assert hdr.flags & 0x8 == 0
    assert audit_file(DATA / "cubin_abi8_sm100a_cuda13.0.cubin").targets == ["sm_100a"]
    assert audit_file(DATA / "cubin_abi8_sm80_cuda13.0.cubin").targets == ["sm_80"]


def test_lz4_block_decoder():
    # literals only; then a match that overlaps itself (run-length)
    assert _decompression.lz4_block(b"\x50hello", 100) == b"hello"
    assert _decompression.lz4_block(b"\x14a\x01\x00\x10b", 100) == b"a" * 9 + b"b"
    with pytest.raises(FormatError):
        _decompression.lz4_block(b"\x14a\x05\x00", 100)  # distance past the start
    with pytest.raises(FormatError):
        _decompression.lz4_block(b"\x1fa\x01\x00\xff\xff\xff\xff", 300)  # inflates past the cap


def test_lz4_fixture_stub_check_reads_compressed_cubins():
    r = audit_file(DATA / "cuda_compress_speed_sm80_ptx90.so")
    assert r.containers[0].kernels and r.complete == ["sm_80", "compute_90"]


# ------------------------------------------------------------------ CCOB


def _ccob(version: int, method: int, raw: bytes) -> bytes:
    import hashlib
    import zlib

    digest = struct.unpack("<Q", hashlib.md5(raw).digest()[:8])[0]
    payload = zlib.compress(raw) if method == 0 else zstd_module().compress(raw)
    if version == 1:
        return b"CCOB" + struct.pack("<HHIQ", 1, method, len(raw), digest) + payload
    if version == 2:
        return b"CCOB" + struct.pack("<HHIIQ", 2, method, 24 + len(payload), len(raw), digest) + payload
    return b"CCOB" + struct.pack("<HHQQQ", 3, method, 32 + len(payload), len(raw), digest) + payload


def _plain_bundle() -> bytes:
    so = (DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes()
    src = _elf.BytesSource(so)
    sec = next(s for s in _elf.read_sections(src, _elf.read_header(src)).sections if s.name == ".hip_fatbin")
    return so[sec.offset : sec.offset + sec.size]


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("method", [0, 1])
def test_concatenated_ccobs_every_version(version, method):
    raw = _plain_bundle()
    one = _ccob(version, method, raw)
    pad = b"\0" * (-len(one) % 4096)
    data = one + pad + one  # two CCOBs back to back, like a multi-TU .hip_fatbin
    r = audit_bytes(data, "lib.co")
    assert r.readable, r.problems
    assert [c.targets for c in r.containers] == [["gfx90a", "gfx942"]] * 2
    assert r.containers[1].offset == len(one) + len(pad)


def test_ccob_magic_inside_payload_does_not_split_it():
    # a "CCOB" string inside compressed data must not be taken as a boundary: the total
    # size field says where the next one starts
    raw = _plain_bundle() + b"CCOB" * 64
    one = _ccob(2, 0, raw)
    r = audit_bytes(one + one, "lib.co")
    assert len(r.containers) == 2 and r.readable


def test_zstd_missing_is_a_note_not_a_failure(monkeypatch):
    monkeypatch.setattr(_decompression, "_zstd_backend", lambda: None)
    r = audit_file(DATA / "hip_ccob_v2_gfx90a_gfx942_cov5.so")
    (c,) = r.containers
    assert not c.read and c.targets == []
    assert "install backports.zstd" in c.note
    assert r.readable and not r.fully_read
    # zlib needs nothing extra
    assert audit_file(DATA / "synthetic_ccob_v2_zlib.bin").fully_read


def test_zstd_frame_walk_finds_v1_end():
    data = (DATA / "synthetic_ccob_v1_zstd.bin").read_bytes()
    length, content = _decompression.zstd_frame(_elf.BytesSource(data), 20, len(data))
    assert 20 + length == len(data)
    assert content == struct.unpack_from("<I", data, 8)[0]


# ------------------------------------------------------------------ damaged copies


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_damaged_reported_as_damaged(name):
    r = audit_file(DATA / name)
    assert not r.readable
    assert r.problems
    assert r.kind != "other"


RECOVERED = {
    "trunc_hip_gfx90a_gfx940_cov4.so": ["gfx90a", "gfx940"],
    "trunc_hip_two_tu_cov4.so": ["gfx908", "gfx90a"],
    "trunc_cuda_sm75_80_90_ptx90.so": ["sm_75", "sm_80"],
    "trunc_cuda_sm90a_100a_100f_103_120_ptx120f.so": ["sm_90a", "sm_100a", "sm_100f"],
    "trunc_amdgpu_gfx942_cov5.hsaco": ["gfx942"],
    "trunc_cubin_abi8_sm80_cuda13.0.cubin": ["sm_80"],
    "bad_hip_bundle_count.so": ["gfx90a", "gfx940"],
    "bad_hip_entry_offset.so": ["gfx940"],
    "bad_cuda_fat_size.so": ["sm_75", "sm_80", "sm_90", "compute_90"],
    "bad_ccob_uncompressed_size.bin": ["gfx90a", "gfx942"],
    "bad_ccob_total_size.bin": ["gfx90a", "gfx942"],
    "trunc_hip_ccob_v2_gfx90a_gfx942_cov5.so": [],
    "trunc_hip_genco_gfx908_gfx90a_bundle.hsaco": [],
    "trunc_ccob_v2_zstd_gfx90a_gfx942.bin": [],
    "trunc_cuda_sm80_sm100_ptx100.fatbin": [],
    "bad_cuda_zero_entry.so": [],
}


def test_every_damaged_fixture_has_an_expectation():
    assert set(RECOVERED) == set(DAMAGED)


@pytest.mark.parametrize("name", sorted(RECOVERED))
def test_damaged_recovers_what_is_there(name):
    assert audit_file(DATA / name).targets == RECOVERED[name]


def test_truncation_is_named():
    for name in DAMAGED:
        if name.startswith("trunc_"):
            r = audit_file(DATA / name)
            assert any("truncated" in p for p in r.problems), (name, r.problems)
    r = audit_file(DATA / "trunc_hip_two_tu_cov4.so")
    assert any("section table" in p for p in r.problems)


def test_bad_entry_offset_names_the_entry():
    r = audit_file(DATA / "bad_hip_entry_offset.so")
    assert any("gfx90a" in p and "outside" in p for p in r.problems)


def test_bad_uncompressed_size_is_not_preallocated():
    import tracemalloc

    data = (DATA / "bad_ccob_uncompressed_size.bin").read_bytes()
    tracemalloc.start()
    try:
        audit_bytes(data, "x.co")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


def test_elf_reader_rejects_garbage():
    for data in (b"", b"\x7fELF", b"\x7fELF\x03\x01" + b"\0" * 60, b"\x7fELF\x02\x03" + b"\0" * 60):
        with pytest.raises(FormatError):
            _elf.read_header(_elf.BytesSource(data))


def test_elf_extended_section_numbering():
    # e_shnum = 0: the count lives in section 0's sh_size
    data = bytearray((DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes())
    src = _elf.BytesSource(bytes(data))
    hdr = _elf.read_header(src)
    n = len(_elf.read_sections(src, hdr).sections)
    struct.pack_into("<H", data, 0x3C, 0)
    struct.pack_into("<Q", data, hdr.shoff + 0x20, n)
    r = audit_bytes(bytes(data), "x.so")
    assert r.targets == ["gfx90a", "gfx942"] and r.readable


def test_damaged_target_names_do_not_break_sorting():
    data = bytearray((DATA / "hip_genco_gfx908_gfx90a_bundle.hsaco").read_bytes())
    i = data.index(b"--gfx908")
    data[i + 5 : i + 8] = b"9@u"  # "gfx9@u": not a processor any table knows
    r = audit_bytes(bytes(data), "x.hsaco")
    assert r.targets == ["gfx90a", "gfx9@u"]


def test_empty_fatbin_of_a_ptx_only_link_is_not_damage():
    """nvcc 13 links a PTX-only build with an empty device-link fatbin (fat size 0): a
    valid container without kernels, not "holds no entries"."""
    r = audit_file(DATA / "cuda_two_tu_ptx80.so")
    assert r.readable and r.problems == []
    assert [c.targets for c in r.containers] == [[], ["compute_80"], ["compute_80"]]
    assert [c.kernels for c in r.containers] == [False, True, True]
    assert r.complete == ["compute_80"]


def _section(path, name):
    src = _elf.BytesSource(path.read_bytes())
    hdr = _elf.read_header(src)
    (sec,) = _elf.read_sections(src, hdr, lambda n, t: n == name).sections
    return src, sec


def test_nvlink_entry_header_over_4_kib_is_read():
    """A CMake CUDA library with separable compilation and 71 objects, device-linked with
    line info: the entry header lists every object's name (5,296 bytes). It holds sm_90 only."""
    name = "cuda_rdc_lineinfo_71_objects_sm90.so"
    src, sec = _section(DATA / name, ".nv_fatbin")
    (ehsize,) = struct.unpack("<I", src.read(sec.offset + 16 + 4, 4))
    assert ehsize == FIXTURES[name]["entry_header_size"] > 4096
    names = src.read(sec.offset + 16 + 64, ehsize - 64)
    assert names.count(b".cu.o") == 71
    r = audit_file(DATA / name)
    assert r.readable and r.problems == []
    assert r.targets == ["sm_90"] and r.complete == ["sm_90"]
    linked = [c for c in r.containers if c.where == ".nv_fatbin"]
    assert len(linked) == 1 and linked[0].kernels and linked[0].read


def test_entry_header_past_its_container_is_a_problem_not_a_read():
    """The header size is bounded by the container: one past it is named, nothing read from
    beyond, and the walk ends (no allocation from the size field)."""
    cubin = (DATA / "cubin_abi8_sm80_cuda13.0.cubin").read_bytes()
    payload = cubin + bytes(-len(cubin) % 8)
    for ehsize in (64 + len(payload) + 8, 1 << 31):
        entry = struct.pack("<HHIQIIHHIIIQQQ", 2, 0x101, ehsize, 0, 0, 0, 8, 1, 80, 0, 0, 0x11, 0, 0) + payload
        fat = _fatbin.FATBIN_MAGIC + struct.pack("<HHQ", 1, 16, len(entry)) + entry
        r = audit_bytes(fat + bytes(4096), "bad.fatbin")
        assert not r.readable
        assert any(
            f"header size of {ehsize}, past the container's end at 0x{16 + len(entry):x}" in p for p in r.problems
        ), r.problems
