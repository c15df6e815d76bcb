"""Property tests: random and mutated bytes only ever raise FormatError from the readers,
audit_bytes never raises at all, nothing hangs, and memory stays bounded whatever the
headers claim."""

from __future__ import annotations

import signal
import struct
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocm_build_backend.binary import bundle as _bundle
from rocm_build_backend.binary import ccob as _ccob
from rocm_build_backend.binary import decompression as _decompression
from rocm_build_backend.binary import fatbin as _fatbin
from rocm_build_backend.binary import offload_binary as _offload_binary
from rocm_build_backend.binary import walk as _walk
from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.audit import audit_bytes
from rocm_build_backend.errors import FormatError

DATA = Path(__file__).parent / "data" / "binaries"
SEEDS = {
    name: (DATA / name).read_bytes()
    for name in [
        "hip_two_tu_cov4.so",
        "hip_two_tu_ccob_v2_cov5.so",
        "hip_genco_gfx908_gfx90a_bundle.hsaco",
        "ccob_v2_zstd_gfx90a_gfx942.bin",
        "synthetic_ccob_v1_zlib.bin",
        "synthetic_ccob_v3_zstd.bin",
        "hip_newdriver_rdc_gfx90a_gfx942.o",
        "cuda_two_tu_dlink_stub.so",
        "cuda_compress_speed_sm80_ptx90.so",
        "cuda_sm80_sm100_ptx100.fatbin",
        "cubin_abi8_sm100a_cuda13.0.cubin",
        "amdgpu_gfx942_cov5.hsaco",
    ]
}
MAGICS = [
    b"\x7fELF\x02\x01\x01",
    _bundle.BUNDLE_MAGIC,
    _ccob.CCOB_MAGIC + b"\x01\x00\x00\x00",
    _ccob.CCOB_MAGIC + b"\x02\x00\x01\x00",
    _ccob.CCOB_MAGIC + b"\x03\x00\x01\x00",
    _offload_binary.OFFLOAD_MAGIC + b"\x01\x00\x00\x00",
    _fatbin.FATBIN_MAGIC + b"\x01\x00\x10\x00",
    b"",
]
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def no_hang(seconds: int = 20):
    def boom(*_):
        raise AssertionError(f"reader ran for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _readers(data: bytes):
    src = _elf.BytesSource(data)
    n = len(data)
    yield lambda: _bundle.read_bundle(src, 0, n, "f")
    yield lambda: _bundle.read_bundle(src, 0, n, "f", cut=True)
    yield lambda: _ccob.read_ccob(src, 0, n, "f")
    yield lambda: _offload_binary.read_offload_binary(src, 0, n, "f")
    yield lambda: _fatbin.read_fatbin(src, 0, n, "f")
    yield lambda: _walk.walk_hip_fatbin(src, "f")
    yield lambda: _walk.walk_offloading(src, "f")
    yield lambda: _fatbin.walk_fatbins(src, "f")
    yield lambda: _decompression.zstd_frame(src, 0, n)
    yield lambda: _decompression.lz4_block(data, 1 << 16)
    yield lambda: _elf.read_sections(src, _elf.read_header(src))
    yield lambda: _bundle.parse_bundle_id(data.decode("latin-1"))


def _only_format_errors(data: bytes) -> None:
    for call in _readers(data):
        try:
            call()
        except FormatError:
            pass


@SETTINGS
@given(prefix=st.sampled_from(MAGICS), body=st.binary(max_size=2048))
def test_random_bytes(prefix, body):
    data = prefix + body
    with no_hang():
        _only_format_errors(data)
        r = audit_bytes(data, "x")
    assert isinstance(r.problems, list)


def _mutate(data: bytes, edits) -> bytes:
    buf = bytearray(data)
    for kind, where, value in edits:
        if not buf:
            break
        pos = where % len(buf)
        if kind == "byte":
            buf[pos] = value & 0xFF
        elif kind == "u32":
            buf[pos : pos + 4] = struct.pack("<I", value & 0xFFFFFFFF)[: len(buf) - pos]
        elif kind == "u64":
            buf[pos : pos + 8] = struct.pack("<Q", value & 0xFFFFFFFFFFFFFFFF)[: len(buf) - pos]
        elif kind == "cut":
            del buf[pos:]
        elif kind == "dup":
            buf[pos:pos] = buf[pos : pos + (value % 4096)]
    return bytes(buf)


EXTREMES = st.sampled_from([0, 1, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FFFFFFFFFFFFFFF,
                            0xFFFFFFFFFFFFFFFF, 0x1000, 24, 32, 40, 64])
EDITS = st.lists(
    st.tuples(
        st.sampled_from(["byte", "u32", "u64", "cut", "dup"]),
        st.integers(min_value=0, max_value=1 << 20),
        st.one_of(EXTREMES, st.integers(min_value=0, max_value=(1 << 64) - 1)),
    ),
    min_size=1,
    max_size=6,
)


@SETTINGS
@given(seed=st.sampled_from(sorted(SEEDS)), edits=EDITS)
def test_mutated_fixtures(seed, edits):
    data = _mutate(SEEDS[seed], edits)
    with no_hang():
        r = audit_bytes(data, seed)
        _only_format_errors(data)
    # whatever the damage, the result is a report: targets from the file or problems
    assert r.readable == (not r.problems)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(sorted(SEEDS)), edits=EDITS)
def test_memory_bounded_whatever_headers_claim(seed, edits):
    data = _mutate(SEEDS[seed], edits)
    tracemalloc.start()
    try:
        with no_hang():
            audit_bytes(data, seed)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 24 << 20, peak  # inputs are < 100 KB; a size field must not become a buffer


@pytest.mark.parametrize("field,value", [(8, 0xFFFFFFFF), (12, 0xFFFFFFFF), (8, 0), (12, 0)])
def test_ccob_size_fields(field, value):
    data = bytearray(SEEDS["ccob_v2_zstd_gfx90a_gfx942.bin"])
    struct.pack_into("<I", data, field, value)
    tracemalloc.start()
    try:
        r = audit_bytes(bytes(data), "x.co")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
    assert r.problems or r.targets == ["gfx90a", "gfx942"]


def test_zstd_bomb_is_bounded():
    # a tiny frame of RLE blocks that claims and would produce 1 GiB
    zstandard = pytest.importorskip("zstandard")
    raw = zstandard.ZstdCompressor(level=1).compress(b"\0" * (64 << 20))
    header = _ccob.CCOB_MAGIC + struct.pack("<HHIIQ", 2, 1, 24 + len(raw), 64 << 20, 0)
    tracemalloc.start()
    try:
        with no_hang():
            r = audit_bytes(header + raw, "bomb.co")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20
    assert r.problems and r.targets == []


def test_bundle_count_loop_is_bounded():
    # 2**64-1 entries claimed, each entry id 1 byte: the walk stops at the data
    entry = struct.pack("<QQQ", 0x1000, 0, 1) + b"x"
    data = _bundle.BUNDLE_MAGIC + struct.pack("<Q", (1 << 64) - 1) + entry * 2000
    with no_hang(10):
        r = audit_bytes(data, "b.co")
    assert not r.readable
