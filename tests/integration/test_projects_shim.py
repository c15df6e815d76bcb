"""Projects that pick their own targets, built through the shim on this GPU-less machine.

Each reproduces a real pattern (see docs/compatibility.md). A decoy folder later on PATH answers
like a machine whose iGPU (gfx1036) is listed first; the audit proves what each build holds.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rocm_build_backend.binary.audit import audit_wheel
from helpers import cmake_hip_env, decoy_tools, only_wheel, pip_wheel, ROOT

PROJECTS = ROOT / "tests" / "projects"


def built(name: str, tmp_path: Path, env: dict, *settings: str) -> set[str]:
    project = tmp_path / name
    shutil.copytree(PROJECTS / name, project, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    env = {**env, "PATH": f"{decoy_tools(tmp_path / 'decoys')}{os.pathsep}{env['PATH']}"}
    proc = pip_wheel(project, tmp_path / "out", env, *settings)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    files = [f for f in audit_wheel(only_wheel(tmp_path / "out")).files if f.targets]
    assert len(files) == 1
    return set(files[0].targets)


@pytest.mark.parametrize(
    "name", ["rocminfo_first_gfx", "enumerator_skip_gfx000", "env_gpu_archs", "env_hip_architectures"]
)
def test_setuptools_patterns_get_exactly_the_targets(tmp_path, build_env, name):
    assert built(name, tmp_path, build_env, "rocm-build-backend.targets=gfx90a;gfx940") == {"gfx90a", "gfx940"}


def test_cmake_hip_language_default_gets_exactly_the_targets(tmp_path, build_env):
    env = {**build_env, **cmake_hip_env(tmp_path)}
    got = built(
        "cmake_hip_default",
        tmp_path,
        env,
        "rocm-build-backend.targets=gfx90a;gfx942;gfx1100",
        "rocm-build-backend.compiler=clang++-19",
    )
    assert got == {"gfx90a", "gfx942", "gfx1100"}


def test_without_pinned_tools_the_decoy_igpu_gets_in(tmp_path, build_env):
    """Control: the same rocminfo-reading build with pinned-tools (and enforcement) off also
    compiles for the iGPU."""
    got = built(
        "rocminfo_first_gfx",
        tmp_path,
        build_env,
        "rocm-build-backend.targets=gfx90a;gfx940",
        "rocm-build-backend.pinned-tools=false",
        "rocm-build-backend.enforce=false",
    )
    assert "gfx1036" in got


def test_enforcement_keeps_the_decoy_out_even_without_pinned_tools(tmp_path, build_env):
    """hipcc gets the iGPU's --offload-arch from the project, then the reset and the targets last."""
    got = built(
        "rocminfo_first_gfx",
        tmp_path,
        build_env,
        "rocm-build-backend.targets=gfx90a;gfx940",
        "rocm-build-backend.pinned-tools=false",
    )
    assert got == {"gfx90a", "gfx940"}
