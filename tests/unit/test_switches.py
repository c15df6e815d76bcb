"""A project's own GPU switches: read from its build files (tables of real snippets) and resolved into
what the build does (pure). The real sdists of the corpus and a real build that came out without
device code are in tests/integration/test_switches_sdists.py."""

from __future__ import annotations

import pytest

from rocm_build_backend.builder.switches import Finding, scan
from rocm_build_backend.builder.switches.actions import render, resolve
from rocm_build_backend.builder.switches.cmake import scan_pyproject, scan_text
from rocm_build_backend.builder.switches.names import option_role, role
from rocm_build_backend.builder.switches.python import scan_python

def names(found: list[Finding]) -> list[tuple[int, str, str, str | None]]:
    return [(f.line, f.name, f.role, f.value) for f in found]


@pytest.mark.parametrize("name, expected", [
    ("FORCE_CUDA", "gpu-on"), ("WITH_CUDA", "gpu-on"), ("BUILD_CUDA_EXT", "gpu-on"), ("CT_CUBLAS", "gpu-on"),
    ("DS_BUILD_OPS", "gpu-on"), ("VLLM_TARGET_DEVICE", "gpu-on"), ("BUILD_TARGET", "gpu-on"),
    ("CAUSAL_CONV1D_FORCE_BUILD", "prebuilt"), ("FLASH_ATTENTION_SKIP_CUDA_BUILD", "gpu-off"),
    ("FORCE_ONLY_CPU", "gpu-off"), ("TORCH_CUDA_ARCH_LIST", "targets"), ("FLASH_ATTN_CUDA_ARCHS", "targets"),
    ("HIP_ARCHITECTURES", "targets"), ("MAX_JOBS", "jobs"), ("NVCC_THREADS", "jobs"),
    ("CUPY_NUM_BUILD_JOBS", "jobs"), ("NVCC_FLAGS", "flags"),
    # not switches: toolkit locations, compilers, versions, run-time device choice, a backend's features
    ("CUDA_HOME", None), ("ROCM_PATH", None), ("PYTORCH_NVCC", None), ("CUDA_VERSION", None),
    ("CUDA_VISIBLE_DEVICES", None), ("ENABLE_HIP_FMHA_RTN_BF16_CONVERT", None), ("BUILD_DOCS", None),
    ("CAUSAL_CONV1D_FORCE_CXX11_ABI", None),
])
def test_roles(name, expected):
    assert role(name) == expected


@pytest.mark.parametrize("name, expected", [
    ("GGML_CUDA", "gpu-on"), ("GGML_HIP", "gpu-on"), ("CT_CUBLAS", "gpu-on"), ("USE_ROCM", "gpu-on"),
    ("GGML_CUDA_FORCE_CUBLAS", None), ("GGML_HIP_ROCWMMA_FATTN", None), ("GGML_NATIVE", None),
])
def test_cmake_option_roles(name, expected):
    assert option_role(name) == expected


def test_python_reads_every_spelling():
    text = '''import os
from os import environ, getenv
A = os.getenv("FORCE_CUDA", "0") == "1"
B = os.environ.get("X_FORCE_BUILD", "FALSE").upper() in ("TRUE", "1")
C = environ["WITH_CUDA"]
D = "USE_ROCM" in os.environ
E = getenv("TORCH_CUDA_ARCH_LIST")
for key in ["CT_CUBLAS", "CT_INSTRUCTIONS"]:
    os.environ.get(key)
def get_env_if_set(key, default=""):
    return os.environ.get(key, None) or default
F = int(get_env_if_set("DS_BUILD_OPS", 0))
G = os.getenv("CUDA_HOME")
'''
    assert names(scan_python(text, "setup.py")) == [
        (3, "FORCE_CUDA", "gpu-on", "1"), (4, "X_FORCE_BUILD", "prebuilt", "TRUE"), (5, "WITH_CUDA", "gpu-on", "1"),
        (6, "USE_ROCM", "gpu-on", "1"), (7, "TORCH_CUDA_ARCH_LIST", "targets", None), (9, "CT_CUBLAS", "gpu-on", "1"),
        (12, "DS_BUILD_OPS", "gpu-on", "1")]


def test_python_guards_downloads_hard_coded_lists_and_branches():
    text = '''"""Docs that say -gencode arch=compute_70,code=sm_70 are no flags."""
import os, torch, urllib.request
from wheel.bdist_wheel import bdist_wheel
IS_ROCM = bool(torch.version.hip)
if torch.cuda.is_available():
    pass
flags = ["-gencode", "arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=[sm_90,compute_90]"]
hip = ["--offload-arch=gfx908", f"--offload-arch={os.getenv('HIP_ARCHITECTURES', 'native')}"]
if IS_ROCM:
    archs = os.getenv("GPU_ARCHS", "native")
else:
    archs = os.getenv("X_CUDA_ARCHS", "80;90")
class Cached(bdist_wheel):
    def run(self):
        urllib.request.urlretrieve("https://example.invalid/x.whl", "x.whl")
def elsewhere():
    urllib.request.urlretrieve("https://example.invalid/y.whl", "y.whl")
'''
    found = scan_python(text, "setup.py")
    assert [(f.line, f.kind, f.name, f.value, f.vendor) for f in found] == [
        (5, "cuda-guard", "torch.cuda.is_available()", None, None),
        (7, "hard-coded", "-gencode", "sm_80 compute_90 sm_90", "nvidia"),
        (8, "hard-coded", "--offload-arch", "gfx908", "amd"),
        (8, "env", "HIP_ARCHITECTURES", None, None),
        (10, "env", "GPU_ARCHS", None, "amd"),
        (12, "env", "X_CUDA_ARCHS", None, "nvidia"),
        (15, "download", "urllib.request.urlretrieve", None, None)]


def test_python_that_does_not_parse_gives_nothing():
    assert scan_python("def broken(:\n", "setup.py") == []


def test_cmake_options_env_and_hard_coded_targets():
    text = '''# option(GGML_HIP "commented out" OFF)
option(GGML_CUDA "ggml: use CUDA" OFF)
option(GGML_CUDA_F16 "a feature" OFF)
option(GGML_HIP "ggml: use HIP" OFF)
option(BUILD_TESTS "tests" OFF)
if(DEFINED ENV{FORCE_CUDA})
  set(X $ENV{FORCE_CUDA})
endif()
set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
set_target_properties(k PROPERTIES CUDA_ARCHITECTURES "75;86" POSITION_INDEPENDENT_CODE ON)
target_compile_options(k PRIVATE --offload-arch=gfx906)
'''
    found = scan_text(text, "CMakeLists.txt")
    assert [(f.line, f.kind, f.name, f.value, f.vendor) for f in found] == [
        (2, "cmake-option", "GGML_CUDA", "ON", "nvidia"), (4, "cmake-option", "GGML_HIP", "ON", "amd"),
        (6, "cmake-env", "FORCE_CUDA", None, None), (7, "cmake-env", "FORCE_CUDA", None, None),
        (9, "hard-coded", "CMAKE_CUDA_ARCHITECTURES", "sm_80 sm_90 compute_90", "nvidia"),
        (10, "hard-coded", "CUDA_ARCHITECTURES", "sm_75 compute_75 sm_86 compute_86", "nvidia"),
        (11, "hard-coded", "--offload-arch", "gfx906", "amd")]


def test_cmake_follows_includes_inside_the_project_only(tmp_path):
    (tmp_path / "cmake").mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "CMakeLists.txt").write_text("include(gpu)\nadd_subdirectory(sub)\ninclude(/etc/passwd)\n"
                                             "add_subdirectory(${CMAKE_CURRENT_SOURCE_DIR}/sub)\n")
    (tmp_path / "cmake" / "gpu.cmake").write_text('option(USE_ROCM "rocm" OFF)\n')
    (tmp_path / "sub" / "CMakeLists.txt").write_text('option(USE_CUDA "cuda" OFF)\n')
    found = scan(tmp_path)
    assert [(f.file, f.name) for f in found] == [("cmake/gpu.cmake", "USE_ROCM"), ("sub/CMakeLists.txt", "USE_CUDA")]


def test_a_cmake_file_beside_a_setuptools_build_that_never_runs_cmake_is_not_read(tmp_path):
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tmp_path / "CMakeLists.txt").write_text('option(WITH_CUDA "cuda" OFF)\n')
    assert scan(tmp_path) == []
    assert [f.name for f in scan(tmp_path, cmake=True)] == ["WITH_CUDA"]


def test_pyproject_scikit_build_defines():
    text = '''[tool.scikit-build.cmake.define]
GGML_CUDA = {env = "GGML_CUDA", default = "OFF"}
GGML_HIP = "OFF"
GGML_NATIVE = "OFF"
'''
    assert [(f.line, f.name, f.role, f.default) for f in scan_pyproject(text, "pyproject.toml")] == [
        (2, "GGML_CUDA", "gpu-on", "OFF"), (3, "GGML_HIP", "gpu-on", "OFF")]


@pytest.mark.parametrize("targets, default, name, vendor, expected", [
    (["sm_90", "compute_90"], "80;90;100;120", "FLASH_ATTN_CUDA_ARCHS", "nvidia", "90"),
    (["sm_90a", "sm_100"], "8.0;9.0", "X", "nvidia", "9.0a;10.0"),
    (["sm_90"], None, "TORCH_CUDA_ARCH_LIST", "nvidia", "9.0"),
    (["sm_80", "sm_90"], "sm_70,sm_75", "X", "nvidia", "sm_80,sm_90"),
    (["gfx90a", "gfx942"], "gfx90a gfx908", "HIP_ARCHITECTURES", "amd", "gfx90a gfx942"),
    (["gfx942"], "native", "GPU_ARCHS", "amd", "gfx942"),
])
def test_render_in_the_projects_own_terms(targets, default, name, vendor, expected):
    assert render(targets, default, name, vendor) == expected


def _resolve(found, **kw):
    args = dict(vendor="nvidia", targets=["sm_90"], env_out={}, env_user={}, forwarded={},
                backend_kind="setuptools", enforce=True, profile=None)
    args.update(kw)
    return resolve(found, **args)


def test_resolve_says_who_sets_what():
    f = [Finding("setup.py", 3, "env", "FORCE_CUDA", "gpu-on", "1", "0"),
         Finding("setup.py", 4, "env", "X_FORCE_BUILD", "prebuilt", "TRUE", "FALSE"),
         Finding("setup.py", 5, "env", "X_SKIP_CUDA_BUILD", "gpu-off", "TRUE", "FALSE"),
         Finding("setup.py", 6, "env", "TORCH_CUDA_ARCH_LIST", "targets"),
         Finding("setup.py", 7, "env", "FLASH_ATTN_CUDA_ARCHS", "targets", default="80;90"),
         Finding("setup.py", 8, "cuda-guard", "torch.cuda.is_available()", "guard"),
         Finding("setup.py", 9, "download", "urlretrieve", "prebuilt"),
         Finding("setup.py", 10, "hard-coded", "-gencode", "hard-coded", "sm_80 sm_90", vendor="nvidia"),
         Finding("CMakeLists.txt", 2, "cmake-option", "GGML_CUDA", "gpu-on", "ON", "OFF")]
    got = _resolve(f, env_out={"TORCH_CUDA_ARCH_LIST": "9.0"}, env_user={"X_SKIP_CUDA_BUILD": "TRUE"})
    assert [(s.action, s.todo) for s in got] == [
        ("todo", "FORCE_CUDA=1"), ("todo", "X_FORCE_BUILD=TRUE"), ("warn", "unset X_SKIP_CUDA_BUILD"),
        ("set", None), ("enforced", "FLASH_ATTN_CUDA_ARCHS=90"), ("info", None), ("todo", "X_FORCE_BUILD=TRUE"),
        ("enforced", None), ("todo", "CMAKE_ARGS=-DGGML_CUDA=ON")]
    assert "its compiles keep sm_90" in got[7].detail
    skbuild = _resolve(f[-1:], backend_kind="scikit-build-core")
    assert skbuild[0].todo == "-C cmake.define.GGML_CUDA=ON"
    given = _resolve(f[-1:], forwarded={"cmake.define.GGML_CUDA": "ON"})
    assert given[0].action == "set"
    off = _resolve(f[7:8], enforce=False)
    assert off[0].action == "warn" and "enforce = false" in off[0].detail


def test_resolve_for_the_other_vendor_is_information():
    f = [Finding("setup.py", 3, "env", "HIP_ARCHITECTURES", "targets", default="native"),
         Finding("setup.py", 4, "env", "GPU_ARCHS", "targets", vendor="amd"),
         Finding("CMakeLists.txt", 2, "cmake-option", "GGML_HIP", "gpu-on", "ON", "OFF", vendor="amd")]
    assert [s.action for s in _resolve(f)] == ["info", "info", "info"]
    amd = _resolve(f, vendor="amd", targets=["gfx942"])
    assert [s.todo for s in amd] == ["HIP_ARCHITECTURES=gfx942", "GPU_ARCHS=gfx942", "CMAKE_ARGS=-DGGML_HIP=ON"]
