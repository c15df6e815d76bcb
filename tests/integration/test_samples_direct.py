"""Build every sample project with its own backend (no shim) and check the GPU targets of its wheel.

Each sample is copied to a temporary folder, its ``build-backend`` is pointed at the real backend
named in ``[tool.rocm-build-backend]``, and it is built with ``pip wheel --no-build-isolation`` in
the environment the shim would set. The device code of every ``.so`` in the wheel is read from its
``.hip_fatbin`` section with ``llvm-objcopy-19`` and ``clang-offload-bundler-19``.
Needs ``hipcc`` (HIP 5.2 is enough), ``cmake``, ``clang-offload-bundler-19`` and ``llvm-objcopy-19``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from helpers import ROOT

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

SAMPLES = ROOT / "sample_projects"
BUNDLER = "clang-offload-bundler-19"
OBJCOPY = "llvm-objcopy-19"
EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")

# Everything that names GPU targets or steers hipcc; cleared so the outer environment cannot leak in.
TARGET_VARIABLES = (
    "PYTORCH_ROCM_ARCH",
    "GPU_TARGETS",
    "AMDGPU_TARGETS",
    "HCC_AMDGPU_TARGET",
    "HIPCC_COMPILE_FLAGS_APPEND",
    "HIP_PLATFORM",
    "CMAKE_ARGS",
    "HIPCC",
)


def shim_env(targets: list[str]) -> dict[str, str]:
    """The environment the shim injects for these targets."""
    semi = ";".join(targets)
    return {
        "HIP_PLATFORM": "amd",
        "PYTORCH_ROCM_ARCH": semi,
        "GPU_TARGETS": semi,
        "AMDGPU_TARGETS": semi,
        "HCC_AMDGPU_TARGET": ",".join(targets),
        "HIPCC_COMPILE_FLAGS_APPEND": " ".join(f"--offload-arch={t}" for t in targets),
        "CMAKE_ARGS": f"-DCMAKE_HIP_ARCHITECTURES={semi} -DGPU_TARGETS={semi} -DAMDGPU_TARGETS={semi}",
    }


def copy_sample(name: str, tmp_path: Path) -> Path:
    """Copy a sample and make its real backend the build backend."""
    project = tmp_path / name
    shutil.copytree(SAMPLES / name, project, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info"))
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    backend = tomllib.loads(text)["tool"]["rocm-build-backend"]["backend"]
    text, count = re.subn(r'(?m)^build-backend = "rocm_build_backend"$', f'build-backend = "{backend}"', text)
    assert count == 1, f"{name}: no build-backend line to rewrite"
    pyproject.write_text(text)
    return project


def pip_wheel(project: Path, env: dict[str, str], config_settings: dict[str, str] | None = None):
    """Run pip wheel; return (completed process, list of wheels written)."""
    outdir = project.parent / f"{project.name}-dist"
    command = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-build-isolation",
        "--no-deps",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "-w",
        str(outdir),
        str(project),
    ]
    for key, value in (config_settings or {}).items():
        command += ["-C", f"{key}={value}"]
    full_env = {
        k: v for k, v in os.environ.items() if k not in TARGET_VARIABLES and not k.startswith("ROCM_BUILD_BACKEND_")
    }
    full_env.update(env)
    # hipcc (clang-15) leaves empty "<source>-XXXXXX" folders in $TMPDIR on every compile.
    full_env["TMPDIR"] = str(project.parent / f"{project.name}-tmp")
    os.makedirs(full_env["TMPDIR"], exist_ok=True)
    proc = subprocess.run(command, env=full_env, capture_output=True, text=True)
    return proc, sorted(outdir.glob("*.whl"))


def build(project: Path, env: dict[str, str], config_settings: dict[str, str] | None = None) -> Path:
    proc, wheels = pip_wheel(project, env, config_settings)
    assert proc.returncode == 0, f"pip wheel failed:\n{proc.stdout}\n{proc.stderr}"
    assert len(wheels) == 1, wheels
    return wheels[0]


def hip_targets(so_file: Path) -> set[str]:
    """The GPU targets in a shared library's .hip_fatbin section."""
    fatbin = so_file.with_suffix(".hip_fatbin")
    subprocess.run(
        [OBJCOPY, f"--dump-section=.hip_fatbin={fatbin}", str(so_file), os.devnull], check=True, capture_output=True
    )
    listing = subprocess.run(
        [BUNDLER, "--list", "--type=o", f"--input={fatbin}"], check=True, capture_output=True, text=True
    ).stdout
    # Lines look like "hipv4-amdgcn-amd-amdhsa--gfx90a" and "host-x86_64-unknown-linux".
    return {line.split("--", 1)[1] for line in listing.split() if line.startswith("hip")}


def wheel_targets(wheel: Path, tmp_path: Path) -> dict[str, set[str]]:
    """Unpack a wheel and map each .so in it to its GPU targets."""
    unpacked = tmp_path / f"{wheel.stem}-unpacked"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(unpacked)
    return {str(so.relative_to(unpacked)): hip_targets(so) for so in unpacked.rglob("*.so")}


def assert_imports(wheel: Path, tmp_path: Path, module: str, attribute: str) -> None:
    """Import the package from the unpacked wheel, on a machine without a GPU."""
    unpacked = tmp_path / f"{wheel.stem}-unpacked"
    code = f"import {module}; assert callable({module}.{attribute})"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(unpacked)},
    )
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module", autouse=True)
def tools():
    for tool in ("hipcc", "clang-19", "cmake", BUNDLER, OBJCOPY):
        assert shutil.which(tool), f"{tool} is not on PATH; these tests build real GPU code"


# --- setuptools_hip: PYTORCH_ROCM_ARCH -----------------------------------------------------------


@pytest.mark.parametrize(
    ("arch", "expected"),
    [
        ("gfx90a", {"gfx90a"}),
        ("gfx90a;gfx940", {"gfx90a", "gfx940"}),
        ("gfx90a gfx940", {"gfx90a", "gfx940"}),
    ],
)
def test_setuptools_hip_builds_for_pytorch_rocm_arch(tmp_path, arch, expected):
    project = copy_sample("setuptools_hip", tmp_path)
    wheel = build(project, {"HIP_PLATFORM": "amd", "PYTORCH_ROCM_ARCH": arch})
    assert wheel_targets(wheel, tmp_path) == {f"rocm_sample_hip/_kernels{EXT_SUFFIX}": expected}
    assert_imports(wheel, tmp_path, "rocm_sample_hip", "add_one")


def test_setuptools_hip_with_everything_the_shim_sets(tmp_path):
    project = copy_sample("setuptools_hip", tmp_path)
    wheel = build(project, shim_env(["gfx90a", "gfx940"]))
    assert list(wheel_targets(wheel, tmp_path).values()) == [{"gfx90a", "gfx940"}]


def test_setuptools_hip_refuses_to_guess_targets(tmp_path):
    project = copy_sample("setuptools_hip", tmp_path)
    proc, wheels = pip_wheel(project, {"HIP_PLATFORM": "amd"})
    assert proc.returncode != 0
    assert "PYTORCH_ROCM_ARCH is not set" in proc.stdout + proc.stderr
    assert wheels == []


def test_setuptools_hip_uses_hipcc_from_the_environment(tmp_path):
    log = tmp_path / "hipcc.log"
    wrapper = tmp_path / "my-hipcc"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec hipcc "$@"\n')
    wrapper.chmod(0o755)
    project = copy_sample("setuptools_hip", tmp_path)
    wheel = build(project, {"HIP_PLATFORM": "amd", "PYTORCH_ROCM_ARCH": "gfx90a", "HIPCC": str(wrapper)})
    assert "--offload-arch=gfx90a -fno-gpu-rdc" in log.read_text()
    assert list(wheel_targets(wheel, tmp_path).values()) == [{"gfx90a"}]


# --- skbuild_hip: the CMake variable GPU_TARGETS ---------------------------------------------------


@pytest.mark.parametrize(
    ("env", "config_settings", "expected"),
    [
        ({}, {"cmake.define.GPU_TARGETS": "gfx90a"}, {"gfx90a"}),
        ({"CMAKE_ARGS": "-DGPU_TARGETS=gfx90a"}, {}, {"gfx90a"}),
        ({"CMAKE_ARGS": "-DGPU_TARGETS=gfx90a;gfx940"}, {}, {"gfx90a", "gfx940"}),
        ({}, {"cmake.define.GPU_TARGETS": "gfx90a;gfx940"}, {"gfx90a", "gfx940"}),
    ],
    ids=["config-setting", "cmake-args", "cmake-args-two", "config-setting-two"],
)
def test_skbuild_hip_builds_for_gpu_targets(tmp_path, env, config_settings, expected):
    project = copy_sample("skbuild_hip", tmp_path)
    wheel = build(project, {"HIP_PLATFORM": "amd", **env}, config_settings)
    assert wheel_targets(wheel, tmp_path) == {f"rocm_sample_skbuild/_kernels{EXT_SUFFIX}": expected}
    assert_imports(wheel, tmp_path, "rocm_sample_skbuild", "add_one")


def test_skbuild_hip_with_everything_the_shim_sets(tmp_path):
    project = copy_sample("skbuild_hip", tmp_path)
    targets = ["gfx90a", "gfx940"]
    defines = {
        f"cmake.define.{name}": ";".join(targets)
        for name in ("CMAKE_HIP_ARCHITECTURES", "GPU_TARGETS", "AMDGPU_TARGETS")
    }
    wheel = build(project, shim_env(targets), defines)
    assert list(wheel_targets(wheel, tmp_path).values()) == [{"gfx90a", "gfx940"}]


def test_skbuild_hip_refuses_to_guess_targets(tmp_path):
    project = copy_sample("skbuild_hip", tmp_path)
    proc, wheels = pip_wheel(project, {"HIP_PLATFORM": "amd", "PYTORCH_ROCM_ARCH": "gfx90a"})
    assert proc.returncode != 0
    assert "GPU_TARGETS is not set" in proc.stdout + proc.stderr
    assert wheels == []


# --- hardcoded_gfx908: ignores every target variable ---------------------------------------------


def test_hardcoded_builds_gfx908_whatever_is_requested(tmp_path):
    # everything the shim sets for gfx90a, HIPCC_COMPILE_FLAGS_APPEND included: the clang driver
    # it calls reads none of it
    project = copy_sample("hardcoded_gfx908", tmp_path)
    wheel = build(project, shim_env(["gfx90a"]))
    assert list(wheel_targets(wheel, tmp_path).values()) == [{"gfx908"}]
    assert_imports(wheel, tmp_path, "rocm_sample_hardcoded._kernels", "built_for")


def test_hipcc_adds_hipcc_compile_flags_append_to_every_command_line(tmp_path):
    # hipcc appends $HIPCC_COMPILE_FLAGS_APPEND to every command line, so a hipcc build that names
    # other targets (here through PYTORCH_ROCM_ARCH) also gets the injected ones
    project = copy_sample("setuptools_hip", tmp_path)
    env = {"HIP_PLATFORM": "amd", "PYTORCH_ROCM_ARCH": "gfx908", "HIPCC_COMPILE_FLAGS_APPEND": "--offload-arch=gfx90a"}
    wheel = build(project, env)
    assert list(wheel_targets(wheel, tmp_path).values()) == [{"gfx908", "gfx90a"}]


# --- pure Python ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sample", "wheel_name"),
    [
        ("pure_python", "rocm_sample_pure-0.1.0-py3-none-any.whl"),
        ("hatch_pure", "rocm_sample_hatch-0.1.0-py3-none-any.whl"),
    ],
)
def test_pure_python_samples_build(tmp_path, sample, wheel_name):
    project = copy_sample(sample, tmp_path)
    wheel = build(project, shim_env(["gfx90a"]))
    assert wheel.name == wheel_name
    assert wheel_targets(wheel, tmp_path) == {}
    assert_imports(wheel, tmp_path, wheel_name.split("-")[0], "greet")
