"""``check --env`` sees an editable install of the HIP sample built for gfx90a, made by real pip
(setuptools' PEP 660 finder, and its compat mode's ``.pth`` path entry) and uv in a venv, and
checks that environment against gfx942 and gfx90a. How each pointer is read:
tests/unit/test_check_editable.py.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from helpers import copy_sample, run


def venv(tmp_path: Path) -> Path:
    """A venv that sees this interpreter's packages (setuptools, the shim) and pip."""
    run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", tmp_path / "venv"], check=True)
    return tmp_path / "venv" / "bin" / "python"


def check_env(python: Path, targets: str, env: dict) -> tuple[int, str]:
    proc = run(
        [sys.executable, "-m", "rocm_build_backend", "check", "--env", python, "--targets", targets, "--no-cache"],
        env=env,
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("how", ["pip", "pip-compat", "uv"])
def test_check_env_sees_an_editable_install(tmp_path, build_env, how):
    if how == "uv" and not shutil.which("uv"):
        pytest.skip("uv is not installed")
    project = copy_sample("setuptools_hip", tmp_path)
    python = venv(tmp_path)
    settings = ["-C", "rocm-build-backend.targets=gfx90a"]
    if how == "pip-compat":  # setuptools' compat mode: a .pth path entry instead of a finder
        settings += ["-C", "editable_mode=compat"]
    if how == "uv":
        argv = [
            "uv",
            "pip",
            "install",
            "--python",
            python,
            "--no-build-isolation",
            "--no-deps",
            "--cache-dir",
            tmp_path / "uv-cache",
            *settings,
            "-e",
            project,
        ]
    else:
        argv = [python, "-m", "pip", "install", "--no-build-isolation", "--no-deps", *settings, "-e", project]
    proc = run(argv, env=build_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    so = next(project.glob("rocm_sample_hip/_kernels*.so"))
    code, out = check_env(python, "gfx942", build_env)
    assert code == 1, out
    assert f"rocm-sample-hip: gfx942: {so} has code for gfx90a, not for gfx942" in out, out
    code, out = check_env(python, "gfx90a", build_env)
    assert code == 0, out
