"""``rocm-build-backend build`` and ``install`` end to end: the exit code for each cause a build
stops for, as the README's table gives it (1 refused or failed, 2 a bad setting, 3 no GPU found),
and their ``--json`` documents against the shipped schemas. Real projects, real compilers (hipcc
5.2, clang-19), a real stale tree left by a real build, no GPU through an empty sysfs root.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers import DATA, assert_valid_stamp, copy_sample, make_wheel, run, validate_json

CLI = [sys.executable, "-m", "rocm_build_backend"]


def build(project: Path, out: Path, env: dict, *args: str):
    return run([*CLI, "build", project, "-o", out, *args], env=env)


def last_error(proc) -> list[str]:
    """The command's own closing lines: its error and its hint."""
    return proc.stderr.strip().splitlines()[-2:]


def test_a_build_prints_json_and_a_rebuild_for_other_targets_is_refused_as_stale(tmp_path, build_env):
    project = copy_sample("setuptools_hip", tmp_path)
    proc = build(project, tmp_path / "dist", build_env, "--targets", "gfx90a", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = validate_json("build", proc.stdout)
    wheel = Path(doc["wheel"])
    assert wheel.parent == tmp_path / "dist" and wheel.is_file() and doc["project"] == str(project)
    assert doc["targets"] == ["gfx90a"] and doc["stamp"] == assert_valid_stamp(wheel)
    assert doc["stamp"]["audit"]["targets"] == ["gfx90a"] and doc["stale_wheels"] == []
    assert "rocm-build-backend: built " in proc.stderr  # the log stays on stderr
    # the tree that build left is for gfx90a: a build for gfx940 stops before compiling
    again = build(project, tmp_path / "dist", build_env, "--targets", "gfx940")
    assert again.returncode == 1, again.stderr
    error, hint = last_error(again)
    assert error.startswith("error: building setuptools_hip stopped: build trees made for other GPU targets")
    assert "gfx90a" in error and hint.startswith('hint: set stale = "clean"')
    assert again.stdout == ""


def test_a_compiler_that_rejects_the_target_exits_1(tmp_path, build_env):
    project = copy_sample("setuptools_hip", tmp_path)
    env = {**build_env, "HIP_PLATFORM": "amd"}
    proc = build(project, tmp_path / "dist", env, "--targets", "gfx942", "-C", "rocm-build-backend.compiler=hipcc")
    assert proc.returncode == 1, proc.stderr
    error, _hint = last_error(proc)
    assert error.startswith("error: building setuptools_hip stopped: hipcc") and "cannot emit code for gfx942" in error
    assert not list((tmp_path / "dist").glob("*.whl"))  # stopped before the build


def test_a_wheel_without_the_requested_target_exits_1(tmp_path, build_env):
    project = copy_sample("hardcoded_gfx908", tmp_path)  # clang-19 with --offload-arch=gfx908, whatever is asked
    proc = build(project, tmp_path / "dist", build_env, "--targets", "gfx90a")
    assert proc.returncode == 1, proc.stderr
    error, _hint = last_error(proc)
    assert error.startswith("error: building hardcoded_gfx908 stopped:") and "gfx90a" in error and "gfx908" in error


def test_no_gpu_found_exits_3(tmp_path, build_env):
    project = copy_sample("setuptools_hip", tmp_path)
    (tmp_path / "empty-root").mkdir()
    proc = build(
        project, tmp_path / "dist", build_env, "-C", f"rocm-build-backend.sysfs-root={tmp_path / 'empty-root'}"
    )
    assert proc.returncode == 3, proc.stderr
    error, hint = last_error(proc)
    assert error.startswith("error: building setuptools_hip stopped: no GPU found")
    assert hint.startswith("hint: ") and "ROCM_BUILD_BACKEND_TARGETS=" in hint


def test_an_unknown_target_exits_2(tmp_path, build_env):
    project = copy_sample("setuptools_hip", tmp_path)
    proc = build(project, tmp_path / "dist", build_env, "--targets", "gfx9422")
    assert proc.returncode == 2, proc.stderr
    error, hint = last_error(proc)
    # refused before the build starts, naming the option typed, with no hint to run another command
    assert error.startswith("error: unknown GPU target 'gfx9422' in --targets (did you mean 'gfx942'")
    assert hint == "hint: see the known targets: rocm-build-backend targets"


def test_a_failing_backend_exits_1(tmp_path, build_env):
    project = tmp_path / "broken"
    (project / "broken_pkg").mkdir(parents=True)
    (project / "broken_pkg" / "__init__.py").write_text("")
    (project / "setup.py").write_text("raise RuntimeError('this project does not build')\n")
    proc = build(project, tmp_path / "dist", build_env, "--targets", "gfx90a")
    assert proc.returncode == 1, proc.stderr
    assert "this project does not build" in proc.stderr
    assert last_error(proc)[0] == "error: building broken failed (see the lines above)"


def test_install_json(tmp_path):
    links = tmp_path / "links"
    make_wheel(
        links,
        "demo-gpu",
        "1.0",
        members={"demo_gpu/k.co": (DATA / "binaries" / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes()},
        stamp=False,
    )
    pip = ["--", "--no-index", "--find-links", links, "--no-cache-dir", "--target", tmp_path / "site", "demo-gpu"]
    refused = run([*CLI, "install", "--json", "--targets", "gfx942", *pip])
    doc = validate_json("install", refused.stdout)
    assert refused.returncode == doc["exit_code"] == 1
    (row,) = doc["distributions"]
    assert (row["name"], row["origin"], row["targets"], row["status"], row["refused"]) == (
        "demo-gpu",
        "index",
        ["gfx90a:xnack+"],
        "fails",
        True,
    )
    assert doc["installed"] is False and not (tmp_path / "site").exists()
    dry = run([*CLI, "install", "--json", "--dry-run", "--targets", "gfx90a:xnack+", *pip])
    doc = validate_json("install", dry.stdout)
    assert dry.returncode == doc["exit_code"] == 0
    assert (doc["dry_run"], doc["installed"], doc["distributions"][0]["status"]) == (True, False, "ok")
    assert json.loads(dry.stdout) == doc
