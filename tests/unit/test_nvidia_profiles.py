"""The NVIDIA sections of the project profiles (data/profiles.json), rendered for code targets."""

from __future__ import annotations

import pytest

from rocm_build_backend.builder.profiles import all_profiles, profile_for
from rocm_build_backend.gpu.targets import parse_targets


def test_nvidia_sections_load_and_cite_their_sources():
    with_nvidia = {p.name for p in all_profiles() if p.section("nvidia") is not None}
    assert with_nvidia >= {
        "flash-attn",
        "cupy",
        "bitsandbytes",
        "llama-cpp-python",
        "vllm",
        "xformers",
        "causal-conv1d",
        "mamba-ssm",
        "deepspeed",
        "apex",
        "torchvision",
        "torch",
    }
    for p in all_profiles():
        section = p.section("nvidia")
        if section is None:
            continue
        assert all(v.source for v in section.variables), p.name
        assert p.no_device_code_hint("nvidia"), p.name


def test_every_profile_says_what_it_does_for_each_vendor_or_why_not():
    for p in all_profiles():
        missing = [v for v in ("amd", "nvidia") if p.section(v) is None]
        assert not missing or any("only" in x for x in p.limitations), (p.name, missing)


@pytest.mark.parametrize(
    "dist, targets, env, cmake",
    [
        (
            "Flash_Attn",
            "sm_80;sm_90;compute_90",
            {"FLASH_ATTENTION_FORCE_BUILD": "TRUE", "FLASH_ATTN_CUDA_ARCHS": "80;90", "BUILD_TARGET": "cuda"},
            {},
        ),
        (
            "cupy",
            "sm_90;compute_90",
            {"CUPY_NVCC_GENERATE_CODE": "arch=compute_90,code=sm_90;arch=compute_90,code=compute_90"},
            {},
        ),
        ("bitsandbytes", "sm_90a;sm_80", {}, {"COMPUTE_BACKEND": "cuda", "COMPUTE_CAPABILITY": "80;90a"}),
        ("llama_cpp_python", "sm_90", {}, {"GGML_CUDA": "on"}),
        ("vllm", "sm_90", {"VLLM_TARGET_DEVICE": "cuda"}, {}),
        ("xformers", "sm_90", {"FORCE_CUDA": "1"}, {}),
        ("causal-conv1d", "sm_90", {"CAUSAL_CONV1D_FORCE_BUILD": "TRUE"}, {}),
        ("mamba-ssm", "sm_90", {"MAMBA_FORCE_BUILD": "TRUE"}, {}),
        ("torchvision", "sm_90", {"FORCE_CUDA": "1"}, {}),
        ("deepspeed", "sm_90", {}, {}),
    ],
)
def test_rendered(dist, targets, env, cmake):
    p = profile_for(dist)
    assert p is not None
    assert p.env(parse_targets(targets)) == env and p.cmake_defines(parse_targets(targets)) == cmake


def test_vllm_leaves_out_nvcc_append_flags():
    assert [k.name for k in profile_for("vllm").omitted("nvidia")] == ["NVCC_APPEND_FLAGS"]
    assert profile_for("vllm").omitted("amd") == ()
    assert profile_for("flash-attn").omitted("nvidia") == ()


def test_hints_are_per_vendor_with_a_neutral_fallback():
    fa = profile_for("flash-attn")
    assert "FLASH_ATTN_CUDA_ARCHS" in fa.no_device_code_hint("nvidia")
    assert "GPU_ARCHS" in fa.no_device_code_hint("amd")
    ds = profile_for("deepspeed")
    assert ds.no_device_code_hint("nvidia") == ds.no_device_code_hint(
        "amd"
    ) and "DS_BUILD_OPS=1" in ds.no_device_code_hint("amd")
