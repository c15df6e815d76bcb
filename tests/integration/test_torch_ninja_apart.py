"""torch's ninja builds side by side: four extensions of torch's BuildExtension (ninja, its default),
built through the shim, each in a build_temp and build.ninja of its own, four at once; the wheel
holds the four modules and they import."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from helpers import PROJECTS, ROOT, only_wheel, run

pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(shutil.which("ninja") is None, reason="needs ninja")


def test_four_ninja_extensions_at_once_each_in_its_own_build_temp(tmp_path, build_env):
    src = tmp_path / "torch_ninja_four"
    shutil.copytree(PROJECTS / "torch_ninja_four", src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    out = tmp_path / "out"
    proc = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            out,
            src,
            "-C",
            "rocm-build-backend.targets=gfx90a",
            "-C",
            "rocm-build-backend.max-jobs=4",
            "-C",
            "rocm-build-backend.compiler-cache=off",
        ],
        env=dict(build_env, PYTHONPATH=str(ROOT)),
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert "build_ext parallel = 4 (torch's ninja builds, each extension in a build_temp" in log
    ninjas = sorted(src.glob("build/temp*/rbb-ext-*/build.ninja"))
    assert [p.parent.name for p in ninjas] == [f"rbb-ext-torch_ninja_four.e{i}" for i in range(4)]
    for i, ninja in enumerate(ninjas):
        text = ninja.read_text()
        assert f"csrc/e{i}.cpp" in text and all(f"csrc/e{j}.cpp" not in text for j in range(4) if j != i)
    wheel = only_wheel(out)
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        assert len([n for n in zf.namelist() if n.endswith(".so")]) == 4
        zf.extractall(site)
    probe = "import torch, torch_ninja_four.e0, torch_ninja_four.e1, torch_ninja_four.e2, torch_ninja_four.e3"
    subprocess.run([sys.executable, "-c", probe], cwd=site, check=True, timeout=120)
