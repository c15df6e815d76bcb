"""Enforcement proven with real builds: projects that hard-code their own targets, built through the
shim with a real frontend and the real compilers on every path (nvcc from torch-style setuptools
with and without ninja, from CMake, from a Makefile-style setup.py calling it from PATH; hipcc;
CMake's HIP language with clang), each wheel read back with the audit and its stamp checked
against the shipped schema."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from helpers import PROJECTS, cmake_hip_env, error_lines, only_wheel, run
from rocm_build_backend.binary.audit import audit_wheel
from rocm_build_backend.gpu.nvidia.enforce import toolkit_root
from rocm_build_backend.wheel.stamp import read_stamp

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
needs_nvcc = pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="needs nvcc")
needs_hipcc = pytest.mark.skipif(shutil.which("hipcc") is None, reason="needs hipcc")


def project(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(PROJECTS / name, dest, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info"))
    return dest


def per_file(wheel: Path) -> dict[str, list[str]]:
    return {f.path.rsplit("/", 1)[-1].split(".")[0]: sorted(f.targets) for f in audit_wheel(wheel).files if f.targets}


def build(name: str, tmp_path: Path, env: dict[str, str], *settings: str) -> tuple[Path, str]:
    src = project(name, tmp_path)
    argv = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-v",
        "--no-build-isolation",
        "--no-deps",
        "-w",
        tmp_path / "out",
        src,
    ]
    for setting in settings:
        argv += ["-C", setting]
    proc = run(argv, env=env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    return only_wheel(tmp_path / "out"), log


@pytest.fixture
def cuda_env(build_env):
    """The toolkit as a user sets it up: CUDA_HOME and its bin on PATH (the view wraps it)."""
    for var in ("CUDA_HOME", "CUDA_PATH", "PYTORCH_NVCC", "CUDACXX"):
        build_env.pop(var, None)
    root = toolkit_root(build_env)
    assert root is not None, "no CUDA toolkit with include/cuda_runtime.h"
    build_env["CUDA_HOME"] = str(root)
    build_env["PATH"] = str(root / "bin") + os.pathsep + build_env.get("PATH", "")
    return build_env


@needs_nvcc
@pytest.mark.parametrize("ninja", ["1", "0"], ids=["ninja-PYTORCH_NVCC", "no-ninja-CUDA_HOME"])
def test_torch_style_extension_holds_only_the_target(tmp_path, cuda_env, ninja):
    cuda_env["TORCHLIKE_NINJA"] = ninja
    wheel, _ = build("nvcc_torchlike", tmp_path, cuda_env, "rocm-build-backend.targets=sm_90")
    assert per_file(wheel) == {"_C": ["sm_90"]}
    enforced = read_stamp(wheel)["enforced"]
    assert enforced["rewritten"] == 1 and enforced["dropped"] == ["sm_80", "sm_120"]


@needs_nvcc
def test_enforce_false_builds_the_projects_own_list(tmp_path, cuda_env):
    """The control: without enforcement the hard-coded list wins (and the audit, which checks only
    that the targets are there, lets the superset through)."""
    wheel, log = build(
        "nvcc_torchlike", tmp_path, cuda_env, "rocm-build-backend.targets=sm_90", "rocm-build-backend.enforce=false"
    )
    assert per_file(wheel) == {"_C": ["sm_120", "sm_80", "sm_90"]}
    assert "enforced" not in read_stamp(wheel)


@needs_nvcc
def test_makefile_style_nvcc_from_path_and_a_file_left_whole(tmp_path, cuda_env):
    wheel, log = build(
        "nvcc_makefile", tmp_path, cuda_env, "rocm-build-backend.targets=sm_90", "rocm-build-backend.verify=warn"
    )
    # _kernels listed sm_80, sm_90 (+PTX) and sm_120 (+PTX): cut to sm_90; _only_sm80 is built for
    # sm_80 alone on purpose: left whole, named in the log and the stamp, and reported by the audit
    assert per_file(wheel) == {"_kernels": ["sm_90"], "_only_sm80": ["sm_80"]}
    stamp = read_stamp(wheel)
    assert stamp["enforced"]["left_whole"] == [{"sources": ["only_sm80.cu"], "targets": ["sm_80"]}]
    # beyond sm_90, but built by a compile left whole on purpose: listed, allowed
    assert stamp["enforced"]["exact"]["ok"] is True and stamp["enforced"]["left_whole_count"] == 1
    assert [f["why"] for f in stamp["enforced"]["exact"]["files"].values()] == ["left whole"]
    assert "enforce: left whole (lists none of sm_90): only_sm80.cu for sm_80" in log
    assert "holds device code for sm_80 only" in log  # verify = "warn": the audit still says it
    assert "build_ext parallel = 2" in log  # two extensions, built side by side


@needs_nvcc
def test_cmake_cuda_with_its_own_architectures(tmp_path, cuda_env):
    pytest.importorskip("scikit_build_core")
    if shutil.which("cmake") is None:
        pytest.skip("needs cmake")
    wheel, log = build("cmake_cuda_hardcoded", tmp_path, cuda_env, "rocm-build-backend.targets=sm_90")
    assert per_file(wheel) == {"_kernels": ["sm_90"]}
    enforced = read_stamp(wheel)["enforced"]
    # CMake's own probes of the compiler (under CMakeFiles/) are not counted
    assert enforced["compiles"] == 1
    assert set(enforced["dropped"]) == {"sm_80", "sm_120", "compute_80", "compute_90", "compute_120"}
    assert "switch CMakeLists.txt L8 CUDA_ARCHITECTURES (hard-coded)" in log


@needs_hipcc
def test_hipcc_with_its_own_offload_arch(tmp_path, build_env):
    """hipcc --offload-arch=gfx908 --offload-arch=gfx906 from setup.py, the plan says gfx90a
    (hipcc 5.2 builds gfx90a, not gfx942)."""
    wheel, log = build("hipcc_hardcoded", tmp_path, build_env, "rocm-build-backend.targets=gfx90a")
    assert per_file(wheel) == {"_kernels": ["gfx90a"]}
    assert "switch setup.py L17 --offload-arch (hard-coded): lists gfx906 gfx908" in log
    assert read_stamp(wheel)["enforced"]["how"][0].startswith(
        "enforce: every HIP compile and -fgpu-rdc link is rewritten to --offload-arch=gfx90a"
    )


@needs_hipcc
def test_hipcc_enforce_false_keeps_the_projects_targets_too(tmp_path, build_env):
    wheel, _ = build(
        "hipcc_hardcoded", tmp_path, build_env, "rocm-build-backend.targets=gfx90a", "rocm-build-backend.enforce=false"
    )
    assert per_file(wheel) == {"_kernels": ["gfx906", "gfx908", "gfx90a"]}


def test_cmake_hip_with_clang_and_its_own_targets(tmp_path, build_env):
    pytest.importorskip("scikit_build_core")
    if shutil.which("clang++-19") is None or shutil.which("cmake") is None:
        pytest.skip("needs clang++-19 and cmake")
    build_env.update(cmake_hip_env(tmp_path))
    wheel, log = build("cmake_hip_hardcoded", tmp_path, build_env, "rocm-build-backend.targets=gfx90a")
    # CMAKE_HIP_ARCHITECTURES=gfx906 forced in CMakeLists.txt and --offload-arch=gfx908 as the target's
    # own option, which CMake puts after every flag a variable gives: the launcher's reset comes last
    assert per_file(wheel) == {"libkernels": ["gfx90a"]}
    enforced = read_stamp(wheel)["enforced"]
    assert enforced["rewritten"] == 1 and enforced["dropped"] == ["gfx906", "gfx908"]


@needs_nvcc
def test_a_file_left_whole_is_named_in_the_hint_when_the_audit_stops_the_build(tmp_path, cuda_env):
    src = project("nvcc_makefile", tmp_path)
    argv = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-v",
        "--no-build-isolation",
        "--no-deps",
        "-w",
        tmp_path / "out",
        src,
        "-C",
        "rocm-build-backend.targets=sm_90",
    ]
    proc = run(argv, env=cuda_env)
    assert proc.returncode != 0
    hints = [e for e in error_lines(proc) if "hint:" in e]
    assert any("left whole (only_sm80.cu for sm_80)" in h for h in hints), hints


@needs_nvcc
def test_cmake_makefiles_options_file_with_the_fallback_folder(tmp_path, cuda_env):
    """CMake's default "Unix Makefiles" generator hands nvcc its include folders in
    --options-file includes_CUDA.rsp, and CUDA_ARCHITECTURES is 80-real;90-real: before, the pinned
    nvcc ran that compile untouched (a wheel with sm_80 and sm_90, exit 0). The enforcement folder's
    usual place is unusable here (XDG_CACHE_HOME names a file): before, enforcement turned itself off."""
    pytest.importorskip("scikit_build_core")
    if shutil.which("cmake") is None or shutil.which("make") is None:
        pytest.skip("needs cmake and make")
    (tmp_path / "not-a-folder").write_text("")
    cuda_env["XDG_CACHE_HOME"] = str(tmp_path / "not-a-folder")
    wheel, log = build("cmake_cuda_optfile", tmp_path, cuda_env, "rocm-build-backend.targets=sm_90")
    assert per_file(wheel) == {"_kernels": ["sm_90"]}
    enforced = read_stamp(wheel)["enforced"]
    assert (enforced["compiles"], enforced["rewritten"], enforced["dropped"]) == (1, 1, ["sm_80"])
    fallback = Path(cuda_env["TMPDIR"]) / f"rocm-build-backend-{os.getuid()}" / "enforce"
    assert f"enforce: pinned compilers in {fallback}" in log and "enforcement is off" not in log


@needs_nvcc
def test_no_usable_enforcement_folder_stops_the_build(tmp_path, cuda_env):
    """No usual folder (XDG_CACHE_HOME names a file) and a temporary folder anyone can write (not
    sticky): one error line, a hint naming enforce = false, no wheel; before, exit 0 without enforcement."""
    (tmp_path / "not-a-folder").write_text("")
    shared = Path(cuda_env["TMPDIR"])
    shared.chmod(0o777)
    cuda_env["XDG_CACHE_HOME"] = str(tmp_path / "not-a-folder")
    src = project("cmake_cuda_optfile", tmp_path)
    proc = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            tmp_path / "out",
            src,
            "-C",
            "rocm-build-backend.targets=sm_90",
        ],
        env=cuda_env,
    )
    assert proc.returncode != 0 and not list((tmp_path / "out").glob("*.whl"))
    errors = error_lines(proc)
    assert len([e for e in errors if "error:" in e]) == 1, errors
    assert any("error: no folder for the pinned compilers can be used" in e for e in errors), errors
    assert any("hint:" in e and "enforce = false" in e for e in errors), errors


@needs_nvcc
@pytest.mark.parametrize("verify", ["error", "warn"])
def test_targets_beyond_the_plan_fail_the_build_and_prebuilt_files_are_listed(tmp_path, cuda_env, verify):
    """A setup.py that runs the real nvcc by its own path (the pinned programs never see it) for
    sm_80 and sm_90, and a prebuilt sm_80 + sm_90 fatbin of the sources copied in as it is. Before: exit 0
    with sm_80 in the wheel. Now the extra sm_80 of the compiled library fails the build (verify =
    "warn": a warning, and the stamp says so); the prebuilt file is listed, not failed."""
    cuda_env["BYPASS_NVCC"] = str(Path(cuda_env["CUDA_HOME"]) / "bin" / "nvcc")
    src = project("nvcc_bypass", tmp_path)
    proc = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            tmp_path / "out",
            src,
            "-C",
            "rocm-build-backend.targets=sm_90",
            "-C",
            f"rocm-build-backend.verify={verify}",
        ],
        env=cuda_env,
    )
    log = proc.stdout + proc.stderr
    assert (
        "audit: nvcc_bypass/prebuilt/k_fat.fatbin holds sm_80 beyond sm_90: a prebuilt file copied from the "
        "sources (allowed)"
    ) in log
    extra = "nvcc_bypass/_kernels.cpython"
    if verify == "error":
        assert proc.returncode != 0 and not list((tmp_path / "out").glob("*.whl"))
        errors = error_lines(proc)
        assert any("error:" in e and extra in e and "holds sm_80 beyond the targets sm_90" in e for e in errors), errors
        assert any("hint:" in e and "did not see" in e for e in errors), errors
        return
    assert proc.returncode == 0, log[-3000:]
    assert "warning: " in log and "holds sm_80 beyond the targets sm_90" in log
    exact = read_stamp(only_wheel(tmp_path / "out"))["enforced"]["exact"]
    assert exact["ok"] is False
    assert {m.split(".cpython")[0]: f for m, f in exact["files"].items()} == {
        "nvcc_bypass/_kernels": {"extra": ["sm_80"], "why": "unexplained"},
        "nvcc_bypass/prebuilt/k_fat.fatbin": {"extra": ["sm_80"], "why": "prebuilt"},
    }
