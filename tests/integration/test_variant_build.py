"""``variant = true``: a build through the shim hands back a variant wheel (real frontends).

The project is tiny: setuptools with a real gfx942 code object as package data, so the audit
finds gfx942 without a compiler. ``python -m build`` and ``uv build`` keep the variant wheel;
under pip (which rejects variant wheels) the plain wheel is kept with a warning.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from rocm_build_backend.wheel.variant import properties as V
from helpers import variant_build_env as env, variant_project as project


def only(folder: Path) -> Path:
    (wheel,) = folder.glob("*.whl")
    return wheel


def assert_variant(wheel: Path) -> None:
    assert wheel.name == "demo_v-1.0-py3-none-any-gfx942.whl"
    label, data = V.read_variant(wheel)
    assert label == "gfx942" and data["variants"] == {"gfx942": {"amd": {"gfx_arch": ["gfx942"]}}}
    names = zipfile.ZipFile(wheel).namelist()
    assert "demo_v-1.0.dist-info/rocm_build.json" in names  # stamped first, then made a variant


@pytest.mark.parametrize("frontend", ["build", "uv"])
def test_build_frontends_keep_the_variant_wheel(tmp_path, frontend):
    proj, out = project(tmp_path), tmp_path / "dist"
    if frontend == "build":
        argv = [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out), str(proj)]
    else:
        uv = shutil.which("uv") or pytest.skip("uv is not installed")
        argv = [
            uv,
            "build",
            "--no-build-isolation",
            "--wheel",
            "--python",
            sys.executable,
            "--out-dir",
            str(out),
            str(proj),
        ]
    proc = subprocess.run(argv, env=env(tmp_path), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_variant(only(out))
    assert [p.name for p in out.glob("*.whl")] == ["demo_v-1.0-py3-none-any-gfx942.whl"]  # no plain one left


def test_pip_keeps_the_plain_wheel_and_says_why(tmp_path):
    proj, out = project(tmp_path), tmp_path / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v", "-w", str(out), str(proj)],
        env=env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pip rejects variant wheels: keeping the plain wheel" in proc.stdout + proc.stderr
    wheel = only(out)
    assert wheel.name == "demo_v-1.0-py3-none-any.whl"
    assert "demo_v-1.0.dist-info/variant.json" not in zipfile.ZipFile(wheel).namelist()
