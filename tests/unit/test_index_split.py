"""``build_index(..., split=True)``: a fat wheel is split per target on the way in, and each split
is indexed under its target only. pip installing from it: tests/integration/test_index_split_install.py.
"""

from __future__ import annotations

from rocm_build_backend.wheel.index.run import build_index
from helpers import make_wheel, split_wheels, TESTS

BIN = TESTS / "data" / "binaries"
FAT = BIN / "hip_gfx90a_gfx942_cov5.so"  # one offload bundle: gfx90a and gfx942


def test_split_is_reused_and_cleaned_up(tmp_path):
    wd, out = split_wheels(tmp_path), tmp_path / "out"
    build_index(wd, out, split=True)
    (folder,) = (out / ".split").iterdir()
    again = build_index(wd, out, split=True)
    assert again.written == [] and again.read == 0 and again.removed == []
    (wd / "demo_gpu-1.0-py3-none-any.whl").unlink()
    third = build_index(wd, out, split=True)
    assert not folder.exists()
    assert f".split/{folder.name}/demo_gpu-1.0+gfx942-py3-none-any.whl" in third.removed
    assert "demo_gpu-1.0+gfx942-py3-none-any.whl" not in third.indexes["gfx942"]


def test_a_damaged_fat_wheel_is_skipped_with_the_reason(tmp_path):
    wd = tmp_path / "split_wheels"
    make_wheel(wd, "bad", "1.0", members={"bad/_k.so": (BIN / "bad_hip_bundle_count.so").read_bytes()}, stamp=False)
    make_wheel(
        wd, "one-gpu", "1.0", members={"one_gpu/k.co": (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes()}, stamp=False
    )
    result = build_index(wd, tmp_path / "out", split=True)
    assert result.skipped["bad-1.0-py3-none-any.whl"].startswith("cannot be split: ")
    assert "impossible" in result.skipped["bad-1.0-py3-none-any.whl"]
    assert not (tmp_path / "out" / ".split").exists() or not any((tmp_path / "out" / ".split").iterdir())
    assert "one_gpu-1.0-py3-none-any.whl" in result.indexes["gfx942"]
