"""``build_index(..., split=True)``: a fat wheel is split per target on the way in, and pip
installs the one for its target from the per-target index."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_build_backend.binary.audit import audit_file, audit_wheel
from rocm_build_backend.wheel.index.run import build_index
from wheelmaker import make_wheel

BIN = Path(__file__).parent / "data" / "binaries"
FAT = BIN / "hip_gfx90a_gfx942_cov5.so"  # one offload bundle: gfx90a and gfx942


def wheels(tmp: Path) -> Path:
    wd = tmp / "wheels"
    make_wheel(wd, "demo-gpu", "1.0", members={"demo_gpu/_k.so": FAT.read_bytes()}, stamp=False)
    make_wheel(wd, "pure", "2.0", members={"pure/__init__.py": b""}, stamp=False)
    make_wheel(wd, "one-gpu", "1.0", members={"one_gpu/k.co": (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes()},
               stamp=False)
    return wd


def test_split_indexes_the_per_target_wheels_and_pip_installs_the_right_one(tmp_path):
    wd, out = wheels(tmp_path), tmp_path / "out"
    result = build_index(wd, out, split=True)
    assert result.skipped == {}
    assert sorted(result.indexes["gfx90a"]) == ["demo_gpu-1.0+gfx90a-py3-none-any.whl", "pure-2.0-py3-none-any.whl"]
    assert sorted(result.indexes["gfx942"]) == ["demo_gpu-1.0+gfx942-py3-none-any.whl",
                                               "one_gpu-1.0-py3-none-any.whl", "pure-2.0-py3-none-any.whl"]
    assert not any("demo_gpu-1.0-py3" in fn for listed in result.indexes.values() for fn in listed)
    for target in ("gfx90a", "gfx942"):
        site = tmp_path / f"site-{target}"
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-cache-dir", "--no-deps",
                               "--index-url", (out / target / "simple").as_uri(), "--target", str(site), "demo-gpu"],
                              env={**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert (site / f"demo_gpu-1.0+{target}.dist-info").is_dir()
        assert audit_file(site / "demo_gpu" / "_k.so").targets == [target]


def test_split_is_reused_and_cleaned_up(tmp_path):
    wd, out = wheels(tmp_path), tmp_path / "out"
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
    wd = tmp_path / "wheels"
    make_wheel(wd, "bad", "1.0", members={"bad/_k.so": (BIN / "bad_hip_bundle_count.so").read_bytes()}, stamp=False)
    make_wheel(wd, "one-gpu", "1.0", members={"one_gpu/k.co": (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes()},
               stamp=False)
    result = build_index(wd, tmp_path / "out", split=True)
    assert result.skipped["bad-1.0-py3-none-any.whl"].startswith("cannot be split: ")
    assert "impossible" in result.skipped["bad-1.0-py3-none-any.whl"]
    assert not (tmp_path / "out" / ".split").exists() or not any((tmp_path / "out" / ".split").iterdir())
    assert "one_gpu-1.0-py3-none-any.whl" in result.indexes["gfx942"]
