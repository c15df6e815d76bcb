"""Damaged device code never makes ``thin`` crash or write half a binary: for many seeded
corruptions of the real fixtures' device sections, ``thin_buffer`` returns a result or raises
FormatError, and a file it reports as thinned reads back cleanly with only kept targets."""

from __future__ import annotations

import random

import pytest

from rocm_build_backend.binary import elf
from rocm_build_backend.binary.audit import audit_bytes
from rocm_build_backend.binary.rewrite import thin_buffer
from rocm_build_backend.binary.rewrite_plan import Selector
from rocm_build_backend.errors import FormatError
from rocm_build_backend.gpu.targets import parse_targets
from helpers import TESTS

DATA = TESTS / "data" / "binaries"
CASES = [
    ("hip_features_cov4.so", ".hip_fatbin", "gfx90a"),
    ("hip_two_tu_ccob_v2_cov5.so", ".hip_fatbin", "gfx942"),
    ("cuda_two_tu_dlink_stub.so", ".nv_fatbin", "sm_80"),
    ("hip_newdriver_rdc_gfx90a_gfx942.o", ".llvm.offloading", "gfx90a"),
    ("synthetic_ccob_v1_zlib.bin", None, "gfx90a"),
    ("cuda_sm80_sm100_ptx100.fatbin", None, "sm_80"),
]


def _span(data: bytes, name: str | None) -> tuple[int, int]:
    if name is None:
        return 0, min(len(data), 512)
    src = elf.BytesSource(data)
    sec = elf.read_sections(src, elf.read_header(src), lambda n, t: n == name).sections[0]
    return sec.offset, min(sec.size, 512)  # the headers: where damage matters


@pytest.mark.parametrize("name, section, target", CASES)
def test_corrupted_device_code_is_refused_or_thinned_cleanly(name, section, target):
    original = (DATA / name).read_bytes()
    start, length = _span(original, section)
    sel = Selector(parse_targets(target))
    rng = random.Random(name)
    outcomes: set[str] = set()
    for _ in range(60):
        data = bytearray(original)
        for _ in range(rng.randint(1, 4)):
            pos = start + rng.randrange(length)
            data[pos] = rng.choice([0, 0xFF, rng.randrange(256)])
        before = bytes(data)
        try:
            result = thin_buffer(data, sel, name)
        except FormatError:
            assert bytes(data) == before  # refused: nothing changed
            outcomes.add("refused")
            continue
        outcomes.add(result.action)
        if result.restore or result.action != "thinned":
            continue
        view = bytes(data[: result.new_size]) if result.new_size is not None else bytes(data)
        report = audit_bytes(view, name)
        assert not [p for p in report.problems if "holds no entries" not in p]
        assert {t for c in report.containers for t in c.targets} <= set(result.kept)
    assert "refused" in outcomes and outcomes <= {"refused", "thinned", "kept-whole", "unchanged", "none", "dropped"}
