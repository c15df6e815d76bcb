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


@pytest.mark.parametrize(
    "name, expected",
    [
        ("FORCE_CUDA", "gpu-on"),
        ("WITH_CUDA", "gpu-on"),
        ("BUILD_CUDA_EXT", "gpu-on"),
        ("CT_CUBLAS", "gpu-on"),
        ("DS_BUILD_OPS", "gpu-on"),
        ("VLLM_TARGET_DEVICE", "gpu-on"),
        ("BUILD_TARGET", "gpu-on"),
        ("CAUSAL_CONV1D_FORCE_BUILD", "prebuilt"),
        ("FLASH_ATTENTION_SKIP_CUDA_BUILD", "gpu-off"),
        ("FORCE_ONLY_CPU", "gpu-off"),
        ("TORCH_CUDA_ARCH_LIST", "targets"),
        ("FLASH_ATTN_CUDA_ARCHS", "targets"),
        ("HIP_ARCHITECTURES", "targets"),
        ("MAX_JOBS", "jobs"),
        ("NVCC_THREADS", "jobs"),
        ("CUPY_NUM_BUILD_JOBS", "jobs"),
        ("NVCC_FLAGS", "flags"),
        # not switches: toolkit locations, compilers, versions, run-time device choice, a backend's features
        ("CUDA_HOME", None),
        ("ROCM_PATH", None),
        ("PYTORCH_NVCC", None),
        ("CUDA_VERSION", None),
        ("CUDA_VISIBLE_DEVICES", None),
        ("ENABLE_HIP_FMHA_RTN_BF16_CONVERT", None),
        ("BUILD_DOCS", None),
        ("CAUSAL_CONV1D_FORCE_CXX11_ABI", None),
    ],
)
def test_roles(name, expected):
    assert role(name) == expected


@pytest.mark.parametrize(
    "name, expected",
    [
        ("GGML_CUDA", "gpu-on"),
        ("GGML_HIP", "gpu-on"),
        ("CT_CUBLAS", "gpu-on"),
        ("USE_ROCM", "gpu-on"),
        ("GGML_CUDA_FORCE_CUBLAS", None),
        ("GGML_HIP_ROCWMMA_FATTN", None),
        ("GGML_NATIVE", None),
    ],
)
def test_cmake_option_roles(name, expected):
    assert option_role(name) == expected


def test_python_reads_every_spelling():
    text = """import os
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
"""
    assert names(scan_python(text, "setup.py")) == [
        (3, "FORCE_CUDA", "gpu-on", "1"),
        (4, "X_FORCE_BUILD", "prebuilt", "TRUE"),
        (5, "WITH_CUDA", "gpu-on", "1"),
        (6, "USE_ROCM", "gpu-on", "1"),
        (7, "TORCH_CUDA_ARCH_LIST", "targets", None),
        (9, "CT_CUBLAS", "gpu-on", "1"),
        (12, "DS_BUILD_OPS", "gpu-on", "1"),
    ]


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
        (15, "download", "urllib.request.urlretrieve", None, None),
    ]


def test_python_that_does_not_parse_gives_nothing():
    assert scan_python("def broken(:\n", "setup.py") == []


def test_cmake_options_env_and_hard_coded_targets():
    text = """# option(GGML_HIP "commented out" OFF)
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
"""
    found = scan_text(text, "CMakeLists.txt")
    # every off-by-default option is listed; these two gate nothing a GPU build needs
    assert [(f.name, f.role) for f in found if f.role == "option"] == [
        ("GGML_CUDA_F16", "option"),
        ("BUILD_TESTS", "option"),
    ]
    found = [f for f in found if f.role != "option"]
    assert [(f.line, f.kind, f.name, f.value, f.vendor) for f in found] == [
        (2, "cmake-option", "GGML_CUDA", "ON", "nvidia"),
        (4, "cmake-option", "GGML_HIP", "ON", "amd"),
        (6, "cmake-env", "FORCE_CUDA", None, None),
        (7, "cmake-env", "FORCE_CUDA", None, None),
        (9, "hard-coded", "CMAKE_CUDA_ARCHITECTURES", "sm_80 sm_90 compute_90", "nvidia"),
        (10, "hard-coded", "CUDA_ARCHITECTURES", "sm_75 compute_75 sm_86 compute_86", "nvidia"),
        (11, "hard-coded", "--offload-arch", "gfx906", "amd"),
    ]


def test_cmake_follows_includes_inside_the_project_only(tmp_path):
    (tmp_path / "cmake").mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "CMakeLists.txt").write_text(
        "include(gpu)\nadd_subdirectory(sub)\ninclude(/etc/passwd)\nadd_subdirectory(${CMAKE_CURRENT_SOURCE_DIR}/sub)\n"
    )
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
    text = """[tool.scikit-build.cmake.define]
GGML_CUDA = {env = "GGML_CUDA", default = "OFF"}
GGML_HIP = "OFF"
GGML_NATIVE = "OFF"
"""
    assert [(f.line, f.name, f.role, f.default) for f in scan_pyproject(text, "pyproject.toml")] == [
        (2, "GGML_CUDA", "gpu-on", "OFF"),
        (3, "GGML_HIP", "gpu-on", "OFF"),
    ]


@pytest.mark.parametrize(
    "targets, default, name, vendor, expected",
    [
        (["sm_90", "compute_90"], "80;90;100;120", "FLASH_ATTN_CUDA_ARCHS", "nvidia", "90"),
        (["sm_90a", "sm_100"], "8.0;9.0", "X", "nvidia", "9.0a;10.0"),
        (["sm_90"], None, "TORCH_CUDA_ARCH_LIST", "nvidia", "9.0"),
        (["sm_80", "sm_90"], "sm_70,sm_75", "X", "nvidia", "sm_80,sm_90"),
        (["gfx90a", "gfx942"], "gfx90a gfx908", "HIP_ARCHITECTURES", "amd", "gfx90a gfx942"),
        (["gfx942"], "native", "GPU_ARCHS", "amd", "gfx942"),
    ],
)
def test_render_in_the_projects_own_terms(targets, default, name, vendor, expected):
    assert render(targets, default, name, vendor) == expected


def _resolve(found, **kw):
    args = dict(
        vendor="nvidia",
        targets=["sm_90"],
        env_out={},
        env_user={},
        forwarded={},
        backend_kind="setuptools",
        enforce=True,
        profile=None,
    )
    args.update(kw)
    return resolve(found, **args)


def test_resolve_says_who_sets_what():
    f = [
        Finding("setup.py", 3, "env", "FORCE_CUDA", "gpu-on", "1", "0"),
        Finding("setup.py", 4, "env", "X_FORCE_BUILD", "prebuilt", "TRUE", "FALSE"),
        Finding("setup.py", 5, "env", "X_SKIP_CUDA_BUILD", "gpu-off", "TRUE", "FALSE"),
        Finding("setup.py", 6, "env", "TORCH_CUDA_ARCH_LIST", "targets"),
        Finding("setup.py", 7, "env", "FLASH_ATTN_CUDA_ARCHS", "targets", default="80;90"),
        Finding("setup.py", 8, "cuda-guard", "torch.cuda.is_available()", "guard"),
        Finding("setup.py", 9, "download", "urlretrieve", "prebuilt"),
        Finding("setup.py", 10, "hard-coded", "-gencode", "hard-coded", "sm_80 sm_90", vendor="nvidia"),
        Finding("CMakeLists.txt", 2, "cmake-option", "GGML_CUDA", "gpu-on", "ON", "OFF"),
    ]
    got = _resolve(f, env_out={"TORCH_CUDA_ARCH_LIST": "9.0"}, env_user={"X_SKIP_CUDA_BUILD": "TRUE"})
    assert [(s.action, s.todo) for s in got] == [
        ("todo", "FORCE_CUDA=1"),
        ("todo", "X_FORCE_BUILD=TRUE"),
        ("warn", "unset X_SKIP_CUDA_BUILD"),
        ("set", None),
        ("enforced", "FLASH_ATTN_CUDA_ARCHS=90"),
        ("info", None),
        ("todo", "X_FORCE_BUILD=TRUE"),
        ("enforced", None),
        ("todo", "CMAKE_ARGS=-DGGML_CUDA=ON"),
    ]
    assert "its compiles keep sm_90" in got[7].detail
    skbuild = _resolve(f[-1:], backend_kind="scikit-build-core")
    assert skbuild[0].todo == "-C cmake.define.GGML_CUDA=ON"
    given = _resolve(f[-1:], forwarded={"cmake.define.GGML_CUDA": "ON"})
    assert given[0].action == "set"
    off = _resolve(f[7:8], enforce=False)
    assert off[0].action == "warn" and "enforce = false" in off[0].detail


def test_resolve_for_the_other_vendor_is_information():
    f = [
        Finding("setup.py", 3, "env", "HIP_ARCHITECTURES", "targets", default="native"),
        Finding("setup.py", 4, "env", "GPU_ARCHS", "targets", vendor="amd"),
        Finding("CMakeLists.txt", 2, "cmake-option", "GGML_HIP", "gpu-on", "ON", "OFF", vendor="amd"),
    ]
    assert [s.action for s in _resolve(f)] == ["info", "info", "info"]
    amd = _resolve(f, vendor="amd", targets=["gfx942"])
    assert [s.todo for s in amd] == ["HIP_ARCHITECTURES=gfx942", "GPU_ARCHS=gfx942", "CMAKE_ARGS=-DGGML_HIP=ON"]


# --- what an option gates, and applying it ---------------------------------------------------------


def _tree(root, files: dict[str, str]):
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


GATED = {
    "CMakeLists.txt": """cmake_minimum_required(VERSION 3.18)
project(demo LANGUAGES CXX)
option(USE_CUDA "cuda" OFF)
option(USE_GPU "the OpenCL backend" OFF)
option(USE_ROCM "rocm")
option(BUILD_DOCS "docs" OFF)
set(CORE_DIR ${CMAKE_CURRENT_SOURCE_DIR}/core)
add_subdirectory(${CORE_DIR})
add_subdirectory(external_libs/fmt)
add_subdirectory(sub)
include(cmake/hip.cmake)
if(USE_GPU)
  find_package(OpenCL REQUIRED)
  find_package(Boost COMPONENTS compute)
endif()
""",
    "core/CMakeLists.txt": """option(CORE_KERNELS "kernels" OFF)
if(USE_CUDA)
  set(WITH_KERNELS ON)
endif()
if(WITH_KERNELS)
  enable_language(CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 70 80)
  endif()
  add_library(k kernels/a.cu)
endif()
if(CORE_KERNELS)
  target_sources(core PRIVATE b.cu)
endif()
""",
    "external_libs/fmt/CMakeLists.txt": """option(FMT_CUDA "vendored" OFF)
if(FMT_CUDA)
  enable_language(CUDA)
endif()
""",
    "sub/CMakeLists.txt": """project(sub)
option(SUB_CUDA "a subproject's own" OFF)
if(SUB_CUDA)
  find_package(CUDAToolkit)
endif()
""",
    "cmake/hip.cmake": """if(USE_ROCM)
  enable_language(HIP)
  find_package(hip REQUIRED)
endif()
""",
}


def test_cmake_options_are_judged_by_what_they_gate(tmp_path):
    found = {f.name: f for f in scan(_tree(tmp_path, GATED), cmake=True)}
    assert found["USE_CUDA"].gates == ("nvidia",) and not found["USE_CUDA"].left_off
    assert (
        "enable_language(CUDA) at core/CMakeLists.txt L6" in found["USE_CUDA"].evidence
    )  # through set(), a variable path
    assert found["USE_ROCM"].gates == ("amd",) and "cmake/hip.cmake L2" in found["USE_ROCM"].evidence  # no default: OFF
    assert found["USE_GPU"].left_off.startswith("it needs another API: find_package(OpenCL)")
    assert found["FMT_CUDA"].left_off == "vendored code under external_libs/"
    assert found["SUB_CUDA"].left_off == "a subproject with its own project() in sub/"
    assert found["CORE_KERNELS"].gates == ("nvidia",) and "the source b.cu" in found["CORE_KERNELS"].evidence
    assert found["BUILD_DOCS"].role == "option" and not found["BUILD_DOCS"].gates
    arch = found["CMAKE_CUDA_ARCHITECTURES"]
    assert arch.fallback and arch.value == "sm_70 compute_70 sm_80 compute_80"


def _apply(found, **kw):
    return _resolve(found, apply=True, backend_kind="scikit-build-core", **kw)


def test_apply_turns_on_exactly_the_switches_that_gate_the_vendors_build(tmp_path):
    found = scan(_tree(tmp_path, GATED), cmake=True)
    nv = {s.finding.name: s for s in _apply(found)}
    assert sorted(n for n, s in nv.items() if s.applied) == ["CORE_KERNELS", "USE_CUDA"]
    assert nv["USE_CUDA"].applied == "-C cmake.define.USE_CUDA=ON"
    assert nv["USE_GPU"].action == "info" and "left off: it needs another API" in nv["USE_GPU"].detail
    assert nv["FMT_CUDA"].detail == "left off: vendored code under external_libs/"
    assert nv["BUILD_DOCS"].detail.startswith("left off: OFF by default")
    assert nv["USE_ROCM"].action == "info" and "for AMD" in nv["USE_ROCM"].detail
    assert nv["CMAKE_CUDA_ARCHITECTURES"].action == "info" and "fallback" in nv["CMAKE_CUDA_ARCHITECTURES"].detail
    amd = {s.finding.name: s for s in _apply(found, vendor="amd", targets=["gfx942"])}
    assert [n for n, s in amd.items() if s.applied] == ["USE_ROCM"]
    # a value the user gave wins; with switches = "name" nothing is applied
    given = {s.finding.name: s for s in _apply(found, forwarded={"cmake.define.USE_CUDA": "OFF"})}
    assert given["USE_CUDA"].applied is None and given["USE_CUDA"].detail == "given USE_CUDA=OFF"
    argv = {s.finding.name: s for s in _apply(found, env_out={"CMAKE_ARGS": "-DUSE_CUDA=OFF"})}
    assert argv["USE_CUDA"].applied is None
    named = {s.finding.name: s for s in _resolve(found, backend_kind="scikit-build-core")}
    assert not any(s.applied for s in named.values()) and named["USE_CUDA"].action == "todo"


TORCH_STYLE = """import os, torch
from torch.utils.cpp_extension import CppExtension, CUDAExtension
WITH_CUDA = False
if torch.cuda.is_available():
    WITH_CUDA = True
suffices = ['cpu', 'cuda'] if WITH_CUDA else ['cpu']
if os.getenv('FORCE_CUDA', '0') == '1':
    suffices = ['cuda', 'cpu']
if os.getenv('FORCE_ONLY_CPU', '0') == '1':
    suffices = ['cpu']
if os.getenv('FORCE_MLU', '0') == '1':
    suffices = ['mlu']
USE_TRITON = os.getenv('X_TRITON_AMD_ENABLE', 'FALSE') == 'TRUE'
cuda_args = os.getenv('X_CUDA_ARGS')
def get_extensions():
    if os.getenv('X_WITH_OPS', '0') == '0':
        return []
    out = []
    for suffix in suffices:
        Extension = CppExtension if suffix == 'cpu' else CUDAExtension
        if not USE_TRITON:
            out.append(Extension('x', ['a.cpp'], extra_compile_args={'nvcc': [cuda_args]}))
    return out
"""


def test_torch_style_switches_are_judged_by_the_extension_they_decide():
    found = {f.name: f for f in scan_python(TORCH_STYLE, "setup.py")}
    assert found["FORCE_CUDA"].gates == ("amd", "nvidia") and "CUDAExtension" in found["FORCE_CUDA"].evidence
    assert found["X_WITH_OPS"].role == "gpu-on" and found["X_WITH_OPS"].value == "1"  # named like no switch
    assert found["X_CUDA_ARGS"].role == "flags"
    assert "FORCE_MLU" not in found and "X_TRITON_AMD_ENABLE" not in found  # another device; a switch that turns it off
    for vendor, targets in (("nvidia", ["sm_90"]), ("amd", ["gfx942"])):
        got = {s.finding.name: s for s in _resolve(list(found.values()), apply=True, vendor=vendor, targets=targets)}
        assert sorted(s.applied for s in got.values() if s.applied) == ["FORCE_CUDA=1", "X_WITH_OPS=1"]
        assert got["FORCE_ONLY_CPU"].applied is None
    mine = _resolve(list(found.values()), apply=True, env_user={"FORCE_CUDA": "0"})  # the user's value wins
    user = next(s for s in mine if s.finding.name == "FORCE_CUDA")
    assert user.action == "warn" and user.applied is None and user.todo == "FORCE_CUDA=1"


def test_the_plan_gives_the_build_what_it_applies(tmp_path):
    from rocm_build_backend.builder.plan import make_plan
    from rocm_build_backend.builder.settings import Settings
    from rocm_build_backend.gpu.targets import parse_targets

    found = scan(_tree(tmp_path, GATED), cmake=True)
    plan = make_plan(
        parse_targets("sm_90"),
        "settings",
        Settings(backend="scikit_build_core.build"),
        {},
        backend_kind="scikit-build-core",
        findings=found,
    )
    assert plan.config_settings["cmake.define.USE_CUDA"] == "ON"
    assert "cmake.define.USE_GPU" not in plan.config_settings
    lines = [line for line in plan.summary() if line.startswith("switch") and "USE_CUDA" in line]
    assert lines and "CMakeLists.txt L3" in lines[0] and "applied -C cmake.define.USE_CUDA=ON" in lines[0]
    off = make_plan(
        parse_targets("sm_90"),
        "settings",
        Settings(backend="scikit_build_core.build", switches="name"),
        {},
        backend_kind="scikit-build-core",
        findings=found,
    )
    assert "cmake.define.USE_CUDA" not in off.config_settings
    no_gpu = make_plan(
        parse_targets("sm_90"),
        "settings",
        Settings(backend="scikit_build_core.build", verify="off"),
        {},
        backend_kind="scikit-build-core",
        findings=found,
    )
    assert "cmake.define.USE_CUDA" not in no_gpu.config_settings  # verify = "off": the project says it has no GPU code
    torch_plan = make_plan(
        parse_targets("sm_90"),
        "settings",
        Settings(),
        {"CMAKE_ARGS": "-DX=1"},
        backend_kind="setuptools",
        findings=scan_python(TORCH_STYLE, "setup.py"),
    )
    assert torch_plan.env["FORCE_CUDA"] == "1" and torch_plan.env["X_WITH_OPS"] == "1"


# --- bounded reading of untrusted build files ------------------------------------------------------

_BAD = """
import json, sys, time
from pathlib import Path
from rocm_build_backend.builder.switches import scan
from rocm_build_backend.builder.switches.cmake import scan_text
from rocm_build_backend.builder.switches.findings import bounded
texts = {
    "blanks": "set(CMAKE_CUDA_ARCHITECTURES" + " " * 2000,
    "blank_lines": "set(CMAKE_CUDA_ARCHITECTURES" + " \\n" * 2000,
    "newlines": "\\n" * 80_000,
    "quotes": '"\\\\' * 50_000,
    "repeated": "set(CMAKE_CUDA_ARCHITECTURES 80 90)\\n" * ((1 << 20) // 36),
    "varied": "".join(f"set(CMAKE_CUDA_ARCHITECTURES {10 + i % 900} {i})\\n" for i in range(3_000)),
    "options": "".join(f'option(O{i} "x" OFF)\\n' for i in range(2_000)),
    "nested": 'option(A "a" OFF)\\n' + "if(A)\\n" * 50_000 + "enable_language(CUDA)\\n",
    "long_if": 'option(A "a" OFF)\\nif(' + "A " * 100_000 + ")\\n" + "set(X 1)\\n" * 20_000,
}
out = {name: len(bounded(scan_text(text, "CMakeLists.txt"))) for name, text in texts.items()}
out["more"] = bounded(scan_text(texts["varied"], "CMakeLists.txt"))[-1].value
print(json.dumps(out))
"""


def test_bad_cmake_inputs_are_read_in_linear_time_and_capped():
    """Each input that made the old reader backtrack for minutes, run in a child under a timeout:
    a regression fails here instead of hanging the suite."""
    import json
    import subprocess
    import sys
    from helpers import ROOT

    proc = subprocess.run([sys.executable, "-c", _BAD], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got == {
        "blanks": 0,
        "blank_lines": 0,
        "newlines": 0,
        "quotes": 0,
        "repeated": 1,
        "varied": 201,
        "options": 201,
        "nested": 1,
        "long_if": 1,
        "more": str(3_000 - 200),
    }


def test_build_files_that_are_no_regular_files_in_the_tree_are_not_read(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from helpers import ROOT

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "setup.py").write_text("import os\nos.getenv('FORCE_CUDA')\nfrom setuptools import setup\n")
    (outside / "CMakeLists.txt").write_text('option(USE_CUDA "x" OFF)\n')
    fifo, link = tmp_path / "fifo", tmp_path / "link"
    fifo.mkdir(), link.mkdir()
    os.mkfifo(fifo / "setup.py")
    os.mkfifo(fifo / "CMakeLists.txt")
    os.mkfifo(fifo / "setup.cfg")
    (link / "setup.py").symlink_to(outside / "setup.py")
    (link / "CMakeLists.txt").write_text("add_subdirectory(../outside)\ninclude(/dev/zero)\n")
    code = (
        "import json, sys\nfrom pathlib import Path\nfrom rocm_build_backend.builder.switches import scan\n"
        "from rocm_build_backend.builder.parallel import read_extensions\n"
        "print(json.dumps([[len(scan(Path(p), cmake=True)), read_extensions(Path(p), {}).sites] for p in sys.argv[1:]]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(fifo), str(link)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [[0, 0], [0, 0]]
