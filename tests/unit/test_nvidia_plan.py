"""The vendor choice (gpu/build.py) and the NVIDIA half of a build's plan (gpu/nvidia/plan.py)."""

from __future__ import annotations

import shlex

import pytest

from rocm_build_backend.errors import ConfigError, NoGpuDetectedError
from rocm_build_backend.gpu.build import BuildInputs, choose_vendor
from rocm_build_backend.gpu.nvidia.plan import nvidia_build_env
from rocm_build_backend.gpu.targets import parse_target


SM90, GFX942 = parse_target("sm_90"), parse_target("gfx942")


@pytest.mark.parametrize(
    "setting, requested, detected, vendor",
    [
        ("auto", [SM90], [GFX942], "nvidia"),  # the targets decide
        ("auto", [], [SM90, SM90], "nvidia"),  # else the only vendor found
        ("auto", [], [GFX942], "amd"),
        ("nvidia", [], [GFX942, SM90], "nvidia"),
    ],
)
def test_choose_vendor(setting, requested, detected, vendor):
    assert choose_vendor(setting, requested, detected) == vendor


@pytest.mark.parametrize(
    "setting, requested, detected, error, words",
    [
        ("auto", [SM90, GFX942], [], ConfigError, "one vendor"),
        ("auto", [], [SM90, GFX942], ConfigError, "nvidia: sm_90"),
        ("amd", [SM90], [], ConfigError, "are nvidia targets"),
        ("auto", [], [], NoGpuDetectedError, "no GPU"),
        ("intel", [], [], ConfigError, "expected"),
    ],
)
def test_choose_vendor_refuses(setting, requested, detected, error, words):
    with pytest.raises(error, match=words):
        choose_vendor(setting, requested, detected)


def _env(targets, ptx, env, *, backend_kind, config_settings=None):
    return nvidia_build_env(
        targets, BuildInputs(env=env, backend_kind=backend_kind, config_settings=config_settings or {}, ptx=ptx)
    )


def test_plain_setuptools_build():
    got = _env(["sm_90"], "none", {}, backend_kind="setuptools")
    assert got.env == {
        "TORCH_CUDA_ARCH_LIST": "9.0",
        "CUDAARCHS": "90-real",
        "NVCC_APPEND_FLAGS": "-gencode=arch=compute_90,code=sm_90",
        "CMAKE_ARGS": "-DCMAKE_CUDA_ARCHITECTURES=90-real",
    }
    assert got.replaced == {} and got.config_settings == {}


def test_user_values_kept_when_they_name_the_same_code_else_replaced():
    env = {
        "TORCH_CUDA_ARCH_LIST": "8.0 9.0",
        "CUDAARCHS": "75",
        "CMAKE_ARGS": "-DFOO=1 -DCMAKE_CUDA_ARCHITECTURES=75",
        "NVCC_APPEND_FLAGS": "-lineinfo",
    }
    got = _env(["sm_80", "sm_90"], "none", env, backend_kind="setuptools")
    assert got.kept == {"TORCH_CUDA_ARCH_LIST": "8.0 9.0"}
    assert got.replaced["CUDAARCHS"] == ("75", "80-real;90-real")
    assert shlex.split(got.env["CMAKE_ARGS"]) == ["-DFOO=1", "-DCMAKE_CUDA_ARCHITECTURES=80-real;90-real"]
    assert "CMAKE_ARGS" in got.replaced and "NVCC_APPEND_FLAGS" not in got.replaced
    assert got.env["NVCC_APPEND_FLAGS"].startswith("-lineinfo ")


def test_scikit_build_core_define_and_conflict():
    got = _env(["sm_90"], "highest", {}, backend_kind="scikit-build-core")
    assert got.config_settings == {"cmake.define.CMAKE_CUDA_ARCHITECTURES": "90"}
    assert [str(t) for t in got.code] == ["sm_90", "compute_90"]
    with pytest.raises(ConfigError, match="conflicts"):
        _env(
            ["sm_90"],
            "none",
            {},
            backend_kind="scikit-build-core",
            config_settings={"cmake.define.CMAKE_CUDA_ARCHITECTURES": "80-real"},
        )


def _plan(dist, *, backend_kind="setuptools", profile="auto", env=None):
    from rocm_build_backend.builder.plan import Host, make_plan
    from rocm_build_backend.builder.settings import load_settings
    from rocm_build_backend.gpu.targets import parse_targets

    settings = load_settings({"tool": {"rocm-build-backend": {"profile": profile}}}, None, {})
    return make_plan(
        parse_targets("sm_90"),
        "test",
        settings,
        env or {},
        backend_kind=backend_kind,
        host=Host(cpus=4, mem_available=64 << 30),
        dist_name=dist,
    )


def test_profiles_apply():
    fa = _plan("flash_attn")
    assert fa.profile == "flash-attn" and fa.env["FLASH_ATTN_CUDA_ARCHS"] == "90"
    assert fa.env["BUILD_TARGET"] == "cuda" and fa.env["FLASH_ATTENTION_FORCE_BUILD"] == "TRUE"
    bnb = _plan("bitsandbytes", backend_kind="scikit-build-core")
    assert bnb.config_settings["cmake.define.COMPUTE_CAPABILITY"] == "90"
    vllm = _plan("vllm", env={"NVCC_APPEND_FLAGS": "-lineinfo -gencode=arch=compute_80,code=sm_80"})
    assert "NVCC_APPEND_FLAGS" not in vllm.env and "NVCC_APPEND_FLAGS" not in vllm.replaced
    assert any("narrower" in n for n in vllm.notes)
    none = _plan("vllm", profile="none")
    assert none.profile is None and "NVCC_APPEND_FLAGS" in none.env


def test_a_vendor_neutral_switch_reaches_an_nvidia_build():
    """causal-conv1d's CAUSAL_CONV1D_FORCE_BUILD=TRUE used to live in the AMD profile only, so an
    NVIDIA build tried to download a prebuilt wheel instead of compiling."""
    plan = _plan("causal-conv1d")
    assert plan.profile == "causal-conv1d" and plan.env["CAUSAL_CONV1D_FORCE_BUILD"] == "TRUE"
    assert "HIP_ARCHITECTURES" not in plan.env  # AMD's knob stays with AMD builds


def test_a_project_without_a_profile_gets_none_for_nvidia():
    plan = _plan("somebodys-kernels")
    assert plan.profile is None and "GPU_ARCHS" not in plan.env and "HIP_ARCHITECTURES" not in plan.env


def test_an_unknown_profile_is_refused_for_nvidia_too():
    with pytest.raises(ConfigError, match="unknown profile 'flash-atn'.*did you mean 'flash-attn'"):
        _plan("x", profile="flash-atn")
