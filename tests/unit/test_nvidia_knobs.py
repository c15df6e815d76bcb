"""The CUDA knobs computed from code targets (nvcc obeying them, and the CUDA sample built with
them: tests/integration/test_nvidia_knobs_nvcc.py).
"""

from __future__ import annotations

import shlex

import pytest
from rocm_build_backend.errors import ConfigError
from rocm_build_backend.gpu.nvidia.knobs import cuda_knobs, with_ptx
from rocm_build_backend.gpu.nvidia.targets import parse_cmake_architectures, parse_torch_arch_list


def names(targets):
    return [str(t) for t in targets]


def test_one_target():
    k = cuda_knobs(["sm_90"])
    assert k.env == {
        "TORCH_CUDA_ARCH_LIST": "9.0",
        "CMAKE_CUDA_ARCHITECTURES": "90-real",
        "CUDAARCHS": "90-real",
        "NVCC_APPEND_FLAGS": "-gencode=arch=compute_90,code=sm_90",
    }
    assert k.cmake == {"CMAKE_CUDA_ARCHITECTURES": "90-real"}


@pytest.mark.parametrize(
    "targets, ptx, code",
    [
        (["sm_80", "sm_90"], "none", ["sm_80", "sm_90"]),
        (["sm_80", "sm_90"], "highest", ["sm_80", "sm_90", "compute_90"]),
        (["sm_80", "sm_90"], "all", ["sm_80", "compute_80", "sm_90", "compute_90"]),
        (["sm_90a"], "highest", ["sm_90a", "compute_90"]),  # PTX without 'a': forward compatible
        (["sm_100f"], "highest", ["sm_100f", "compute_100f"]),
        (["compute_80"], "none", ["compute_80"]),
    ],
)
def test_ptx_choice(targets, ptx, code):
    assert names(with_ptx(targets, ptx)) == code


def test_bad_ptx_choice_and_no_targets():
    with pytest.raises(ConfigError, match="ptx"):
        with_ptx(["sm_90"], "some")
    with pytest.raises(ConfigError):
        with_ptx([], "none")


@pytest.mark.parametrize(
    "targets, ptx",
    [
        (["sm_80", "sm_90"], "highest"),
        (["sm_90a"], "none"),
        (["sm_75", "sm_120"], "all"),
        (["sm_86"], "none"),
    ],
)
def test_each_spelling_reads_back_as_the_same_code(targets, ptx):
    k = cuda_knobs(targets, ptx)
    assert parse_cmake_architectures(k.env["CMAKE_CUDA_ARCHITECTURES"]) == k.code
    assert parse_torch_arch_list(k.env["TORCH_CUDA_ARCH_LIST"]) == k.code


def test_spellings_that_cannot_say_it_exactly_say_so():
    k = cuda_knobs(["sm_100f"])
    assert k.env["TORCH_CUDA_ARCH_LIST"] == "10.0"  # torch 2.11 refuses 10.0f
    assert "compute_100f,code=sm_100f" in k.env["NVCC_APPEND_FLAGS"]
    assert any("family" in n for n in k.notes)
    k = cuda_knobs(["compute_80"])
    assert k.env["TORCH_CUDA_ARCH_LIST"] == "8.0+PTX" and k.env["CMAKE_CUDA_ARCHITECTURES"] == "80-virtual"
    assert any("PTX alone" in n for n in k.notes)


def test_user_nvcc_flags_are_kept_but_not_their_targets():
    user = {"NVCC_APPEND_FLAGS": "-lineinfo -gencode arch=compute_70,code=sm_70 -arch=sm_80 --threads 4"}
    k = cuda_knobs(["sm_90"], user_env=user)
    assert shlex.split(k.env["NVCC_APPEND_FLAGS"]) == [
        "-lineinfo",
        "--threads",
        "4",
        "-gencode=arch=compute_90,code=sm_90",
    ]
    assert any("replaced" in n for n in k.notes)
