"""Shared helpers: copy a sample project, build it through the shim with a real frontend."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_projects"

# variables a build reads; tests start from an environment without them
_TARGET_VARS = ("PYTORCH_ROCM_ARCH", "GPU_TARGETS", "AMDGPU_TARGETS", "HCC_AMDGPU_TARGET",
                "HIPCC_COMPILE_FLAGS_APPEND", "CMAKE_ARGS", "MAX_JOBS", "HSA_OVERRIDE_GFX_VERSION",
                "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "PIP_CONFIG_FILE",
                "TORCH_CUDA_ARCH_LIST", "CUDAARCHS", "NVCC_APPEND_FLAGS", "CUDA_VISIBLE_DEVICES")


@pytest.fixture
def build_env(tmp_path):
    """A clean environment for a build: no target variables, private caches and temp folder."""
    env = {k: v for k, v in os.environ.items() if k not in _TARGET_VARS and not k.startswith("ROCM_BUILD_BACKEND_")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env.update(XDG_CACHE_HOME=str(tmp_path / "xdg-cache"), TMPDIR=str(tmp_path / "tmp"),
               PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def copy_sample(name: str, dest: Path) -> Path:
    target = dest / name
    shutil.copytree(SAMPLES / name, target, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    return target


def run(argv, *, cwd=None, env=None, check=False, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=check)


def pip_wheel(project: Path, outdir: Path, env: dict, *settings: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", outdir, project]
    for s in settings:
        argv += ["-C", s]
    return run(argv, env=env)


def only_wheel(folder: Path) -> Path:
    """The one wheel in ``folder``; its stamp, when it has one, valid under the shipped schema."""
    wheels = sorted(folder.glob("*.whl"))
    assert len(wheels) == 1, wheels
    assert_valid_stamp(wheels[0])
    return wheels[0]


def assert_valid_stamp(wheel: Path) -> dict | None:
    """Validate a built wheel's stamp against the shipped stamp.schema.json (jsonschema)."""
    import json

    import jsonschema

    from rocm_build_backend import data
    from rocm_build_backend.wheel.stamp import read_stamp

    stamp = read_stamp(wheel)
    if stamp is None:
        return None
    schema = data.path("schemas/stamp.schema.json")
    if not schema.is_file():
        schema = data.path("stamp.schema.json")
    jsonschema.validate(stamp, json.loads(schema.read_text(encoding="utf-8")))
    return stamp


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    text = proc.stdout + proc.stderr
    return [line.strip() for line in text.splitlines() if "rocm-build-backend: error:" in line or "rocm-build-backend: hint:" in line]
