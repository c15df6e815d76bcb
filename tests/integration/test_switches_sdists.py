"""A project's own GPU switches in real sdists and a real build: ``plan --json`` names every switch of
every real sdist of the corpus (an answer key read off the sources, each entry checked against its
line), says what the build does about them, and a real build that came out without device code
names the switch in its hint."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import MORE_PINS, PROJECTS, ROOT, CorpusError, error_lines, load_pins, run, sdist_tree, validate_json

# --- the real sdists ------------------------------------------------------------------------------

#: Every GPU switch of the corpus, read off the sources: (file, line, name). `plan --json` for an
#: NVIDIA build must name each; the test checks that each line names it.
ANSWERS: dict[tuple[str, str], list[tuple[str, int, str]]] = {
    ("llama-cpp-python", "0.3.16"): [
        ("vendor/llama.cpp/ggml/CMakeLists.txt", 157, "GGML_CUDA"),
        ("vendor/llama.cpp/ggml/CMakeLists.txt", 173, "GGML_HIP"),
    ],
    ("flash-attn", "2.8.3.post2"): [
        ("setup.py", 40, "BUILD_TARGET"),
        ("setup.py", 61, "FLASH_ATTENTION_FORCE_BUILD"),
        ("setup.py", 62, "FLASH_ATTENTION_SKIP_CUDA_BUILD"),
        ("setup.py", 70, "FLASH_ATTN_CUDA_ARCHS"),
        ("setup.py", 124, "NVCC_THREADS"),
        ("setup.py", 181, "-gencode"),
        ("setup.py", 342, "GPU_ARCHS"),
        ("setup.py", 491, "urllib.request.urlretrieve"),
    ],
    ("xformers", "0.0.35"): [
        ("setup.py", 210, "torch.cuda.is_available()"),
        ("setup.py", 214, "FORCE_CUDA"),
        ("setup.py", 215, "TORCH_CUDA_ARCH_LIST"),
        ("setup.py", 278, "HIP_ARCHITECTURES"),
        ("setup.py", 303, "HIP_ARCHITECTURES"),
    ],
    ("deepspeed", "0.19.8"): [("setup.py", 122, "TORCH_CUDA_ARCH_LIST"), ("setup.py", 129, "DS_BUILD_OPS")],
    ("vllm", "0.33.0"): [
        ("setup.py", 110, "VLLM_TARGET_DEVICE"),
        ("setup.py", 1541, "PYTORCH_ROCM_ARCH"),
        ("cmake/utils.cmake", 556, "PYTORCH_ROCM_ARCH"),
    ],
    ("amd-aiter", "0.1.7.post2.dev18"): [("setup.py", 21, "BUILD_TARGET")],
    ("causal-conv1d", "1.7.0"): [
        ("setup.py", 43, "CAUSAL_CONV1D_FORCE_BUILD"),
        ("setup.py", 44, "CAUSAL_CONV1D_SKIP_CUDA_BUILD"),
        ("setup.py", 180, "-gencode"),
        ("setup.py", 213, "HIP_ARCHITECTURES"),
        ("setup.py", 330, "urllib.request.urlretrieve"),
    ],
    ("mamba-ssm", "2.3.2.post1"): [
        ("setup.py", 41, "MAMBA_FORCE_BUILD"),
        ("setup.py", 42, "MAMBA_SKIP_CUDA_BUILD"),
        ("setup.py", 179, "TORCH_CUDA_ARCH_LIST"),
        ("setup.py", 182, "-gencode"),
        ("setup.py", 217, "HIP_ARCHITECTURES"),
        ("setup.py", 343, "urllib.request.urlretrieve"),
    ],
    ("torch-scatter", "2.1.2"): [
        ("setup.py", 18, "torch.cuda.is_available()"),
        ("setup.py", 21, "FORCE_CUDA"),
        ("setup.py", 23, "FORCE_ONLY_CUDA"),
        ("setup.py", 25, "FORCE_ONLY_CPU"),
        ("setup.py", 70, "NVCC_FLAGS"),
    ],
    ("causal-conv1d", "1.6.0"): [
        ("setup.py", 43, "CAUSAL_CONV1D_FORCE_BUILD"),
        ("setup.py", 44, "CAUSAL_CONV1D_SKIP_CUDA_BUILD"),
        ("setup.py", 178, "-gencode"),
        ("setup.py", 217, "HIP_ARCHITECTURES"),
        ("setup.py", 334, "urllib.request.urlretrieve"),
    ],
    ("torch-cluster", "1.6.3"): [
        ("setup.py", 18, "torch.cuda.is_available()"),
        ("setup.py", 22, "FORCE_CUDA"),
        ("setup.py", 24, "FORCE_ONLY_CUDA"),
        ("setup.py", 26, "FORCE_ONLY_CPU"),
        ("setup.py", 70, "NVCC_FLAGS"),
    ],
    ("ctransformers", "0.2.9"): [("setup.py", 11, "CT_CUBLAS"), ("CMakeLists.txt", 6, "CT_CUBLAS")],
    ("auto-gptq", "0.7.1"): [("setup.py", 40, "BUILD_CUDA_EXT")],
}
ALL_PINS = load_pins() + load_pins(MORE_PINS)


def _tree(pin: dict) -> Path:
    try:
        return sdist_tree(pin)
    except CorpusError as exc:
        pytest.fail(str(exc), pytrace=False)
    raise AssertionError  # not reached


def _plan(tree: Path, targets: str, env: dict[str, str]) -> dict:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "plan",
            str(tree),
            "--json",
            "--targets",
            targets,
            "-C",
            "rocm-build-backend.compiler-check=false",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.realinputs
@pytest.mark.parametrize("pin", ALL_PINS, ids=[f"{p['name']}-{p['version']}" for p in ALL_PINS])
def test_plan_names_every_switch_of_the_real_sdists(pin, build_env):
    tree = _tree(pin)
    build_env["PYTHONPATH"] = str(ROOT)
    data = _plan(tree, "sm_90", build_env)
    validate_json("plan", json.dumps(data))
    named = {(s["file"], s["line"], s["name"]) for s in data["switches"]}
    expected = ANSWERS.get((pin["name"], pin["version"]), [])
    for file, line, name in expected:
        lines = (tree / file).read_text(encoding="utf-8", errors="replace").splitlines()
        source = "\n".join(lines[max(0, line - 3) : line])  # the line, and a loop over names just above it
        what = {"-gencode": "code=sm_", "--offload-arch": "--offload-arch="}.get(
            name, name.rsplit(".", 1)[-1].split("(")[0]
        )
        assert what in source, (file, line, source)
        assert (file, line, name) in named, (file, line, name, sorted(named))
    # every todo is exactly something to give
    for s in data["switches"]:
        if s["action"] == "todo":
            assert s["todo"] and ("=" in s["todo"]), s


@pytest.mark.realinputs
def test_switch_actions_on_real_sdists(build_env):
    build_env["PYTHONPATH"] = str(ROOT)
    scatter = _plan(_tree(next(p for p in ALL_PINS if p["name"] == "torch-scatter")), "sm_90", build_env)
    by_name = {s["name"]: s for s in scatter["switches"]}
    assert by_name["FORCE_CUDA"]["todo"] == "FORCE_CUDA=1"
    assert (
        scatter["build_ext_parallel"] >= 1
        and "without ninja" in scatter["build_ext_parallel_reason"]
        or scatter["build_ext_parallel"] == 1
    )
    conv = _plan(
        _tree(next(p for p in ALL_PINS if (p["name"], p["version"]) == ("causal-conv1d", "1.6.0"))), "sm_90", build_env
    )
    hard = next(s for s in conv["switches"] if s["kind"] == "hard-coded")
    assert hard["action"] == "enforced" and "its compiles keep sm_90" in hard["detail"]
    assert hard["value"].split() == [
        "sm_62",
        "sm_70",
        "sm_72",
        "sm_75",
        "sm_80",
        "sm_87",
        "sm_90",
        "sm_100",
        "sm_103",
        "sm_110",
        "sm_120",
        "sm_121",
    ]
    llama = _plan(_tree(next(p for p in ALL_PINS if p["name"] == "llama-cpp-python")), "gfx942", build_env)
    hip = next(s for s in llama["switches"] if s["name"] == "GGML_HIP")
    assert hip["action"] == "set"  # the profile gives -C cmake.define.GGML_HIP=ON


# --- a real build whose GPU code hangs on a switch ------------------------------------------------

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"


@pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="needs nvcc")
def test_the_switch_that_turns_the_gpu_build_on_is_applied(tmp_path, build_env):
    """A real build whose CUDA code is built only with FORCE_CUDA=1 (no GPU here, as on a CI runner):
    the build applies it (log and stamp say so, with file and line) and the wheel holds sm_90; with
    switches = "name", or the user's FORCE_CUDA=0, nothing is applied and the hint names the switch."""
    from rocm_build_backend.wheel.stamp import read_stamp

    project = tmp_path / "nvcc_force_cuda"
    shutil.copytree(PROJECTS / "nvcc_force_cuda", project)
    build_env["PATH"] = str(Path(NVCC).parent) + os.pathsep + build_env["PATH"]
    build_env["PYTHONPATH"] = str(ROOT)
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
        project,
        "-C",
        "rocm-build-backend.targets=sm_90",
    ]
    proc = run(argv, env=build_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "switch setup.py L10 FORCE_CUDA (gpu-on): applied FORCE_CUDA=1" in proc.stderr + proc.stdout
    wheel = next((tmp_path / "out").glob("*.whl"))
    stamp = read_stamp(wheel)
    assert stamp is not None and stamp["audit"]["targets"] == ["sm_90"]
    assert stamp["switches"] == [{"file": "setup.py", "line": 10, "name": "FORCE_CUDA", "given": "FORCE_CUDA=1"}]
    for extra, env in (
        ("rocm-build-backend.switches=name", {}),
        ("rocm-build-backend.verify=error", {"FORCE_CUDA": "0"}),
    ):
        proc = run([*argv, "-C", extra], env={**build_env, **env})
        assert proc.returncode != 0
        errors = error_lines(proc)
        assert any("holds no GPU device code" in e for e in errors), errors
        assert any("hint:" in e and "setup.py L10 FORCE_CUDA" in e for e in errors), errors


@pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="needs nvcc")
def test_a_cmake_option_behind_add_subdirectory_is_applied(tmp_path, build_env):
    """A real scikit-build-core build for sm_90 of a project whose CUDA code sits behind its own
    option in a folder it adds with add_subdirectory (a variable path): the shim turns WITH_CUDA
    on and nothing else (not the OpenCL option, not the vendored library's CUDA option), and the
    wheel holds sm_90 only, not the project's fallback 70;80."""
    pytest.importorskip("scikit_build_core")
    from rocm_build_backend.binary.audit import audit_wheel
    from rocm_build_backend.wheel.stamp import read_stamp

    project = tmp_path / "cmake_cuda_option"
    shutil.copytree(PROJECTS / "cmake_cuda_option", project)
    build_env["PATH"] = str(Path(NVCC).parent) + os.pathsep + build_env["PATH"]
    build_env["PYTHONPATH"] = str(ROOT)
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
            project,
            "-C",
            "rocm-build-backend.targets=sm_90",
        ],
        env=build_env,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert (
        "switch CMakeLists.txt L6 WITH_CUDA (gpu-on): applied -C cmake.define.WITH_CUDA=ON: turning it on adds "
        "enable_language(CUDA) at cpp/kernels/CMakeLists.txt L5"
    ) in log
    assert "WITH_OPENCL (option): left off: it needs another API: find_package(OpenCL)" in log
    assert "FASTMATH_CUDA (gpu-on): left off: vendored code under third_party/" in log
    assert "CMAKE_CUDA_ARCHITECTURES (hard-coded): a fallback" in log
    wheel = next((tmp_path / "out").glob("*.whl"))
    assert [sorted(f.targets) for f in audit_wheel(wheel).files if f.targets] == [["sm_90"]]
    assert read_stamp(wheel)["switches"] == [
        {"file": "CMakeLists.txt", "line": 6, "name": "WITH_CUDA", "given": "-C cmake.define.WITH_CUDA=ON"}
    ]
