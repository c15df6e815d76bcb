"""What happens around a build: version labels, stale build trees, the import guard, `build`."""

from __future__ import annotations

import sys
import zipfile

import pytest

from rocm_build_backend.binary.audit import audit_wheel
from rocm_build_backend.wheel.stamp import read_stamp
from helpers import copy_sample, error_lines, kfd_root, only_wheel, pip_wheel, run


def test_local_version_same_in_prepared_metadata_and_wheel(tmp_path, build_env):
    """pip install runs prepare_metadata first, then build_wheel: both must say 0.1.0+gfx90a."""
    project = copy_sample("setuptools_hip", tmp_path)
    target = tmp_path / "site"
    proc = run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-build-isolation",
            "--no-deps",
            "--target",
            target,
            project,
            "-C",
            "rocm-build-backend.targets=gfx90a",
            "-C",
            "rocm-build-backend.local-version=true",
        ],
        env=build_env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [p.name for p in target.glob("*.dist-info")] == ["rocm_sample_hip-0.1.0+gfx90a.dist-info"]
    meta = (target / "rocm_sample_hip-0.1.0+gfx90a.dist-info" / "METADATA").read_text()
    assert "Version: 0.1.0+gfx90a" in meta
    # and the wheel itself, built by environment variable (from a fresh copy: build/ now says gfx90a)
    project = copy_sample("setuptools_hip", tmp_path / "again")
    build_env["ROCM_BUILD_BACKEND_LOCAL_VERSION"] = "true"
    proc = pip_wheel(project, tmp_path / "out", build_env, "rocm-build-backend.targets=gfx90a;gfx940")
    assert proc.returncode == 0, proc.stderr
    wheel = only_wheel(tmp_path / "out")
    assert wheel.name.startswith("rocm_sample_hip-0.1.0+gfx90a.gfx940-")
    with zipfile.ZipFile(wheel) as zf:
        assert "rocm_sample_hip-0.1.0+gfx90a.gfx940.dist-info/rocm_build.json" in zf.namelist()


def test_stale_build_tree_stops_the_next_build_or_is_cleaned(tmp_path, build_env):
    project = copy_sample("setuptools_hip", tmp_path)
    first = pip_wheel(project, tmp_path / "one", build_env, "rocm-build-backend.targets=gfx90a")
    assert first.returncode == 0, first.stderr
    assert (project / "build").is_dir()  # pip builds a local folder in place
    second = pip_wheel(project, tmp_path / "two", build_env, "rocm-build-backend.targets=gfx940")
    assert second.returncode != 0
    text = "\n".join(error_lines(second))
    assert "build" in text and "gfx90a" in text and "gfx940" in text, text
    assert "stale" in text
    third = pip_wheel(
        project, tmp_path / "three", build_env, "rocm-build-backend.targets=gfx940", "rocm-build-backend.stale=clean"
    )
    assert third.returncode == 0, third.stderr
    wheel = only_wheel(tmp_path / "three")
    assert [f.targets for f in audit_wheel(wheel).files if f.targets] == [["gfx940"]]


def test_import_guard(tmp_path, build_env):
    project = copy_sample("setuptools_hip", tmp_path)
    proc = pip_wheel(
        project, tmp_path / "out", build_env, "rocm-build-backend.targets=gfx90a", "rocm-build-backend.guard=true"
    )
    assert proc.returncode == 0, proc.stderr
    wheel = only_wheel(tmp_path / "out")
    site = tmp_path / "site"
    run([sys.executable, "-m", "pip", "install", "--no-deps", "--target", site, wheel], env=build_env, check=True)
    code = "import rocm_sample_hip; print('imported')"
    env = {**build_env, "PYTHONPATH": str(site)}

    ok = run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**env, "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(kfd_root(tmp_path / "a", 90010))},
    )
    assert ok.returncode == 0 and "imported" in ok.stdout, ok.stderr

    moved = run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**env, "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(kfd_root(tmp_path / "b", 90400))},
    )
    assert moved.returncode != 0
    assert "ImportError" in moved.stderr and "gfx940" in moved.stderr and "gfx90a" in moved.stderr
    assert "--no-binary" in moved.stderr  # says how to rebuild

    off = run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={
            **env,
            "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(tmp_path / "b" / "sysroot"),
            "ROCM_BUILD_BACKEND_GUARD_OFF": "1",
        },
    )
    assert off.returncode == 0, off.stderr


def test_build_command_with_the_projects_own_backend(tmp_path, build_env):
    """`rocm-build-backend build` on a project that knows nothing of the shim (setup.py only)."""
    project = tmp_path / "legacy"
    (project / "legacy_pkg").mkdir(parents=True)
    (project / "legacy_pkg" / "__init__.py").write_text("")
    (project / "setup.py").write_text(
        "from setuptools import setup\nsetup(name='legacy-pkg', version='2.0', packages=['legacy_pkg'])\n"
    )
    proc = run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "build",
            project,
            "-o",
            tmp_path / "out",
            "-C",
            "rocm-build-backend.targets=gfx90a",
            "-C",
            "rocm-build-backend.verify=off",
            "-C",
            "rocm-build-backend.local-version=true",
        ],
        env=build_env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel = only_wheel(tmp_path / "out")
    assert wheel.name.startswith("legacy_pkg-2.0+gfx90a-")
    assert read_stamp(wheel)["requested"]["targets"] == ["gfx90a"]
    # a second build for another target reports the first wheel as built for other targets
    again = run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "build",
            project,
            "-o",
            tmp_path / "out",
            "-C",
            "rocm-build-backend.targets=gfx940",
            "-C",
            "rocm-build-backend.verify=off",
            "-C",
            "rocm-build-backend.stale=clean",
            "-C",
            "rocm-build-backend.local-version=true",
        ],
        env=build_env,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "was built for gfx90a" in again.stderr


def test_plan_command_json(tmp_path, build_env):
    project = copy_sample("skbuild_hip", tmp_path)
    proc = run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "plan",
            "--json",
            project,
            "-C",
            "rocm-build-backend.targets=gfx90a",
        ],
        env=build_env,
    )
    assert proc.returncode == 0, proc.stderr
    import json

    data = json.loads(proc.stdout)
    import jsonschema

    from rocm_build_backend import data as shipped

    jsonschema.validate(data, json.loads(shipped.path("schemas/plan.schema.json").read_text()))
    assert data["schema_version"] == 1 and data["targets"] == ["gfx90a"]
    assert data["env"]["PYTORCH_ROCM_ARCH"] == "gfx90a"
    assert data["config_settings"]["cmake.define.GPU_TARGETS"] == "gfx90a"
    assert data["compiler"]["compiler"] == "hipcc"
    bad = run(
        [sys.executable, "-m", "rocm_build_backend", "plan", project, "-C", "rocm-build-backend.targets=gfx9422"],
        env=build_env,
    )
    assert (
        bad.returncode == 2
        and bad.stderr.startswith("error: unknown GPU target 'gfx9422'")
        and "Traceback" not in bad.stderr
    )


def test_scikit_build_core_persistent_build_dir_is_refused_for_other_targets(tmp_path, build_env):
    """scikit-build-core's build-dir keeps CMakeCache.txt (GPU_TARGETS cached): a build for other
    targets must not reuse it."""
    project = copy_sample("skbuild_hip", tmp_path)
    first = pip_wheel(
        project, tmp_path / "one", build_env, "rocm-build-backend.targets=gfx90a", "build-dir=build/cmake"
    )
    assert first.returncode == 0, first.stderr
    cache = project / "build" / "cmake" / "CMakeCache.txt"
    assert "GPU_TARGETS:STRING=gfx90a" in cache.read_text() or "GPU_TARGETS:UNINITIALIZED=gfx90a" in cache.read_text()
    second = pip_wheel(
        project, tmp_path / "two", build_env, "rocm-build-backend.targets=gfx940", "build-dir=build/cmake"
    )
    assert second.returncode != 0
    text = "\n".join(error_lines(second))
    assert "build" in text and "gfx90a" in text and "gfx940" in text, text
    third = pip_wheel(
        project,
        tmp_path / "three",
        build_env,
        "rocm-build-backend.targets=gfx940",
        "build-dir=build/cmake",
        "rocm-build-backend.stale=clean",
    )
    assert third.returncode == 0, third.stderr
    assert [f.targets for f in audit_wheel(only_wheel(tmp_path / "three")).files if f.targets] == [["gfx940"]]


def test_targets_must_not_change_between_prepare_metadata_and_build(tmp_path, build_env):
    """As frontends call the hooks (pyproject-hooks, each in its own process): build_wheel gets
    the prepared .dist-info; a build for other targets than the metadata was prepared for stops."""
    import os

    from pyproject_hooks import BuildBackendHookCaller, quiet_subprocess_runner

    project = copy_sample("pure_python", tmp_path)
    caller = BuildBackendHookCaller(
        str(project), "rocm_build_backend", runner=quiet_subprocess_runner, python_executable=sys.executable
    )
    md = tmp_path / "md"
    md.mkdir()
    prepare = {"rocm-build-backend.targets": "gfx90a", "rocm-build-backend.local-version": "true"}
    old_environ = dict(os.environ)
    os.environ.clear()
    os.environ.update(build_env)
    try:
        name = caller.prepare_metadata_for_build_wheel(str(md), prepare)
        assert name == "rocm_sample_pure-0.1.0+gfx90a.dist-info"
        with pytest.raises(Exception):
            caller.build_wheel(
                str(tmp_path / "out"),
                {**prepare, "rocm-build-backend.targets": "gfx942"},
                metadata_directory=str(md / name),
            )
        built = caller.build_wheel(str(tmp_path / "out2"), prepare, metadata_directory=str(md / name))
    finally:
        os.environ.clear()
        os.environ.update(old_environ)
    assert built.startswith("rocm_sample_pure-0.1.0+gfx90a-")


def test_a_failed_build_does_not_make_its_own_tree_stale(tmp_path, build_env):
    """The compile fails after writing its output; the retry for the same targets goes on."""
    project = copy_sample("setuptools_hip", tmp_path)
    broken = tmp_path / "broken-hipcc"
    broken.write_text('#!/bin/sh\nhipcc "$@" && echo "hipcc: pretend the link failed" >&2 && exit 1\n')
    broken.chmod(0o755)
    failed = pip_wheel(
        project, tmp_path / "one", {**build_env, "HIPCC": str(broken)}, "rocm-build-backend.targets=gfx90a"
    )
    assert failed.returncode != 0 and "pretend the link failed" in failed.stdout + failed.stderr
    assert list((project / "build").rglob("*.so")), "the failed compile left its output behind"
    again = pip_wheel(project, tmp_path / "two", build_env, "rocm-build-backend.targets=gfx90a")
    assert again.returncode == 0, again.stderr
    other = pip_wheel(project, tmp_path / "three", build_env, "rocm-build-backend.targets=gfx940")
    assert other.returncode != 0 and "stale" in "\n".join(error_lines(other))


def test_a_build_stopped_by_sigterm_can_be_resumed(tmp_path, build_env):
    """A CI time limit (SIGTERM to the job's process group) stops the build after the compiler
    wrote its output: the tree gets our marker, so the retry for the same targets goes on
    (before, it was refused as a tree nobody could prove was ours)."""
    import os
    import signal
    import subprocess
    import time

    project = copy_sample("setuptools_hip", tmp_path)
    slow = tmp_path / "slow-hipcc"
    flag = tmp_path / "compiled"
    slow.write_text(f'#!/bin/sh\nhipcc "$@" || exit 1\ntouch {flag}\nexec sleep 60\n')
    slow.chmod(0o755)
    argv = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-build-isolation",
        "--no-deps",
        "-w",
        str(tmp_path / "one"),
        "-C",
        "rocm-build-backend.targets=gfx90a",
        str(project),
    ]
    proc = subprocess.Popen(
        argv,
        env={**build_env, "HIPCC": str(slow)},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not flag.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert flag.exists(), "the compiler never ran"
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 60  # pip is gone; the backend in its own process finishes last
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    marker = project / "build" / ".rocm-build-backend.json"
    assert marker.is_file(), "the stopped build left no marker"
    assert "gfx90a" in marker.read_text()
    again = pip_wheel(project, tmp_path / "two", build_env, "rocm-build-backend.targets=gfx90a")
    assert again.returncode == 0, again.stderr
    other = pip_wheel(project, tmp_path / "three", build_env, "rocm-build-backend.targets=gfx940")
    assert other.returncode != 0 and "stale" in "\n".join(error_lines(other))
