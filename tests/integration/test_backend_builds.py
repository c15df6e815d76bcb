"""Builds through the shim's hooks with setuptools: every stamp follows the shipped schema whatever
channel named the targets, and pip prepares a project's metadata without a GPU. (Loading the
wrapped backend and mirroring its hooks: tests/unit/test_backend.py.)
"""

import shutil
import subprocess
import sys

import pytest

from helpers import assert_valid_stamp, gpu_less_env, kfd_root, pure_project, PURE_PYPROJECT


@pytest.mark.parametrize(
    "channel, source",
    [
        ("-C", "settings"),
        ("env", "settings"),
        ("pyproject", "settings"),
        ("PYTORCH_ROCM_ARCH", "PYTORCH_ROCM_ARCH"),
        ("detected", "detected:kfd"),
    ],
)
def test_every_stamp_follows_the_shipped_schema(tmp_path, channel, source):
    """requested.source was written as "from -C rocm-build-backend.targets", "detected by kfd", ..."""
    import os

    from rocm_build_backend.wheel.stamp import read_stamp

    proj = tmp_path / "proj"
    (proj / "purepkg").mkdir(parents=True)
    (proj / "purepkg" / "__init__.py").write_text("")
    table = 'targets = "gfx90a"\n' if channel == "pyproject" else ""
    pyproject = PURE_PYPROJECT + table
    if channel == "detected":  # verify = "off" (no GPU code) detects nothing: the audit warns instead
        pyproject = pyproject.replace('verify = "off"', 'verify = "warn"')
    (proj / "pyproject.toml").write_text(pyproject)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_BUILD_BACKEND_") and k != "PYTORCH_ROCM_ARCH"}
    settings = {"rocm-build-backend.targets": "gfx90a"} if channel == "-C" else {}
    if channel == "env":
        env["ROCM_BUILD_BACKEND_TARGETS"] = "gfx90a"
    elif channel == "PYTORCH_ROCM_ARCH":
        env["PYTORCH_ROCM_ARCH"] = "gfx90a"
    elif channel == "detected":
        env["ROCM_BUILD_BACKEND_SYSFS_ROOT"] = str(kfd_root(tmp_path, 90010))
    out = tmp_path / "out"
    code = f"import rocm_build_backend as b; print(b.build_wheel({str(out)!r}, {settings!r}))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=proj, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    wheel = out / proc.stdout.strip().splitlines()[-1]
    assert assert_valid_stamp(wheel) is not None
    assert read_stamp(wheel)["requested"] == {"targets": ["gfx90a"], "source": source}


def test_a_project_without_gpu_code_detects_nothing(tmp_path):
    """verify = "off" says the project has no GPU code: on a machine with a GPU its build asks no
    GPU (no probe runs), builds without targets and stamps none; local-version still detects."""
    import os

    from rocm_build_backend.wheel.stamp import read_stamp

    proj = pure_project(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_BUILD_BACKEND_") and k != "PYTORCH_ROCM_ARCH"}
    env["ROCM_BUILD_BACKEND_SYSFS_ROOT"] = str(kfd_root(tmp_path, 90010))
    for n, settings in enumerate(({}, {"rocm-build-backend.local-version": "true"})):
        shutil.rmtree(proj / "build", ignore_errors=True)  # made for no targets: stale for gfx90a
        out = tmp_path / f"out{n}"
        code = f"import rocm_build_backend as b; print(b.build_wheel({str(out)!r}, {settings!r}))"
        proc = subprocess.run([sys.executable, "-c", code], cwd=proj, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        stamp = read_stamp(out / proc.stdout.strip().splitlines()[-1])
        if n == 0:
            assert stamp["requested"]["targets"] == [] and "nothing detected" in proc.stderr
        else:
            assert stamp["requested"] == {"targets": ["gfx90a"], "source": "detected:kfd"}


def test_preparing_metadata_needs_no_gpu(tmp_path):
    """pip install --dry-run --report . failed on a machine without a GPU: the metadata does not
    depend on the targets (unless local-version is on)."""
    import json

    proj = pure_project(tmp_path)
    env = gpu_less_env(tmp_path)
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--no-build-isolation",
            "--no-deps",
            "--report",
            str(report),
            str(proj),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (item,) = json.loads(report.read_text())["install"]
    assert item["metadata"]["name"] == "purepkg" and item["metadata"]["version"] == "1.0"
    # verify = "off": the project has no GPU code, so its build needs no GPU either
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            str(tmp_path / "out"),
            str(proj),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    # a project that may have GPU code still needs targets, and says so
    (proj / "pyproject.toml").write_text(PURE_PYPROJECT.replace('verify = "off"', 'verify = "error"'))
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            str(tmp_path / "out2"),
            str(proj),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert built.returncode != 0 and "rocm-build-backend: error: " in built.stdout + built.stderr
