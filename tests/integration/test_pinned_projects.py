"""Pinned detection tools in real builds: the projects in ``tests/projects/`` built with
``pip wheel``, and the GPU targets of the device code in each wheel read back.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.builder.pinned import pinned_env, write_pinned_tools
from rocm_build_backend.builder.profiles import profile_for
from rocm_build_backend.gpu.targets import GpuTarget, join_targets, parse_targets
from helpers import cmake_hip_env, decoy_tools, TESTS

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

PROJECTS = TESTS / "projects"

# Variables that name GPU targets or steer hipcc/CMake; cleared so the outer environment cannot leak in.
TARGET_VARIABLES = (
    "PYTORCH_ROCM_ARCH",
    "GPU_TARGETS",
    "AMDGPU_TARGETS",
    "HCC_AMDGPU_TARGET",
    "HIPCC_COMPILE_FLAGS_APPEND",
    "HIP_PLATFORM",
    "CMAKE_ARGS",
    "HIPCC",
    "GPU_ARCHS",
    "HIP_ARCHITECTURES",
    "CMAKE_PROGRAM_PATH",
    "HIPCXX",
    "HIPFLAGS",
    "CMAKE_PREFIX_PATH",
)
HIPCC_TARGETS = "gfx90a;gfx940"  # what hipcc builds from HIP 5.2 on
CLANG_TARGETS = "gfx90a;gfx942;gfx1100"  # what clang-19 -nogpuinc -nogpulib builds


def use_real_backend(project: Path) -> None:
    """Point ``build-backend`` at the real backend named in ``[tool.rocm-build-backend]``.

    The only thing that makes these builds direct rather than through the shim.
    """
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    backend = tomllib.loads(text)["tool"]["rocm-build-backend"]["backend"]
    text, count = re.subn(r'(?m)^build-backend = "rocm_build_backend"$', f'build-backend = "{backend}"', text)
    assert count == 1, f"{project.name}: no build-backend line to rewrite"
    pyproject.write_text(text)


def copy_project(name: str, tmp_path: Path) -> Path:
    project = tmp_path / name
    shutil.copytree(PROJECTS / name, project, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info"))
    use_real_backend(project)
    return project


def generic_env(targets: list[GpuTarget]) -> dict[str, str]:
    """The knobs the plan sets for every build."""
    semi = join_targets(targets, ";")
    return {
        "HIP_PLATFORM": "amd",
        "PYTORCH_ROCM_ARCH": semi,
        "GPU_TARGETS": semi,
        "AMDGPU_TARGETS": semi,
        "HCC_AMDGPU_TARGET": join_targets(targets, ","),
        "HIPCC_COMPILE_FLAGS_APPEND": " ".join(f"--offload-arch={t}" for t in targets),
        "CMAKE_ARGS": f"-DCMAKE_HIP_ARCHITECTURES={semi} -DGPU_TARGETS={semi} -DAMDGPU_TARGETS={semi}",
        "MAX_JOBS": "2",
    }


def build_env(
    tmp_path: Path, targets: list[GpuTarget], extra: dict[str, str], *, pinned: bool = True
) -> dict[str, str]:
    """os.environ without target knobs, the pinned tools first on PATH (before decoys), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in TARGET_VARIABLES and not k.startswith("ROCM_BUILD_BACKEND_")}
    env["PATH"] = f"{decoy_tools(tmp_path / 'decoys')}{os.pathsep}{env.get('PATH', os.defpath)}"
    if pinned:
        tools = tmp_path / "pinned"
        write_pinned_tools(tools, targets)
        env.update(pinned_env(tools, env))
    env.update(extra)
    return env


def pip_wheel(project: Path, env: dict[str, str]) -> Path:
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
        "-v",
        "-w",
        str(outdir),
        str(project),
    ]
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    wheels = sorted(outdir.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def device_targets(wheel: Path, workdir: Path) -> dict[str, set[str]]:
    """Member name -> GPU targets of its device code, for every shared library in the wheel."""
    try:
        from rocm_build_backend.binary.audit import audit_file
    except ImportError:
        audit_file = None
    found = {}
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            if not member.endswith(".so"):
                continue
            path = workdir / Path(member).name
            path.write_bytes(zf.read(member))
            if audit_file is not None:
                found[member] = {str(t) for t in audit_file(path).targets}
                continue
            fatbin = workdir / (path.name + ".hip_fatbin")
            subprocess.run(
                ["llvm-objcopy-19", f"--dump-section=.hip_fatbin={fatbin}", str(path), os.devnull],
                check=True,
                capture_output=True,
            )
            listing = subprocess.run(
                ["clang-offload-bundler-19", "--list", "--type=o", f"--input={fatbin}"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            found[member] = {
                line.split("amdgcn-amd-amdhsa-", 1)[1].lstrip("-")
                for line in listing.split()
                if "amdgcn-amd-amdhsa-" in line
            }
    assert found, f"no shared library in {wheel.name}"
    return found


def built_for(project_name: str, tmp_path: Path, env: dict[str, str]) -> set[str]:
    project = copy_project(project_name, tmp_path)
    wheel = pip_wheel(project, env)
    per_file = device_targets(wheel, tmp_path)
    return set().union(*per_file.values())


@pytest.mark.parametrize("with_generic_env", [False, True], ids=["pinned-only", "pinned+generic"])
def test_rocminfo_first_gfx_project(tmp_path, with_generic_env):
    targets = parse_targets(HIPCC_TARGETS)
    extra = generic_env(targets) if with_generic_env else {"HIP_PLATFORM": "amd"}
    got = built_for("rocminfo_first_gfx", tmp_path, build_env(tmp_path, targets, extra))
    if with_generic_env:
        # hipcc adds HIPCC_COMPILE_FLAGS_APPEND to the project's own --offload-arch
        assert got == {"gfx90a", "gfx940"}
    else:
        # the project takes only the first gfx rocminfo prints: the first chosen target, not the decoy iGPU
        assert got == {"gfx90a"}


@pytest.mark.parametrize("with_generic_env", [False, True], ids=["pinned-only", "pinned+generic"])
def test_enumerator_skip_gfx000_project(tmp_path, with_generic_env):
    targets = parse_targets(HIPCC_TARGETS)
    extra = generic_env(targets) if with_generic_env else {"HIP_PLATFORM": "amd"}
    got = built_for("enumerator_skip_gfx000", tmp_path, build_env(tmp_path, targets, extra))
    assert got == {"gfx90a", "gfx940"}


@pytest.mark.parametrize("with_generic_env", [False, True], ids=["profile-only", "profile+generic"])
def test_env_gpu_archs_project(tmp_path, with_generic_env):
    targets = parse_targets(HIPCC_TARGETS)
    profile = profile_for("flash_attn")
    extra = {"HIP_PLATFORM": "amd", **profile.env(targets)}
    if with_generic_env:
        extra = {**generic_env(targets), **profile.env(targets)}
    got = built_for("env_gpu_archs", tmp_path, build_env(tmp_path, targets, extra))
    assert got == {"gfx90a", "gfx940"}


@pytest.mark.parametrize("with_generic_env", [False, True], ids=["profile-only", "profile+generic"])
def test_env_hip_architectures_project(tmp_path, with_generic_env):
    targets = parse_targets(HIPCC_TARGETS)
    profile = profile_for("xformers")
    extra = {"HIP_PLATFORM": "amd", **profile.env(targets)}
    if with_generic_env:
        extra = {**generic_env(targets), **profile.env(targets)}
    got = built_for("env_hip_architectures", tmp_path, build_env(tmp_path, targets, extra))
    assert got == {"gfx90a", "gfx940"}


@pytest.mark.parametrize("with_generic_env", [False, True], ids=["pinned-only", "pinned+generic"])
def test_cmake_hip_default_project(tmp_path, with_generic_env):
    targets = parse_targets(CLANG_TARGETS)
    extra = cmake_hip_env(tmp_path)
    if with_generic_env:
        extra.update(generic_env(targets))
    got = built_for("cmake_hip_default", tmp_path, build_env(tmp_path, targets, extra))
    assert got == {"gfx90a", "gfx942", "gfx1100"}


def test_cmake_default_without_program_path_takes_the_rocm_root_tool(tmp_path):
    """Control: with the pinned tools only on PATH, CMake asks the ROCm root's enumerator first."""
    targets = parse_targets(CLANG_TARGETS)
    env = build_env(tmp_path, targets, cmake_hip_env(tmp_path))
    env.pop("CMAKE_PROGRAM_PATH")
    got = built_for("cmake_hip_default", tmp_path, env)
    assert got == {"gfx1036"}


def test_bitsandbytes_style_cmake_defines_reach_cmake(tmp_path):
    """Profile CMake defines travel in CMAKE_ARGS; CMAKE_HIP_ARCHITECTURES from the generic knobs wins."""
    targets = parse_targets("gfx942")
    profile = profile_for("bitsandbytes")
    extra = cmake_hip_env(tmp_path)
    generic = generic_env(targets)
    generic["CMAKE_ARGS"] += " " + " ".join(profile.cmake_args(targets))
    extra.update(generic)
    # pinned tools report something else, so only CMAKE_ARGS can give gfx942
    env = build_env(tmp_path, parse_targets("gfx1100"), extra)
    assert built_for("cmake_hip_default", tmp_path, env) == {"gfx942"}
