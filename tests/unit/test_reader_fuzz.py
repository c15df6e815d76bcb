"""Property tests: random and mutated bytes only ever raise FormatError from the readers,
audit_bytes never raises at all, nothing hangs, and memory stays bounded whatever the
headers claim."""

from __future__ import annotations

import signal
import struct
import tracemalloc
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocm_build_backend.cli import render
from rocm_build_backend.binary import bundle as _bundle
from rocm_build_backend.binary import ccob as _ccob
from rocm_build_backend.binary import decompression as _decompression
from rocm_build_backend.binary import fatbin as _fatbin
from rocm_build_backend.binary import offload_binary as _offload_binary
from rocm_build_backend.binary import walk as _walk
from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.audit import audit_bytes
from rocm_build_backend.binary.decompression import zstd_module
from rocm_build_backend.errors import FormatError
from helpers import ROOT, TESTS

DATA = TESTS / "data" / "binaries"
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


EXTREMES = st.sampled_from(
    [0, 1, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 0x1000, 24, 32, 40, 64]
)
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
    raw = zstd_module().compress(b"\0" * (64 << 20), level=1)
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


# ---------------------------------------------------------------------------------------------
# Hostile inputs (generators in data/binaries/src/hostile.py): the work each reader does is
# measured independently of the readers (bytes read through a counting source, bytes zlib
# inflates, Python lines run, memory traced) and must stay proportional to the input.

import io  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import zipfile  # noqa: E402
import zlib  # noqa: E402

from rocm_build_backend.binary import audit as _audit  # noqa: E402
from rocm_build_backend.binary import members as _members  # noqa: E402
from rocm_build_backend.binary.printable import printable  # noqa: E402

sys.path.insert(0, str(DATA / "src"))
import hostile  # noqa: E402


class CountingSource:
    """Counts the bytes and the reads asked of a source."""

    def __init__(self, src):
        self._src, self.size, self.bytes, self.reads = src, src.size, 0, 0

    def read(self, offset, n):
        data = self._src.read(offset, n)
        self.bytes += len(data)
        self.reads += 1
        return data


def _audit_counted(name, data):
    src = CountingSource(_elf.BytesSource(data))
    return _audit._audit_source(src, name), src


def test_offload_binary_entries_sharing_one_string_table():
    """300 entries x 300 strings: the strings visited are capped by what the blob holds."""
    name, blob = hostile.make_offload_strings(300)
    src = CountingSource(_elf.BytesSource(blob))
    c, _ = _offload_binary.read_offload_binary(src, 0, len(blob), "file")
    assert src.bytes <= 16 * len(blob)
    assert any(p.startswith("too many entries") for p in c.problems)
    # an honest blob (each entry its own table) is read whole
    honest = hostile.offload_binary([(-1, 2)], [(b"triple", b"amdgcn-amd-amdhsa"), (b"arch", b"gfx90a")])
    c, _ = _offload_binary.read_offload_binary(_elf.BytesSource(honest), 0, len(honest), "f")
    assert c.targets == ["gfx90a"] and c.problems == []


def test_section_name_table_without_nul_is_not_copied_per_section():
    # 64 sections naming places in an 8 MiB section-name table without a NUL
    big = hostile.elf64([(i * 64, 1, 64, 0) for i in range(64)], b"", b"A" * (8 << 20))
    src = _elf.BytesSource(big)
    hdr = _elf.read_header(src)
    tracemalloc.start()
    try:
        table = _elf.read_sections(src, hdr)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (8 << 20) + (1 << 20)  # the table once, not the table and a copy of its rest
    assert all(len(s.name) <= 256 for s in table.sections)


def test_scan_of_damaged_file_with_many_bundle_magics_is_bounded():
    """Every entry id is also a bundle header whose table runs to the end of the file."""
    name, data = hostile.make_scan_magics(1000)
    r, src = _audit_counted(name, data)
    assert src.bytes <= 20 * len(data) + (2 << 20)
    assert any(p.startswith("too many entries") for p in r.problems)


def test_problems_are_capped_and_deduplicated():
    name, data = hostile.make_many_problems(3000)
    r = audit_bytes(data, name)
    assert len(r.problems) <= 100 and r.problems[-1].startswith("too many problems")
    assert all(len(c.problems) <= 100 for c in r.containers)
    assert r.problems[0] == "entry hipv4-amdgcn-amd-amdhsa-e0- names no target"


class _CountingInflate:
    total = 0

    def __init__(self, d):
        self._d = d

    def decompress(self, data, max_length=0):
        out = self._d.decompress(data, max_length)
        _CountingInflate.total += len(out)
        return out

    def __getattr__(self, name):
        return getattr(self._d, name)

    def copy(self):
        return _CountingInflate(self._d.copy())


def test_sections_over_one_ccob_stream_are_not_each_inflated(tmp_path, monkeypatch):
    """20 .hip_fatbin sections over one zlib CCOB that inflates to 64 MiB, in a tiny wheel:
    the bytes inflated stay within the file's budget and the file is reported too large."""
    name, data = hostile.make_ccob_sections(1)
    path = tmp_path / name
    path.write_bytes(data)
    real = zlib.decompressobj
    monkeypatch.setattr(zlib, "decompressobj", lambda *a: _CountingInflate(real(*a)))
    _CountingInflate.total = 0
    report = _audit.audit_wheel(path)
    assert _CountingInflate.total <= 64 * len(data) + (80 << 20)
    (f,) = report.files
    assert not f.readable and any(p.startswith("too large") for p in f.problems)


def test_fatbin_stub_check_does_not_inflate_every_entry(monkeypatch):
    """200 LZ4 ELF entries that each inflate to the stub check's cap."""
    calls = []
    real = _fatbin.lz4_block
    monkeypatch.setattr(_fatbin, "lz4_block", lambda data, cap: calls.append(1) or real(data, cap))
    name, data = hostile.make_lz4_fatbin(200)
    r = audit_bytes(data, name)
    assert r.targets == ["sm_80"]
    assert len(calls) <= 8


def test_lz4_overlapping_matches():
    # dist 3, length 4+9 = 13 repeating "abc"; dist 1 runs
    assert _decompression.lz4_block(b"\x39abc\x03\x00\x00", 100) == b"abc" + b"abcabcabcabca"
    assert _decompression.lz4_block(b"\x1fa\x01\x00\x01\x10z", 100) == b"a" * 21 + b"z"


def _lines_run(fn, module_file):
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if frame.f_code.co_filename != module_file:
            return None
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def test_many_small_reads_of_an_inflated_member_are_linear(tmp_path):
    """Small bundles back to back in a deflated wheel member: each read must not walk the
    chunks of output kept so far."""
    lines = {}
    for n in (200, 800):
        name, data = hostile.make_small_bundles_wheel(n)
        path = tmp_path / f"{n}.whl"
        path.write_bytes(data)
        report = None

        def run():
            nonlocal report
            report = _audit.audit_wheel(path)

        lines[n] = _lines_run(run, _members.__file__)
        assert report.files[0].targets == ["gfx90a"] and report.files[0].readable
    assert lines[800] <= 5 * lines[200]  # 4x the input: about 4x the work, not 16x


def test_fifo_in_a_folder_is_not_read(tmp_path):
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "k.so").write_bytes((DATA / "cuda_ptx80.so").read_bytes())
    os.mkfifo(folder / "pipe.so")
    code = (
        "import sys, json\n"
        "from rocm_build_backend.binary.audit import audit_paths\n"
        "r = audit_paths([sys.argv[1]]); g = audit_paths([sys.argv[2]])\n"
        "print(json.dumps([r.targets, r.skipped, r.problems, g.problems]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(folder), str(folder / "pipe.so")],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert out.returncode == 0, out.stderr
    import json

    targets, skipped, problems, given = json.loads(out.stdout)
    assert targets == ["compute_80"] and skipped == 1 and problems == []
    assert len(given) == 1 and "not a regular file" in given[0]


def test_control_characters_from_binaries_are_escaped():
    arch = b"gfx90a\n\x1b[31mFAKE: all good\x1b[0m"
    blob = hostile.offload_binary([(-1, 2)], [(b"triple", b"amdgcn-amd-amdhsa"), (b"arch", arch)])
    report = _audit.AuditReport(files=[audit_bytes(blob, "evil\n.so")]).finish()
    text = render.audit(report)
    assert "\x1b" not in text and "\nFAKE" not in text and "evil\\n.so" in text
    assert "gfx90a\\n\\x1b[31mFAKE" in text
    assert printable("ok gfx90a ünïcode") == "ok gfx90a ünïcode"
    assert printable("a\u202eb\x7f\x85") == "a\\u202eb\\x7f\\x85"


def test_containers_per_file_are_capped(monkeypatch):
    from rocm_build_backend.binary import budget

    monkeypatch.setattr(budget, "MAX_CONTAINERS", 20)
    name, data = hostile.make_small_bundles_wheel(50)
    member = zipfile.ZipFile(io.BytesIO(data)).read("pkg/k.hipfb")
    r = audit_bytes(member, "k.hipfb")
    assert len(r.containers) <= 21
    assert any(p.startswith("too many entries") for p in r.problems) and not r.readable


def test_problems_of_one_container_are_not_all_kept_while_reading():
    """A hostile bundle has one problem per entry: the container keeps 100 and counts the rest."""
    from rocm_build_backend.binary.container import Container

    c = Container("bundle", "file", 0)
    for i in range(1000):
        c.problems.append(f"entry {i} names no target")
    assert len(c.problems) == 100
    name, data = hostile.make_many_problems(3000)
    r = audit_bytes(data, name)
    assert r.problems[-1] == "too many problems: 2901 more not listed"


def test_bundle_entries_are_capped():
    """A bundle's entry list is kept in memory: real ones hold one entry per target."""
    name, data = hostile.make_many_problems(5000)
    r = audit_bytes(data, name)
    assert any("too many entries: at most 4096 are read" in p for p in r.problems)
    assert r.problems[-1] == "too many problems: 3998 more not listed"


def test_backward_reads_of_an_lzma_member_are_charged(tmp_path):
    """zipfile re-decompresses an lzma member from its start on every backward seek: 200
    sections over one bundle behind 2 MiB of zeros must not cost 200 x 2 MiB."""
    ident = b"hipv4-amdgcn-amd-amdhsa--gfx90a"
    bundle = (
        hostile.BUNDLE_MAGIC
        + struct.pack("<QQQQ", 1, 32 + 24 + len(ident), 64, len(ident))
        + ident
        + b"\x7fELF"
        + b"\0" * 60
    )
    body = b"\0" * (2 << 20) + bundle
    so = hostile.elf64([(1, 1, 64 + (2 << 20), len(bundle))] * 200, body, b"\0.hip_fatbin\0")
    path = tmp_path / "lzma-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_LZMA) as zf:
        zf.writestr("pkg/_k.so", so)
    (f,) = _audit.audit_wheel(path).files
    assert any(p.startswith("too large") for p in f.problems)
    assert "gfx90a" in f.targets


def test_lookahead_of_a_member_full_of_fatbin_magics_is_bounded(tmp_path, monkeypatch):
    """A deflated member of nothing but aligned fatbin magics: what the first pass keeps for
    later stays within its caps (lowered here), and the audit still ends with an answer."""
    from rocm_build_backend.binary import lookahead

    monkeypatch.setattr(lookahead, "MAX_BYTES", 256 << 10)
    monkeypatch.setattr(lookahead, "MAX_PENDING", 1000)
    data = (hostile.FATBIN_MAGIC + struct.pack("<HHQ", 1, 16, 0)) * (1 << 13)
    path = tmp_path / "magics-1.0-py3-none-any.whl"
    path.write_bytes(hostile.wheel({"pkg/k.fatbin": data}))
    seen = []
    real = _members.InflateSource.__init__

    def spy(self, *args):
        real(self, *args)
        seen.append(self)

    _members.InflateSource.__init__ = spy
    try:
        tracemalloc.start()
        report = _audit.audit_wheel(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        _members.InflateSource.__init__ = real
    assert seen[0]._ahead._kept <= lookahead.MAX_BYTES + (64 << 10)
    assert len(seen[0]._ahead._todo) <= lookahead.MAX_PENDING + 4
    assert peak < 16 << 20
    assert report.files and report.files[0].kind == "fatbin"
