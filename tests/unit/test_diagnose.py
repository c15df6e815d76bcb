"""A failed build whose cause we know ends with a line saying what it is and what to do instead."""

from __future__ import annotations


import pytest

from rocm_build_backend.builder.diagnose import diagnose, explain
from helpers import TESTS

DATA = TESTS / "data" / "build-failures"


@pytest.mark.parametrize(
    "name, what, todo",
    [
        ("cmake-hip-lang-missing.txt", "hip-lang", "CMAKE_HIP_COMPILER_ROCM_ROOT"),
        ("hipcc-nvidia-platform.txt", "nvcc", "HIP_PLATFORM=amd"),
        ("gcc-killed.txt", "killed (signal 9)", "max-jobs"),
        ("setuptools-hipcc-killed.txt", "killed (signal 9)", "max-jobs"),
    ],
)
def test_real_failures_are_named(name, what, todo):
    cause = diagnose((DATA / name).read_text(), torch=lambda: None)
    assert cause is not None and what in cause.what and todo in cause.todo


@pytest.mark.parametrize(
    "torch, known",
    [("2.4.1+cu121", True), ("2.4.1", True), ("2.4.1+cpu", True), ("2.4.1+rocm6.1", False), (None, False)],
)
def test_a_cuda_only_torch_under_a_rocm_build(torch, known):
    cause = diagnose((DATA / "torch-cuda-home.txt").read_text(), torch=lambda: torch)
    if known:
        assert (
            cause is not None and torch in cause.what and "ROCm's torch" in cause.todo and "rocmX.Y index" in cause.todo
        )
    else:
        assert cause is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "error: command 'gcc' failed with exit code 1",
        "fatal error: kernels.hip: No such file or directory",
        "Killed 3 idle workers",
    ],
)
def test_an_unknown_cause_is_not_guessed(text):
    assert diagnose(text, torch=lambda: "2.4.1+cu121") is None


def test_the_exception_of_a_wrapped_backend():
    try:
        try:
            raise OSError("CUDA_HOME environment variable is not set. Please set it to your CUDA install root.")
        except OSError:
            raise SystemExit("error: command '/usr/bin/hipcc' failed with exit code -9")
    except SystemExit as exc:
        cause = explain(exc)
    assert cause is not None and "killed" in cause.what


# lines real projects print when they leave their GPU code out for want of a build requirement
@pytest.mark.parametrize(
    "text, name",
    [
        ("Skip building ext ops due to the absence of torch.", "torch"),  # mmcv, mmdet, mmdeploy setup.py
        ("CMake Warning at CMakeLists.txt:40 (message):\n  PyTorch not found, skipping warpkv_torch build.", "torch"),
        ("[setup] WARN: torch not importable during metadata stage; building without extensions", "torch"),
        ("Skipping the CUDA extension: No module named 'torch'", "torch"),
        ("skipping fused kernels because triton is not installed", "triton"),
        ("No module named 'pybind11', skipping\nSkip building ext ops due to the absence of torch.", "torch"),
    ],
)
def test_a_build_that_skipped_its_gpu_code_for_a_missing_requirement(text, name):
    from rocm_build_backend.builder.diagnose import skipped_for_missing

    cause = skipped_for_missing("running build\n" + text + "\nrunning install_lib\n")
    assert cause is not None and f"because {name} could not be imported" in cause.what
    assert f"install {name}" in cause.todo and "--no-build-isolation" in cause.todo


@pytest.mark.parametrize(
    "text",
    [
        "INFO: CUDA is not available. Extension will be CPU-only.",
        "GPU not found, skipping the device query",  # a GPU is not a build requirement
        "No CUDA runtime is found, using CUDA_HOME='/usr/local/cuda'",
        "ModuleNotFoundError: No module named 'torch'",  # a failure, not a skip
        "skipping 'pkg/_k.cpp' extension (up-to-date)",
        "skip " + "a." * 400 + " not found",  # a long line of nothing: no name, no hang
    ],
)
def test_other_lines_are_not_taken_for_a_missing_requirement(text):
    from rocm_build_backend.builder.diagnose import skipped_for_missing

    assert skipped_for_missing(text) is None


def test_the_build_command_names_a_skip_the_hook_could_not_see():
    """A CMake step prints to the file descriptors, past the hook's tee: the ``build`` command
    has the whole output and names the cause instead of the hook's generic hint."""
    from rocm_build_backend.builder.project import failed

    output = (
        "CMake Warning at CMakeLists.txt:12 (message):\n  Torch not found, skipping the CUDA ops\n"
        "rocm-build-backend: error: x-1.0-py3-none-any.whl: wheel x-1.0-py3-none-any.whl holds no GPU "
        "device code at all; sm_90 was requested\n"
        "rocm-build-backend: hint: the build ignored the targets (a hard-coded -arch/-gencode, or a "
        "script that picks its own)\n"
    )
    err = failed("x", 1, output)
    assert "because torch could not be imported" in err.message and "Torch not found" in err.message
    assert err.hint is not None and err.hint.startswith("install torch") and "hard-coded" not in err.hint
    assert err.exit_code == 1


def test_the_tee_passes_writes_through_and_keeps_the_tail(capsys):
    import sys
    import threading

    from rocm_build_backend.builder import log

    with log.teed() as tail:
        print("Skip building ext ops due to the absence of torch.")
        threads = [threading.Thread(target=lambda: sys.stderr.write("x" * 1000 + "\n")) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    out, err = capsys.readouterr()
    assert out == "Skip building ext ops due to the absence of torch.\n" and err.count("x" * 1000) == 4
    assert tail.text().startswith("Skip building") and tail.text().count("x" * 1000) == 4
    assert not isinstance(sys.stdout, log._Tee)  # put back
