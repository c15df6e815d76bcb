"""Where pip and uv keep their caches: our reading of their variables and configuration files.
Held to the real tools' own answers (``pip cache dir``, ``uv cache dir``) in
tests/integration/test_cache_dirs_tools.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import shutil

import pytest

from rocm_build_backend.wheel.cache.dirs import find_caches
from helpers import ROOT, write_file

UV = shutil.which("uv")


@pytest.fixture
def world(tmp_path):
    """A clean environment: a home of its own, no PIP_/UV_/XDG_ variables."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "XDG_"))}
    env["HOME"] = str(home)
    return tmp_path, home, env


def test_pip_install_section_overrides_global(world):
    tmp, home, env = world
    write_file(home / ".config/pip/pip.conf", f"[global]\ncache-dir = {tmp}/g\n[install]\ncache-dir = {tmp}/i\n")
    found = [loc for loc in find_caches(env, home=home, cwd=tmp) if loc.tool == "pip"]
    assert [loc.path for loc in found] == [tmp / "i", tmp / "g"]  # pip install's, then pip wheel's
    assert found[0].source.endswith("pip.conf [install] cache-dir (pip agrees)")  # pip config list
    read = [loc for loc in find_caches(env, home=home, cwd=tmp, ask=False) if loc.tool == "pip"]
    assert [loc.path for loc in read] == [tmp / "i", tmp / "g"]
    assert read[0].source.endswith("pip.conf [install] cache-dir")


def test_cache_list_reads_the_configured_caches_and_says_from_where(world):
    tmp, home, env = world
    (tmp / "pipc/wheels").mkdir(parents=True)
    (tmp / "uvc/archive-v0").mkdir(parents=True)
    conf = write_file(tmp / "cfg/pip.conf", f"[global]\ncache-dir = {tmp}/pipc\n")
    write_file(tmp / "home/.config/uv/uv.toml", f'cache-dir = "{tmp}/uvc"\n')
    env.update(PIP_CONFIG_FILE=str(conf), PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", "cache", "list", "--targets", "gfx90a", "--json"],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    caches = json.loads(proc.stdout)["caches"]
    assert [(c["tool"], c["path"]) for c in caches] == [("pip", f"{tmp}/pipc"), ("uv", f"{tmp}/uvc")]
    assert caches[0]["source"] == f"{conf} [global] cache-dir (pip agrees)"
    assert caches[1]["source"] == f"{tmp}/home/.config/uv/uv.toml cache-dir" + (" (uv agrees)" if UV else "")


def test_cache_without_a_gpu_suggests_its_own_option(world):
    tmp, home, env = world
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", "cache", "list", "--root", str(tmp)],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "--targets" in proc.stderr and "ROCM_BUILD_BACKEND_TARGETS" not in proc.stderr, proc.stderr
