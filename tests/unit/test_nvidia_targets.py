"""NVIDIA code targets and the spellings users write: our names, TORCH_CUDA_ARCH_LIST (checked
against PyTorch 2.11's own parser, recorded on the H200) and CMAKE_CUDA_ARCHITECTURES."""

from __future__ import annotations

import json

import pytest

from rocm_build_backend.errors import ConfigError, UnknownTargetError
from rocm_build_backend.gpu.nvidia.targets import (
    CudaTarget,
    parse_cmake_architectures,
    parse_cuda_target,
    parse_cuda_targets,
    parse_torch_arch_list,
)
from helpers import TESTS

DATA = TESTS / "data" / "nvidia" / "h200"


def names(targets):
    return [str(t) for t in targets]


@pytest.mark.parametrize(
    "text, number, suffix, ptx",
    [
        ("sm_90", 90, "", False),
        ("sm_90a", 90, "a", False),
        ("sm_100f", 100, "f", False),
        ("compute_80", 80, "", True),
        ("compute_90a", 90, "a", True),
        ("SM_120", 120, "", False),
    ],
)
def test_our_names(text, number, suffix, ptx):
    t = parse_cuda_target(text)
    assert (t.number, t.suffix, t.ptx) == (number, suffix, ptx)
    assert str(t) == text.lower()


@pytest.mark.parametrize(
    "text, words",
    [
        ("sm_91", "unknown NVIDIA compute capability"),
        ("sm_80a", "start at sm_90"),
        ("sm_90f", "start at sm_100"),
        ("gfx90a", "not an NVIDIA target"),
    ],
)
def test_bad_names(text, words):
    with pytest.raises(UnknownTargetError, match=words):
        parse_cuda_target(text)


def test_a_list_reports_every_bad_entry():
    with pytest.raises(UnknownTargetError) as exc:
        parse_cuda_targets("sm_90;sm_91,sm_80a sm_80")
    assert "sm_91" in exc.value.message and "sm_80a" in exc.value.message


def test_gencode_spelling():
    assert CudaTarget(90, "a").gencode() == "-gencode=arch=compute_90a,code=sm_90a"
    assert CudaTarget(100, "f", True).gencode() == "-gencode=arch=compute_100f,code=compute_100f"


def _torch_cases():
    data = json.loads((DATA / "torch_arch_flags.json").read_text())
    return sorted(data["flags"].items())


@pytest.mark.parametrize("spelling, torch_says", _torch_cases())
def test_torch_arch_list_as_torch_211_reads_it(spelling, torch_says):
    """The gencode flags torch 2.11's _get_cuda_arch_flags made on the H200, or its refusal."""
    if isinstance(torch_says, str):
        with pytest.raises(UnknownTargetError):
            parse_torch_arch_list(spelling)
    else:
        assert sorted(t.gencode() for t in parse_torch_arch_list(spelling)) == torch_says


def test_torch_names_expand_like_torch():
    assert names(parse_torch_arch_list("Ampere+Tegra")) == ["sm_87"]
    assert names(parse_torch_arch_list("Ada")) == ["sm_89", "compute_89"]


@pytest.mark.parametrize(
    "value, expected",
    [
        ("90", ["sm_90", "compute_90"]),
        ("90-real", ["sm_90"]),
        ("90a", ["sm_90a", "compute_90a"]),
        ("80-real;90-virtual", ["sm_80", "compute_90"]),
        ("120f-real", ["sm_120f"]),
    ],
)
def test_cmake_architectures(value, expected):
    assert names(parse_cmake_architectures(value)) == expected


def test_cmake_special_values_need_their_inputs():
    codes = parse_cuda_targets("sm_75 sm_80 sm_86 sm_90 sm_100 sm_103 sm_120")
    assert names(parse_cmake_architectures("native", native=[CudaTarget(90)])) == ["sm_90"]
    assert names(parse_cmake_architectures("all-major", nvcc_codes=codes)) == [
        "sm_80",
        "sm_90",
        "sm_100",
        "sm_120",
        "compute_120",
    ]
    assert names(parse_cmake_architectures("all", nvcc_codes=codes))[-1] == "compute_120"
    for value in ("native", "all", "all-major", "OFF"):
        with pytest.raises(ConfigError):
            parse_cmake_architectures(value)


def test_cmake_bad_entries():
    with pytest.raises(UnknownTargetError, match="sm_90|90-fast"):
        parse_cmake_architectures("80;90-fast")
