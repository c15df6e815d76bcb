"""Where pip and uv keep their caches: our reading of their variables and configuration files,
held to the real tools' own answers (``pip cache dir``, ``uv cache dir``) for each mechanism."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_build_backend.wheel.cache.dirs import find_caches
from helpers import write_file
UV = shutil.which("uv")


@pytest.fixture
def world(tmp_path):
    """A clean environment: a home of its own, no PIP_/UV_/XDG_ variables."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "XDG_"))}
    env["HOME"] = str(home)
    return tmp_path, home, env


def ours(tool: str, env: dict, cwd: Path, **kw) -> Path:
    return next(loc.path for loc in find_caches(env, home=Path(env["HOME"]), cwd=cwd, **kw) if loc.tool == tool)


def pip_says(env: dict, cwd: Path, python: str = sys.executable) -> Path:
    out = subprocess.run([python, "-m", "pip", "cache", "dir"], env=env, cwd=cwd, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return cwd / out.stdout.strip()


def uv_says(env: dict, cwd: Path) -> Path:
    out = subprocess.run([UV, "cache", "dir"], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return cwd / out.stdout.strip()


PIP_CASES = {
    "default": {},
    "PIP_CACHE_DIR": {"env": {"PIP_CACHE_DIR": "{t}/from-env"}},
    "PIP_CONFIG_FILE": {"files": {"cfg/pip.conf": "[global]\ncache-dir = {t}/from-config-file\n"},
                        "env": {"PIP_CONFIG_FILE": "{t}/cfg/pip.conf"}},
    "user config": {"files": {"home/.config/pip/pip.conf": "[global]\ncache-dir = {t}/from-user\n"}},
    "XDG_CONFIG_HOME": {"files": {"xdg/pip/pip.conf": "[global]\ncache_dir = {t}/from-xdg-home\n"},
                        "env": {"XDG_CONFIG_HOME": "{t}/xdg"}},
    "legacy user config": {"files": {"home/.pip/pip.conf": "[global]\ncache-dir = ~/from-legacy\n"}},
    "site-wide config": {"files": {"etc-xdg/pip/pip.conf": "[global]\ncache-dir = {t}/from-global\n"},
                         "env": {"XDG_CONFIG_DIRS": "{t}/etc-xdg"}},
    "user over site-wide": {"files": {"etc-xdg/pip/pip.conf": "[global]\ncache-dir = {t}/from-global\n",
                                      "home/.config/pip/pip.conf": "[global]\ncache-dir = {t}/from-user\n"},
                            "env": {"XDG_CONFIG_DIRS": "{t}/etc-xdg"}},
    "PIP_CONFIG_FILE over user": {"files": {"home/.config/pip/pip.conf": "[global]\ncache-dir = {t}/from-user\n",
                                            "cfg/pip.conf": "[global]\nindex-url = https://example.invalid/\n"},
                                  "env": {"PIP_CONFIG_FILE": "{t}/cfg/pip.conf"}},
    "PIP_CACHE_DIR over files": {"files": {"home/.config/pip/pip.conf": "[global]\ncache-dir = {t}/from-user\n"},
                                 "env": {"PIP_CACHE_DIR": "{t}/from-env"}},
    "PIP_CONFIG_FILE=/dev/null": {"files": {"home/.config/pip/pip.conf": "[global]\ncache-dir = {t}/from-user\n"},
                                  "env": {"PIP_CONFIG_FILE": os.devnull}},
}


@pytest.mark.parametrize("case", list(PIP_CASES))
def test_pip_cache_dir_as_pip_finds_it(world, case):
    tmp, home, env = world
    spec = PIP_CASES[case]
    for rel, text in spec.get("files", {}).items():
        write_file(tmp / rel, text.format(t=tmp))
    env.update({k: v.format(t=tmp) for k, v in spec.get("env", {}).items()})
    assert ours("pip", env, tmp) == pip_says(env, tmp)


def test_pip_site_config_of_a_virtual_environment(world):
    tmp, home, env = world
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=300)
    write_file(venv / "pip.conf", f"[global]\ncache-dir = {tmp}/from-site\n")
    python = str(venv / "bin" / "python")
    assert ours("pip", env, tmp, prefix=venv) == pip_says(env, tmp, python) == tmp / "from-site"


UV_CASES = {
    "default": {},
    "UV_CACHE_DIR": {"env": {"UV_CACHE_DIR": "{t}/from-env"}},
    "relative UV_CACHE_DIR": {"env": {"UV_CACHE_DIR": "rel-env"}},
    "project uv.toml": {"files": {"proj/uv.toml": 'cache-dir = "{t}/from-uv-toml"\n'}},
    "project uv.toml, relative": {"files": {"proj/uv.toml": 'cache-dir = "relcache"\n'}},
    "pyproject tool.uv": {"files": {"proj/pyproject.toml": '[project]\nname = "x"\nversion = "0"\n'
                                                           '[tool.uv]\ncache-dir = "{t}/from-pyproject"\n'}},
    "pyproject without tool.uv is passed over": {
        "files": {"proj/uv.toml": 'cache-dir = "{t}/from-uv-toml"\n',
                  "proj/sub/pyproject.toml": '[project]\nname = "y"\nversion = "0"\n'}},
    "user uv.toml": {"files": {"home/.config/uv/uv.toml": 'cache-dir = "{t}/from-user"\n'}},
    "project over user": {"files": {"home/.config/uv/uv.toml": 'cache-dir = "{t}/from-user"\n',
                                    "proj/uv.toml": 'cache-dir = "{t}/from-uv-toml"\n'}},
    "system uv.toml": {"files": {"etc-xdg/uv/uv.toml": 'cache-dir = "{t}/from-system"\n'},
                       "env": {"XDG_CONFIG_DIRS": "{t}/etc-xdg"}},
    "UV_CONFIG_FILE over project": {"files": {"proj/uv.toml": 'cache-dir = "{t}/from-uv-toml"\n',
                                              "my.toml": 'cache-dir = "{t}/from-config-file"\n'},
                                    "env": {"UV_CONFIG_FILE": "{t}/my.toml"}},
    "UV_NO_CONFIG": {"files": {"proj/uv.toml": 'cache-dir = "{t}/from-uv-toml"\n'}, "env": {"UV_NO_CONFIG": "1"}},
}


@pytest.mark.skipif(UV is None, reason="uv is not installed")
@pytest.mark.parametrize("case", list(UV_CASES))
def test_uv_cache_dir_as_uv_finds_it(world, case):
    tmp, home, env = world
    spec = UV_CASES[case]
    for rel, text in spec.get("files", {}).items():
        write_file(tmp / rel, text.format(t=tmp))
    env.update({k: v.format(t=tmp) for k, v in spec.get("env", {}).items()})
    cwd = tmp / "proj" / "sub"
    cwd.mkdir(parents=True, exist_ok=True)
    assert ours("uv", env, cwd) == uv_says(env, cwd)
