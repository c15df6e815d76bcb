"""A failed build whose cause we know ends with a line saying what it is and what to do instead."""

from __future__ import annotations


import pytest

from rocm_build_backend.builder.diagnose import diagnose, explain
from helpers import TESTS

DATA = TESTS / "data" / "build-failures"


@pytest.mark.parametrize("name, what, todo", [
    ("cmake-hip-lang-missing.txt", "hip-lang", "CMAKE_HIP_COMPILER_ROCM_ROOT"),
    ("hipcc-nvidia-platform.txt", "nvcc", "HIP_PLATFORM=amd"),
    ("gcc-killed.txt", "killed (signal 9)", "max-jobs"),
    ("setuptools-hipcc-killed.txt", "killed (signal 9)", "max-jobs"),
])
def test_real_failures_are_named(name, what, todo):
    cause = diagnose((DATA / name).read_text(), torch=lambda: None)
    assert cause is not None and what in cause.what and todo in cause.todo


@pytest.mark.parametrize("torch, known", [("2.4.1+cu121", True), ("2.4.1", True), ("2.4.1+cpu", True),
                                          ("2.4.1+rocm6.1", False), (None, False)])
def test_a_cuda_only_torch_under_a_rocm_build(torch, known):
    cause = diagnose((DATA / "torch-cuda-home.txt").read_text(), torch=lambda: torch)
    if known:
        assert cause is not None and torch in cause.what and "ROCm's torch" in cause.todo and "rocmX.Y index" in cause.todo
    else:
        assert cause is None


@pytest.mark.parametrize("text", ["", "error: command 'gcc' failed with exit code 1",
                                  "fatal error: kernels.hip: No such file or directory", "Killed 3 idle workers"])
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
