"""``build_index(..., split=True)``: pip installs the split wheel for its target from the
per-target index.
"""

from __future__ import annotations

import os
import subprocess
import sys

from rocm_build_backend.binary.audit import audit_file
from rocm_build_backend.wheel.index.run import build_index
from helpers import split_wheels, TESTS

BIN = TESTS / "data" / "binaries"
FAT = BIN / "hip_gfx90a_gfx942_cov5.so"  # one offload bundle: gfx90a and gfx942


def test_split_indexes_the_per_target_wheels_and_pip_installs_the_right_one(tmp_path):
    wd, out = split_wheels(tmp_path), tmp_path / "out"
    result = build_index(wd, out, split=True)
    assert result.skipped == {}
    assert sorted(result.indexes["gfx90a"]) == ["demo_gpu-1.0+gfx90a-py3-none-any.whl", "pure-2.0-py3-none-any.whl"]
    assert sorted(result.indexes["gfx942"]) == [
        "demo_gpu-1.0+gfx942-py3-none-any.whl",
        "one_gpu-1.0-py3-none-any.whl",
        "pure-2.0-py3-none-any.whl",
    ]
    assert not any("demo_gpu-1.0-py3" in fn for listed in result.indexes.values() for fn in listed)
    for target in ("gfx90a", "gfx942"):
        site = tmp_path / f"site-{target}"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--no-cache-dir",
                "--no-deps",
                "--index-url",
                (out / target / "simple").as_uri(),
                "--target",
                str(site),
                "demo-gpu",
            ],
            env={**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        assert (site / f"demo_gpu-1.0+{target}.dist-info").is_dir()
        assert audit_file(site / "demo_gpu" / "_k.so").targets == [target]
