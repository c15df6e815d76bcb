"""NVIDIA project profiles: the data file's entries, rendered for code targets."""

from __future__ import annotations

import json

import pytest

from rocm_build_backend.data import path as data_path
from rocm_build_backend.gpu.nvidia.profiles import nvidia_profile_for, nvidia_profiles


def test_every_entry_loads_and_cites_its_source():
    profiles = nvidia_profiles()
    assert {p.name for p in profiles} >= {"flash-attn", "cupy", "bitsandbytes", "llama-cpp-python", "vllm", "xformers"}
    for p in profiles:
        assert "@" in p.source
        assert all(v.source for v in p.variables)


def test_same_top_level_shape_as_the_amd_profiles():
    amd = json.loads(data_path("profiles.json").read_text())
    nv = json.loads(data_path("profiles_nvidia.json").read_text())
    assert set(nv) == set(amd)
    common = {"name", "title", "distributions", "backend", "source", "reads", "detects", "variables", "conflicts", "limitations"}
    for raw in nv["profiles"]:
        assert common <= set(raw), raw["name"]


@pytest.mark.parametrize("dist, targets, env, cmake", [
    ("Flash_Attn", ["sm_80", "sm_90", "compute_90"], {"FLASH_ATTN_CUDA_ARCHS": "80;90", "FLASH_ATTENTION_FORCE_BUILD": "TRUE"}, {}),
    ("cupy", ["sm_90", "compute_90"], {"CUPY_NVCC_GENERATE_CODE": "arch=compute_90,code=sm_90;arch=compute_90,code=compute_90"}, {}),
    ("bitsandbytes", ["sm_90a", "sm_80"], {}, {"COMPUTE_BACKEND": "cuda", "COMPUTE_CAPABILITY": "90a;80"}),
    ("llama_cpp_python", ["sm_90"], {}, {"GGML_CUDA": "on"}),
    ("vllm", ["sm_90"], {"VLLM_TARGET_DEVICE": "cuda"}, {}),
])
def test_rendered(dist, targets, env, cmake):
    p = nvidia_profile_for(dist)
    assert p is not None
    assert p.env(targets) == env and p.cmake_defines(targets) == cmake


def test_vllm_opts_out_of_nvcc_append_flags():
    assert nvidia_profile_for("vllm").nvcc_append_flags is False
    assert nvidia_profile_for("flash-attn").nvcc_append_flags is True
    assert nvidia_profile_for("no-such-project") is None
