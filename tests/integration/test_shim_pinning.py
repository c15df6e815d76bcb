"""Declaring the shim safely in ``[build-system] requires`` (the README's recipes), with build
isolation and real frontends:

- the risk: any other source that offers a higher version of the name wins, and its code runs
  as the build backend (an impostor wheel in a second find-links folder stands for an upload
  to a public index);
- hash-pinned build constraints (``uv pip compile --generate-hashes``) install exactly the
  shim's own wheel (``python -m build``, pip, uv): an impostor of the same version is refused
  before it runs;
- a private index made by ``rocm-build-backend index`` from the shim's wheel, its
  dependencies and the real backend, used as the only index: the build needs nothing else.

The shim's dependencies and setuptools come from pip's configured index (skipped when none is
reachable).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from helpers import ROOT, copy_sample, only_wheel, run
from rocm_build_backend._version import __version__
from rocm_build_backend.wheel.stamp import read_stamp
from helpers import make_wheel


IMPOSTOR = """\
import sys


def _impostor(*args, **kwargs):
    sys.stderr.write("IMPOSTOR ran as the build backend\\n")
    raise SystemExit(1)


build_wheel = build_sdist = get_requires_for_build_wheel = get_requires_for_build_sdist = _impostor
"""
UNREACHABLE = "No matching distribution found for"


@pytest.fixture(scope="module")
def shim_wheels(tmp_path_factory) -> Path:
    """A folder with the shim's wheel, its dependencies and setuptools, for this machine."""
    folder = tmp_path_factory.mktemp("build-wheels")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", folder, ROOT],
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-d",
            folder,
            "--find-links",
            folder,
            f"rocm-build-backend=={__version__}",
            "setuptools>=64",
        ],
        env=env,
    )
    if proc.returncode != 0 and UNREACHABLE in proc.stdout + proc.stderr:
        pytest.skip("no package index reachable for the shim's dependencies and setuptools")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder


def _project(tmp_path: Path, requirement: str) -> Path:
    project = copy_sample("pure_python", tmp_path)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"rocm-build-backend"', json.dumps(requirement)))
    return project


def _impostor(folder: Path, version: str) -> Path:
    return make_wheel(
        folder,
        "rocm-build-backend",
        version,
        stamp=False,
        members={"rocm_build_backend/__init__.py": IMPOSTOR.encode()},
    )


def _env(build_env: dict, **extra: str) -> dict:
    env = {
        k: v
        for k, v in build_env.items()
        if k not in ("PYTHONPATH", "PIP_FIND_LINKS", "PIP_CONSTRAINT", "PIP_BUILD_CONSTRAINT", "PIP_INDEX_URL")
    }
    return {**env, "ROCM_BUILD_BACKEND_TARGETS": "gfx90a", **extra}


def _build(project: Path, out: Path, env: dict, frontend: str = "build"):
    if frontend == "build":
        return run([sys.executable, "-m", "build", "--wheel", "--outdir", out, project], env=env)
    if frontend == "uv":
        return run([shutil.which("uv"), "build", "--wheel", "--python", sys.executable, "-o", out, project], env=env)
    return run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", out, project], env=env)


def test_without_a_pin_a_higher_version_from_another_source_runs(tmp_path, build_env, shim_wheels):
    """The risk the README names: the shim's own wheel is there, yet the impostor is installed."""
    _impostor(tmp_path / "elsewhere", "99.0")
    env = _env(build_env, PIP_FIND_LINKS=f"{shim_wheels} {tmp_path / 'elsewhere'}")
    proc = _build(_project(tmp_path, "rocm-build-backend"), tmp_path / "dist", env)
    assert proc.returncode != 0 and "IMPOSTOR ran as the build backend" in proc.stdout + proc.stderr


@pytest.mark.parametrize("frontend", ["build", "pip", "uv"])
def test_hash_pinned_build_constraints_take_only_the_shims_own_wheel(tmp_path, build_env, shim_wheels, frontend):
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    (tmp_path / "build-requirements.in").write_text(f"rocm-build-backend=={__version__}\nsetuptools>=64\n")
    proc = run(
        [
            uv,
            "pip",
            "compile",
            "-q",
            "--generate-hashes",
            "--find-links",
            shim_wheels,
            "build-requirements.in",
            "-o",
            "build-constraints.txt",
        ],
        cwd=tmp_path,
        env=_env(build_env),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    constraints = str(tmp_path / "build-constraints.txt")
    # python -m build installs its environment with a plain pip install; pip applies build constraints
    variable = {"build": "PIP_CONSTRAINT", "pip": "PIP_BUILD_CONSTRAINT", "uv": "UV_BUILD_CONSTRAINT"}[frontend]
    links = "UV_FIND_LINKS" if frontend == "uv" else "PIP_FIND_LINKS"
    project = _project(tmp_path, f"rocm-build-backend=={__version__}")

    proc = _build(
        project, tmp_path / "dist", _env(build_env, **{links: str(shim_wheels), variable: constraints}), frontend
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert read_stamp(only_wheel(tmp_path / "dist"))["requested"]["targets"] == ["gfx90a"]

    # an impostor of the very same version, offered instead of ours: refused, never run
    others = tmp_path / "others"
    shutil.copytree(shim_wheels, others, ignore=shutil.ignore_patterns("rocm_build_backend-*"))
    _impostor(others, __version__)
    proc = _build(project, tmp_path / "dist2", _env(build_env, **{links: str(others), variable: constraints}), frontend)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "IMPOSTOR" not in text
    refusal = "Hash mismatch for `rocm-build-backend" if frontend == "uv" else "DO NOT MATCH THE HASHES"
    assert refusal in text, text[-3000:]


@pytest.mark.parametrize("frontend", ["build", "pip"])
def test_a_private_index_of_the_shim_is_all_an_isolated_build_needs(tmp_path, build_env, shim_wheels, frontend):
    out = tmp_path / "build-index"
    proc = run(
        [sys.executable, "-m", "rocm_build_backend", "index", shim_wheels, "-o", out, "--targets", "gfx90a", "--json"],
        env={**build_env, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    page = json.loads((out / "gfx90a" / "simple" / "rocm-build-backend" / "index.json").read_text())
    assert [f["filename"] for f in page["files"]] == [f"rocm_build_backend-{__version__}-py3-none-any.whl"]
    env = _env(build_env, PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=(out / "gfx90a" / "simple").as_uri())
    env.pop("PIP_EXTRA_INDEX_URL", None)
    proc = _build(_project(tmp_path, f"rocm-build-backend=={__version__}"), tmp_path / "dist", env, frontend)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert read_stamp(only_wheel(tmp_path / "dist"))["requested"]["targets"] == ["gfx90a"]
