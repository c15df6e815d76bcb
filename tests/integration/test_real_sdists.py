"""Real inputs: the pinned sdists of the profiled projects (tests/real_sdists.json).

Each sdist is downloaded once from PyPI into the test cache (see tests/helpers.py) and checked
against its sha256; only its pyproject.toml, setup.py, setup.cfg, PKG-INFO and the files
profiles.json cites are kept. No network and no filled cache is a failure that says so, not a
skip; ``-m "not realinputs"`` deselects these tests.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_build_backend.builder.profiles import all_profiles, profile_for, select_profile
from rocm_build_backend.builder.configure import SHIM, configure
from rocm_build_backend.builder.projectname import find_name
from rocm_build_backend.gpu.targets import parse_targets
from helpers import copy_tree, CorpusError, load_pins, ROOT, sdist_tree

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PINS = load_pins()
TARGETS = parse_targets("gfx942")


@pytest.fixture(scope="module", params=PINS, ids=[p["name"] for p in PINS])
def real(request):
    return request.param, _tree(request.param)


def _tree(pin: dict) -> Path:
    """The pin's extracted files; a failed download fails the test with its one-line reason."""
    problem = None
    try:
        return sdist_tree(pin)
    except CorpusError as exc:
        problem = str(exc)
    pytest.fail(problem, pytrace=False)


def _toml(folder: Path) -> dict:
    file = folder / "pyproject.toml"
    return tomllib.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}


def _others(data: dict) -> dict:
    out = {k: v for k, v in data.items() if k != "build-system"}
    tool = {k: v for k, v in (out.pop("tool", None) or {}).items() if k != "rocm-build-backend"}
    return {**out, "tool": tool}


@pytest.mark.realinputs
def test_each_project_gets_its_profile(real):
    pin, tree = real
    name, where = find_name(tree, _toml(tree))
    assert name is not None, pin["name"]
    assert select_profile("auto", name).name == pin["profile"], (name, where)
    if "project" not in _toml(tree) or "name" not in _toml(tree)["project"]:
        assert where == "PKG-INFO"  # a setup.py project: the sdist's metadata names it


@pytest.mark.realinputs
def test_configure_changes_only_build_system_and_our_table(real, tmp_path):
    pin, tree = real
    project = copy_tree(tree, tmp_path / pin["name"])
    before = _toml(project)
    result = configure(project)
    assert result.changed
    after = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    assert _others(after) == _others(before)
    assert after["build-system"]["build-backend"] == SHIM
    old_requires = (before.get("build-system") or {}).get("requires", [])
    assert after["build-system"]["requires"][: len(old_requires)] == old_requires
    assert after["build-system"]["requires"][-1] == "rocm-build-backend"
    assert after["tool"]["rocm-build-backend"]["backend"] == pin["backend"]
    assert configure(project).changed is False


def _plan(project: Path, env: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", "plan", str(project), "--json",
         "-C", "rocm-build-backend.targets=gfx942", "-C", "rocm-build-backend.compiler-check=false"],
        capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.realinputs
def test_plan_names_the_backend_profile_and_knobs(real, tmp_path, build_env):
    pin, tree = real
    project = copy_tree(tree, tmp_path / pin["name"])
    configure(project)
    build_env["PYTHONPATH"] = str(ROOT)
    data = _plan(project, build_env)
    assert data["profile"] == pin["profile"]
    assert data["backend"] == pin["backend"]
    profile = profile_for(pin["name"]) or select_profile("auto", pin["name"])
    for var, value in profile.env(TARGETS).items():
        assert data["env"][var] == value, var
    for var, value in profile.cmake_defines(TARGETS).items():
        if pin["backend"].startswith("scikit_build_core"):
            assert data["config_settings"][f"cmake.define.{var}"] == value
        else:
            assert f"-D{var}={value}" in data["env"]["CMAKE_ARGS"]


@pytest.mark.realinputs
def test_plan_of_the_unconfigured_sdist_names_the_profile(real, tmp_path, build_env):
    pin, tree = real
    build_env["PYTHONPATH"] = str(ROOT)
    assert _plan(copy_tree(tree, tmp_path / pin["name"]), build_env)["profile"] == pin["profile"]

_CITE = re.compile(r"^(?P<path>[\w./-]+) L(?P<line>\d+)")


def _cited_sdist(profile) -> dict | None:
    return next((p for p in PINS if profile.source.startswith(f"{p['name']} {p['version']} sdist")), None)


def _citations():
    for profile in all_profiles():
        if _cited_sdist(profile) is None:
            continue
        for item in (*profile.variables, *profile.conflicts):
            yield pytest.param(profile.name, item.name, item.source, id=f"{profile.name}-{item.name}")


@pytest.mark.realinputs
@pytest.mark.parametrize(("profile_name", "name", "source"), list(_citations()))
def test_each_citation_names_its_variable_on_that_line(profile_name, name, source):
    pin = _cited_sdist(next(p for p in all_profiles() if p.name == profile_name))
    tree = _tree(pin)
    m = _CITE.match(source)
    assert m, f"{profile_name} {name}: source {source!r} does not start with 'FILE LNNN'"
    lines = (tree / m["path"]).read_text(encoding="utf-8", errors="replace").splitlines()
    line = lines[int(m["line"]) - 1]
    assert name in line, f"{pin['filename']} {m['path']} L{m['line']}: {line.strip()!r} does not name {name}"
