"""Compressed device code (``--offload-compress``: zstd CCOBs, what ROCm's clang writes) in
every build, with nothing extra: the zstd decoder comes with the shim's own dependencies.

The project (``tests/projects/compressed_bundles``) is compiled by clang-19 without a ROCm
installation. The isolated build installs the shim from a find-links folder holding its wheel,
as the README says, and its dependencies and setuptools from pip's configured index.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from helpers import ROOT, error_lines, only_wheel, run
from rocm_build_backend.binary.audit import audit_wheel
from rocm_build_backend.wheel.stamp import read_stamp


PROJECT = ROOT / "tests" / "projects" / "compressed_bundles"
TARGETS = "gfx90a;gfx942"

if not shutil.which("clang++-19"):
    pytest.skip("clang++-19 is not installed", allow_module_level=True)


def _project(tmp_path: Path) -> Path:
    return Path(shutil.copytree(PROJECT, tmp_path / "project", ignore=shutil.ignore_patterns("build", "*.egg-info")))


def _assert_compressed_and_audited(wheel: Path) -> None:
    files = [f for f in audit_wheel(wheel).files if f.targets]
    assert len(files) == 1 and files[0].targets == ["gfx90a", "gfx942"]
    notes = [c.note for c in files[0].containers]
    assert notes and all(n.startswith("CCOB v") and n.endswith("zstd") for n in notes), notes
    stamp = read_stamp(wheel)
    assert stamp is not None and stamp["requested"]["targets"] == ["gfx90a", "gfx942"]
    assert list(stamp["audit"]["files"].values()) == [
        {"targets": ["gfx90a", "gfx942"], "complete": ["gfx90a", "gfx942"]}
    ]


def test_an_isolated_build_reads_compressed_device_code(tmp_path, build_env):
    wheels = tmp_path / "wheels"
    shim = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, ROOT], env=build_env
    )
    assert shim.returncode == 0, shim.stdout + shim.stderr
    env = {**build_env, "PIP_FIND_LINKS": str(wheels), "ROCM_BUILD_BACKEND_TARGETS": TARGETS}
    env.pop("PYTHONPATH", None)  # the isolated environment gets the shim from its wheel, nothing else
    proc = run([sys.executable, "-m", "build", "--wheel", "--outdir", tmp_path / "dist", _project(tmp_path)], env=env)
    if "No matching distribution found for" in proc.stdout + proc.stderr:
        pytest.skip("no package index reachable for the isolated environment's setuptools and dependencies")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    _assert_compressed_and_audited(only_wheel(tmp_path / "dist"))


def test_without_a_decoder_the_build_says_what_to_install(tmp_path, build_env):
    """A machine where the decoder is missing (installed with --no-deps): the build stops with
    what to install, and does not blame the project for ignoring the targets."""
    from rocm_build_backend.binary.decompression import zstd_module

    if zstd_module().__name__.startswith("compression"):
        pytest.skip("Python 3.14+ has compression.zstd in its standard library")
    blocker = tmp_path / "blocker"  # every Python of the build starts without the module
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['backports.zstd'] = None\n")
    env = {**build_env, "PYTHONPATH": f"{blocker}:{ROOT}"}
    proc = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            tmp_path / "out",
            "-C",
            f"rocm-build-backend.targets={TARGETS}",
            _project(tmp_path),
        ],
        env=env,
    )
    assert proc.returncode != 0
    lines = error_lines(proc)
    assert any("install backports.zstd" in line for line in lines if ": error:" in line), lines
    (hint,) = [line for line in lines if ": hint:" in line]
    assert "unchecked, not wrong" in hint and "hard-coded" not in hint, hint
    assert not list((tmp_path / "out").glob("*.whl"))


def test_without_isolation_the_same_project_builds(tmp_path, build_env):
    proc = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            tmp_path / "out",
            "-C",
            f"rocm-build-backend.targets={TARGETS}",
            _project(tmp_path),
        ],
        env=build_env,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    _assert_compressed_and_audited(only_wheel(tmp_path / "out"))
