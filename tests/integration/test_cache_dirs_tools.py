"""Where pip and uv keep their caches: both ways of finding them, held to the real tools' own
answers (``pip cache dir``, ``uv cache dir``) for each mechanism. Asking the tools (the default)
and reading their variables and files (``ask=False``, and where a tool is missing) must agree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

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


def ours(tool: str, env: dict, cwd: Path, **kw) -> Path:
    """The folder found both ways: the tool asked, and its files read; the same, and said so."""
    asked, read = (
        next(loc for loc in find_caches(env, home=Path(env["HOME"]), cwd=cwd, ask=a, **kw) if loc.tool == tool)
        for a in (True, False)
    )
    assert asked.path == read.path
    assert asked.source == f"{read.source} ({tool} agrees)"
    return read.path


def pip_says(env: dict, cwd: Path, python: str = sys.executable) -> Path:
    out = subprocess.run(
        [python, "-m", "pip", "cache", "dir"], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return cwd / out.stdout.strip()


def uv_says(env: dict, cwd: Path) -> Path:
    out = subprocess.run([UV, "cache", "dir"], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return cwd / out.stdout.strip()


PIP_CASES = {
    "default": {},
    "PIP_CACHE_DIR": {"env": {"PIP_CACHE_DIR": "{t}/from-env"}},
    "empty PIP_CACHE_DIR": {
        "files": {"home/.config/pip/pip.conf": "[global]\ncache-dir = {t}/from-user\n"},
        "env": {"PIP_CACHE_DIR": ""},
    },
    "PIP_CONFIG_FILE": {
        "files": {"cfg/pip.conf": "[global]\ncache-dir = {t}/from-config-file\n"},
        "env": {"PIP_CONFIG_FILE": "{t}/cfg/pip.conf"},
    },
    "user config": {"files": {"home/.config/pip/pip.conf": "[global]\ncache-dir = {t}/from-user\n"}},
    "XDG_CONFIG_HOME": {
        "files": {"xdg/pip/pip.conf": "[global]\ncache_dir = {t}/from-xdg-home\n"},
        "env": {"XDG_CONFIG_HOME": "{t}/xdg"},
    },
    "legacy user config": {"files": {"home/.pip/pip.conf": "[global]\ncache-dir = ~/from-legacy\n"}},
    "site-wide config": {
        "files": {"etc-xdg/pip/pip.conf": "[global]\ncache-dir = {t}/from-global\n"},
        "env": {"XDG_CONFIG_DIRS": "{t}/etc-xdg"},
    },
    "user over site-wide": {
        "files": {
            "etc-xdg/pip/pip.conf": "[global]\ncache-dir = {t}/from-global\n",
            "home/.config/pip/pip.conf": "[global]\ncache-dir = {t}/from-user\n",
        },
        "env": {"XDG_CONFIG_DIRS": "{t}/etc-xdg"},
    },
    "PIP_CONFIG_FILE over user": {
        "files": {
            "home/.config/pip/pip.conf": "[global]\ncache-dir = {t}/from-user\n",
            "cfg/pip.conf": "[global]\nindex-url = https://example.invalid/\n",
        },
        "env": {"PIP_CONFIG_FILE": "{t}/cfg/pip.conf"},
    },
    "PIP_CACHE_DIR over files": {
        "files": {"home/.config/pip/pip.conf": "[global]\ncache-dir = {t}/from-user\n"},
        "env": {"PIP_CACHE_DIR": "{t}/from-env"},
    },
    "PIP_CONFIG_FILE=/dev/null": {
        "files": {"home/.config/pip/pip.conf": "[global]\ncache-dir = {t}/from-user\n"},
        "env": {"PIP_CONFIG_FILE": os.devnull},
    },
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
    "pyproject tool.uv": {
        "files": {
            "proj/pyproject.toml": '[project]\nname = "x"\nversion = "0"\n[tool.uv]\ncache-dir = "{t}/from-pyproject"\n'
        }
    },
    "pyproject without tool.uv is passed over": {
        "files": {
            "proj/uv.toml": 'cache-dir = "{t}/from-uv-toml"\n',
            "proj/sub/pyproject.toml": '[project]\nname = "y"\nversion = "0"\n',
        }
    },
    "user uv.toml": {"files": {"home/.config/uv/uv.toml": 'cache-dir = "{t}/from-user"\n'}},
    "project over user": {
        "files": {
            "home/.config/uv/uv.toml": 'cache-dir = "{t}/from-user"\n',
            "proj/uv.toml": 'cache-dir = "{t}/from-uv-toml"\n',
        }
    },
    "system uv.toml": {
        "files": {"etc-xdg/uv/uv.toml": 'cache-dir = "{t}/from-system"\n'},
        "env": {"XDG_CONFIG_DIRS": "{t}/etc-xdg"},
    },
    "UV_CONFIG_FILE over project": {
        "files": {
            "proj/uv.toml": 'cache-dir = "{t}/from-uv-toml"\n',
            "my.toml": 'cache-dir = "{t}/from-config-file"\n',
        },
        "env": {"UV_CONFIG_FILE": "{t}/my.toml"},
    },
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


def test_a_tools_answer_wins_where_its_files_cannot_be_read(world):
    """A configuration file over 1 MiB is not read here; the tools read it, and their answer wins."""
    tmp, home, env = world
    padding = "#" + "x" * (1 << 20) + "\n"
    conf = write_file(tmp / "big/pip.conf", padding + f"[global]\ncache-dir = {tmp}/big-pip\n")
    write_file(tmp / "proj/uv.toml", padding + f'cache-dir = "{tmp}/big-uv"\n')
    env["PIP_CONFIG_FILE"] = str(conf)
    cwd = tmp / "proj"
    read = {loc.tool: loc for loc in find_caches(env, home=home, cwd=cwd, ask=False)}
    asked = {loc.tool: loc for loc in find_caches(env, home=home, cwd=cwd)}
    assert read["pip"].path == home / ".cache/pip" != pip_says(env, cwd)
    assert (asked["pip"].path, asked["pip"].source) == (tmp / "big-pip", "`pip config list`: [global] cache-dir")
    if UV:
        assert read["uv"].path == home / ".cache/uv" != uv_says(env, cwd)
        assert (asked["uv"].path, asked["uv"].source) == (tmp / "big-uv", "`uv cache dir`")


def test_without_the_tools_their_files_answer(world):
    """uv not on PATH, and a Python with no pip (a virtual environment made without it): the
    variables and files are read, and the folders are the same; ``cache list`` lists pip's
    wheels from the layout (a ``.whl`` named without a version, which ``pip cache list`` never
    lists, shows which way was taken)."""
    tmp, home, env = world
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=300)
    deps = tmp / "deps"
    deps.mkdir()
    for name in ("packaging", "pyproject_hooks", "tomlkit", "backports"):
        (deps / name).symlink_to(Path(__import__(name).__path__[0]))
    write_file(tmp / "pipc/wheels/aa/bb/plain-1.0-py3-none-any.whl", "not a zip")
    write_file(tmp / "pipc/wheels/aa/bb/noversion.whl", "not a zip")
    write_file(tmp / "home/.config/uv/uv.toml", f'cache-dir = "{tmp}/uvc"\n')
    bare = dict(
        env, PATH=str(venv / "bin"), PIP_CACHE_DIR=str(tmp / "pipc"), PYTHONPATH=os.pathsep.join([str(ROOT), str(deps)])
    )
    with_tools = dict(bare, PATH=env["PATH"])
    results = {}
    for name, run_env, python in (("bare", bare, venv / "bin/python"), ("tools", with_tools, sys.executable)):
        proc = subprocess.run(
            [str(python), "-m", "rocm_build_backend", "cache", "list", "--targets", "gfx90a", "--json"],
            env=run_env,
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode in (0, 1), proc.stderr
        results[name] = json.loads(proc.stdout)
    caches = {n: [(c["tool"], c["path"], c["source"]) for c in r["caches"]] for n, r in results.items()}
    assert caches["bare"] == [
        ("pip", f"{tmp}/pipc", "PIP_CACHE_DIR"),
        ("uv", f"{tmp}/uvc", f"{tmp}/home/.config/uv/uv.toml cache-dir"),
    ]
    assert caches["tools"][0] == ("pip", f"{tmp}/pipc", "PIP_CACHE_DIR (pip agrees)")
    if UV:
        assert caches["tools"][1] == ("uv", f"{tmp}/uvc", f"{tmp}/home/.config/uv/uv.toml cache-dir (uv agrees)")
    wheels = {n: sorted(e["wheel"] for e in r["entries"] if e["tool"] == "pip") for n, r in results.items()}
    assert wheels == {"bare": ["noversion.whl", "plain-1.0-py3-none-any.whl"], "tools": ["plain-1.0-py3-none-any.whl"]}
