"""The shim and the install side with the oldest and the newest build tools users run.

Each set of ``tests/version_matrix.json`` gets a virtual environment of its own with exactly
those versions of pip, setuptools, wheel, build, uv, scikit-build-core and hatchling (the
oldest the docs promise; the newest on the index), and the shim installed from a wheel of this
tree (with its own dependencies at the set's versions). Every frontend then builds a real HIP
sample through the shim with real hipcc, and the install side (``rocm-build-backend install``,
which drives that environment's pip) installs the result. The wheels must hold exactly the
asked targets, stamped.

CI runs the cells the file marks ``ci``; ``tools/matrix.sh`` (``ROCM_BUILD_BACKEND_MATRIX=full``)
runs every cell. Installing a set needs pip's configured index.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.api import read_stamp
from helpers import ROOT, TESTS, clean_build_env, copy_sample, only_wheel, run

MATRIX = json.loads((TESTS / "version_matrix.json").read_text())
FULL = os.environ.get("ROCM_BUILD_BACKEND_MATRIX") == "full"
FRONTENDS = ("pip-wheel", "python-build", "uv-build", "skbuild", "hatchling", "install")
CELLS = [(s, f) for s in MATRIX["sets"] for f in FRONTENDS if FULL or [s, f] in MATRIX["ci"]]

pytestmark = pytest.mark.skipif(not shutil.which("hipcc"), reason="hipcc is not installed")


@pytest.fixture(scope="session")
def shim_wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shim")
    proc = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", out, ROOT])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return next(out.glob("*.whl"))


_VENVS: dict[str, Path] = {}


def venv_for(name: str, shim: Path, base: Path) -> Path:
    """The set's environment (made once per session): its python."""
    if name in _VENVS:
        return _VENVS[name]
    pins = MATRIX["sets"][name]
    home = base / name
    subprocess.run([sys.executable, "-m", "venv", home], check=True)
    python = home / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")}
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    first = run([*pip, "--upgrade", f"pip=={pins['pip']}" if pins["pip"] else "pip"], env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    reqs = [f"{k}=={v}" if v else k for k, v in pins.items() if k != "pip"]
    proc = run([*pip, "--upgrade", *reqs, shim], env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _VENVS[name] = python
    return python


def versions(python: Path) -> dict[str, str]:
    code = ("import importlib.metadata as m, json, sys; "
            "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))")
    names = list(MATRIX["sets"]["oldest"])
    return json.loads(subprocess.run([python, "-c", code, *names], capture_output=True, text=True, check=True).stdout)


def stamped_targets(wheel: Path) -> tuple[list[str], list[list[str]]]:
    """What the stamp says was asked for, and what its audit found in each file."""
    stamp = read_stamp(wheel)
    assert stamp is not None
    return list(stamp["requested"]["targets"]), [f["targets"] for f in stamp["audit"]["files"].values()]


@pytest.mark.parametrize(("name", "frontend"), CELLS, ids=[f"{s}-{f}" for s, f in CELLS])
def test_a_frontend_of_the_set_builds_through_the_shim(tmp_path, tmp_path_factory, shim_wheel, name, frontend):
    python = venv_for(name, shim_wheel, tmp_path_factory.getbasetemp() / "matrix-venvs")
    pins = {k: v for k, v in MATRIX["sets"][name].items() if v}
    got = versions(python)
    assert {k: got[k] for k in pins} == pins  # the set is what runs, not what was there before
    env = {**clean_build_env(tmp_path), "HIP_PLATFORM": "amd", "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)  # the shim from the set's environment, not from this tree
    out = tmp_path / "out"
    sample = "skbuild_hip" if frontend == "skbuild" else "hatch_pure" if frontend == "hatchling" else "setuptools_hip"
    project = copy_sample(sample, tmp_path)
    target = "gfx908" if frontend in ("python-build", "install") else "gfx90a"
    env["ROCM_BUILD_BACKEND_TARGETS"] = target
    if frontend in ("pip-wheel", "skbuild", "hatchling", "install"):
        argv = [python, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", out, project.resolve()]
    elif frontend == "python-build":
        argv = [python, "-m", "build", "--wheel", "--no-isolation", "-o", out, project]
    else:
        argv = [python.parent / "uv", "build", "--wheel", "--no-build-isolation", "-o", out, "--python", python, project]
    proc = run(argv, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheel = only_wheel(out)
    if frontend == "hatchling":  # a pure project: the shim passes it through, no device code, no stamp
        with zipfile.ZipFile(wheel) as zf:
            assert not any(n.endswith(".so") for n in zf.namelist())
        return
    assert stamped_targets(wheel) == ([target], [[target]])
    if frontend == "install":
        done = run([python.parent / "rocm-build-backend", "install", "--targets", target, "--python", python, "--", wheel],
                   env=env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "rocm-sample-hip 0.1.0" in done.stdout and "loads here" in done.stdout
        shown = run([python, "-m", "pip", "show", "rocm-sample-hip"], env=env)
        assert shown.returncode == 0 and "Version: 0.1.0" in shown.stdout
