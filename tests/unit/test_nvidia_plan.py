"""The vendor choice and the NVIDIA half of a build's plan (pure functions for builder/plan.py)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import pytest

from rocm_build_backend.errors import ConfigError, NoGpuDetectedError
from rocm_build_backend.gpu.nvidia.plan import choose_vendor, nvidia_build_env


@dataclass(frozen=True)
class T:
    name: str
    vendor: str

    def __str__(self) -> str:
        return self.name


SM90, GFX942 = T("sm_90", "nvidia"), T("gfx942", "amd")


@pytest.mark.parametrize("setting, requested, detected, vendor", [
    ("auto", [SM90], [GFX942], "nvidia"),   # the targets decide
    ("auto", [], [SM90, SM90], "nvidia"),   # else the only vendor found
    ("auto", [], [GFX942], "amd"),
    ("nvidia", [], [GFX942, SM90], "nvidia"),
])
def test_choose_vendor(setting, requested, detected, vendor):
    assert choose_vendor(setting, requested, detected) == vendor


@pytest.mark.parametrize("setting, requested, detected, error, words", [
    ("auto", [SM90, GFX942], [], ConfigError, "one vendor"),
    ("auto", [], [SM90, GFX942], ConfigError, "nvidia: sm_90"),
    ("amd", [SM90], [], ConfigError, "are nvidia targets"),
    ("auto", [], [], NoGpuDetectedError, "no GPU"),
    ("intel", [], [], ConfigError, "expected"),
])
def test_choose_vendor_refuses(setting, requested, detected, error, words):
    with pytest.raises(error, match=words):
        choose_vendor(setting, requested, detected)


def test_plain_setuptools_build():
    got = nvidia_build_env(["sm_90"], "none", {}, backend_kind="setuptools")
    assert got.env == {"TORCH_CUDA_ARCH_LIST": "9.0", "CUDAARCHS": "90-real",
                       "NVCC_APPEND_FLAGS": "-gencode=arch=compute_90,code=sm_90",
                       "CMAKE_ARGS": "-DCMAKE_CUDA_ARCHITECTURES=90-real"}
    assert got.replaced == {} and got.config_settings == {}


def test_user_values_kept_when_they_name_the_same_code_else_replaced():
    env = {"TORCH_CUDA_ARCH_LIST": "8.0 9.0", "CUDAARCHS": "75", "CMAKE_ARGS": "-DFOO=1 -DCMAKE_CUDA_ARCHITECTURES=75",
           "NVCC_APPEND_FLAGS": "-lineinfo"}
    got = nvidia_build_env(["sm_80", "sm_90"], "none", env, backend_kind="setuptools")
    assert got.kept == {"TORCH_CUDA_ARCH_LIST": "8.0 9.0"}
    assert got.replaced["CUDAARCHS"] == ("75", "80-real;90-real")
    assert shlex.split(got.env["CMAKE_ARGS"]) == ["-DFOO=1", "-DCMAKE_CUDA_ARCHITECTURES=80-real;90-real"]
    assert "CMAKE_ARGS" in got.replaced and "NVCC_APPEND_FLAGS" not in got.replaced
    assert got.env["NVCC_APPEND_FLAGS"].startswith("-lineinfo ")


def test_scikit_build_core_define_and_conflict():
    got = nvidia_build_env(["sm_90"], "highest", {}, backend_kind="scikit-build-core")
    assert got.config_settings == {"cmake.define.CMAKE_CUDA_ARCHITECTURES": "90"}
    with pytest.raises(ConfigError, match="conflicts"):
        nvidia_build_env(["sm_90"], "none", {}, backend_kind="scikit-build-core",
                         config_settings={"cmake.define.CMAKE_CUDA_ARCHITECTURES": "80-real"})


def test_profiles_apply():
    fa = nvidia_build_env(["sm_90"], "none", {}, backend_kind="setuptools", dist_name="flash_attn")
    assert fa.profile == "flash-attn" and fa.env["FLASH_ATTN_CUDA_ARCHS"] == "90"
    bnb = nvidia_build_env(["sm_90"], "none", {}, backend_kind="scikit-build-core", dist_name="bitsandbytes")
    assert bnb.config_settings["cmake.define.COMPUTE_CAPABILITY"] == "90"
    vllm = nvidia_build_env(["sm_90"], "none", {}, backend_kind="setuptools", dist_name="vllm")
    assert "NVCC_APPEND_FLAGS" not in vllm.env and any("narrower" in n for n in vllm.notes)
    none = nvidia_build_env(["sm_90"], "none", {}, backend_kind="setuptools", dist_name="vllm", profile="none")
    assert none.profile is None and "NVCC_APPEND_FLAGS" in none.env
