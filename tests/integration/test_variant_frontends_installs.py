"""Variant wheels only where the frontend takes them back, with real frontends on the tiny
gfx942 project (``helpers.variant_project``): ``uv pip install`` of the source folder and of
its sdist (uv builds into its cache and would call a variant wheel "not compatible") installs
the plain wheel; ``uv build`` of the sdist keeps the variant. How the frontend is told:
tests/unit/test_variant_frontends.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import variant_build_env, variant_project


def _run(argv, tmp_path):
    return subprocess.run(
        [str(a) for a in argv], env=variant_build_env(tmp_path), capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize("source", ["folder", "sdist"])
def test_uv_pip_install_of_a_variant_project_installs_the_plain_wheel(tmp_path, source):
    uv = shutil.which("uv") or pytest.skip("uv is not installed")
    proj = variant_project(tmp_path)
    what: Path = proj
    if source == "sdist":
        proc = _run(
            [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", tmp_path / "sd", proj], tmp_path
        )
        assert proc.returncode == 0, proc.stderr
        (what,) = (tmp_path / "sd").glob("*.tar.gz")
    site = tmp_path / "site"
    proc = _run(
        [
            uv,
            "pip",
            "install",
            "-v",
            "--python",
            sys.executable,
            "--no-build-isolation",
            "--cache-dir",
            tmp_path / "uv-cache",
            "--target",
            site,
            what,
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "uv installs what it builds only as a plain wheel" in proc.stderr
    (info,) = site.glob("demo_v-1.0.dist-info")
    assert (info / "rocm_build.json").is_file() and not (info / "variant.json").exists()
    assert (site / "demo_v" / "k.hsaco").is_file()


def test_uv_build_of_the_sdist_keeps_the_variant(tmp_path):
    uv = shutil.which("uv") or pytest.skip("uv is not installed")
    proj, out = variant_project(tmp_path), tmp_path / "dist"
    proc = _run([uv, "build", "--no-build-isolation", "--python", sys.executable, "--out-dir", out, proj], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = out.glob("*.whl")  # built from the sdist uv made first, in uv's temporary copy
    assert wheel.name == "demo_v-1.0-py3-none-any-gfx942.whl"
    with zipfile.ZipFile(wheel) as zf:
        assert "demo_v-1.0.dist-info/variant.json" in zf.namelist()
