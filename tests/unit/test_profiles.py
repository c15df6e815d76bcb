"""Project profiles: the data file, name matching, and each project's knobs in its own syntax
(hipcc and clang reading them: tests/integration/test_profiles_hipcc.py).
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys

import pytest

from rocm_build_backend.builder import profiles
from rocm_build_backend.builder.profiles import load_profiles, normalize, profile_for
from rocm_build_backend.gpu.targets import parse_targets
from helpers import ROOT

DATA = ROOT / "rocm_build_backend" / "data" / "profiles.json"
GENERIC = {
    "PYTORCH_ROCM_ARCH",
    "GPU_TARGETS",
    "AMDGPU_TARGETS",
    "HCC_AMDGPU_TARGET",
    "HIPCC_COMPILE_FLAGS_APPEND",
    "HIP_PLATFORM",
    "CMAKE_ARGS",
    "MAX_JOBS",
    "CMAKE_HIP_ARCHITECTURES",
}

T = parse_targets


def test_every_required_project_has_a_profile():
    names = profiles.profile_names()
    for name in (
        "flash-attn",
        "aiter",
        "xformers",
        "bitsandbytes",
        "llama-cpp-python",
        "cupy",
        "deepspeed",
        "apex",
        "torchvision",
        "vllm",
        "torch",
    ):
        assert name in names


@pytest.mark.parametrize(
    ("dist", "expected"),
    [
        ("flash-attn", "flash-attn"),
        ("flash_attn", "flash-attn"),
        ("Flash.Attn", "flash-attn"),
        ("amd-aiter", "aiter"),
        ("amd_aiter", "aiter"),
        ("llama_cpp_python", "llama-cpp-python"),
        ("BitsAndBytes", "bitsandbytes"),
        ("torch", "torch"),
        ("torchvision", "torchvision"),
        ("DeepSpeed", "deepspeed"),
    ],
)
def test_profile_for_matches_normalized_names(dist, expected):
    assert profile_for(dist).name == expected


@pytest.mark.parametrize("dist", [None, "", "numpy", "flash-attn-2", "torch-vision"])
def test_profile_for_unknown(dist):
    assert profile_for(dist) is None


def test_normalize():
    assert normalize("Llama__CPP.python") == "llama-cpp-python"


@pytest.mark.parametrize(
    ("dist", "spec", "env", "defines"),
    [
        (
            "flash-attn",
            "gfx90a:xnack-;gfx942",
            {"GPU_ARCHS": "gfx90a;gfx942", "BUILD_TARGET": "rocm", "FLASH_ATTENTION_FORCE_BUILD": "TRUE"},
            {},
        ),
        ("aiter", "gfx942;gfx950", {"GPU_ARCHS": "gfx942;gfx950", "BUILD_TARGET": "rocm"}, {}),
        ("xformers", "gfx90a:sramecc+:xnack-;gfx942", {"HIP_ARCHITECTURES": "gfx90a:sramecc+:xnack- gfx942"}, {}),
        ("bitsandbytes", "gfx90a;gfx1100", {}, {"COMPUTE_BACKEND": "hip", "BNB_ROCM_ARCH": "gfx90a;gfx1100"}),
        ("llama-cpp-python", "gfx1100", {}, {"GGML_HIP": "ON"}),
        ("cupy", "gfx90a", {"CUPY_INSTALL_USE_HIP": "1"}, {}),
        ("torchvision", "gfx942", {"FORCE_CUDA": "1"}, {}),
        ("vllm", "gfx942", {"VLLM_TARGET_DEVICE": "rocm"}, {}),
        ("deepspeed", "gfx942", {}, {}),
        ("apex", "gfx942", {}, {}),
        ("torch", "gfx942", {}, {}),
        (
            "causal-conv1d",
            "gfx90a:xnack-;gfx942",
            {"HIP_ARCHITECTURES": "gfx90a:xnack-,gfx942", "CAUSAL_CONV1D_FORCE_BUILD": "TRUE"},
            {},
        ),
        ("mamba_ssm", "gfx942", {"HIP_ARCHITECTURES": "gfx942", "MAMBA_FORCE_BUILD": "TRUE"}, {}),
    ],
)
def test_knobs_in_each_projects_syntax(dist, spec, env, defines):
    profile = profile_for(dist)
    assert profile.env(T(spec)) == env
    assert profile.cmake_defines(T(spec)) == defines


def test_cmake_args_in_profile_order():
    assert profile_for("bitsandbytes").cmake_args(T("gfx942;gfx90a")) == [
        "-DCOMPUTE_BACKEND=hip",
        "-DBNB_ROCM_ARCH=gfx90a;gfx942",
    ]


def test_processor_form_drops_features_and_duplicates():
    env = profile_for("flash-attn").env(T("gfx90a:xnack+;gfx90a:xnack-;gfx942"))
    assert env["GPU_ARCHS"] == "gfx90a;gfx942"
    full = profile_for("xformers").env(T("gfx90a:xnack+;gfx90a:xnack-"))
    assert full["HIP_ARCHITECTURES"] == "gfx90a:xnack+ gfx90a:xnack-"


def test_nvidia_build_gets_the_neutral_switches_and_no_amd_knobs():
    nv = T("sm_90")
    assert profile_for("flash-attn").env(nv) == {
        "FLASH_ATTENTION_FORCE_BUILD": "TRUE",
        "FLASH_ATTN_CUDA_ARCHS": "90",
        "BUILD_TARGET": "cuda",
    }
    assert profile_for("torchvision").env(nv) == {"FORCE_CUDA": "1"}
    assert profile_for("bitsandbytes").cmake_defines(nv) == {"COMPUTE_BACKEND": "cuda", "COMPUTE_CAPABILITY": "90"}
    assert profile_for("causal-conv1d").env(nv) == {"CAUSAL_CONV1D_FORCE_BUILD": "TRUE"}
    for p in profiles.all_profiles():
        got = {**p.env(nv), **p.cmake_defines(nv)}
        allowed = {v.name for v in p.variables if v.vendor in ("any", "nvidia")}
        assert set(got) <= allowed, p.name
        assert "rocm" not in got.values() and "hip" not in got.values(), p.name


def test_mixed_vendors_use_only_amd_targets_for_amd_knobs():
    assert profile_for("xformers").env(T("gfx942;sm_90"))["HIP_ARCHITECTURES"] == "gfx942"


def test_no_profile_overrides_a_generic_knob():
    for profile in profiles.all_profiles():
        for var in profile.variables:
            assert var.name not in GENERIC, f"{profile.name} sets generic {var.name}"


def test_every_profile_names_its_sources_and_the_fix_for_a_cpu_only_wheel():
    for profile in profiles.all_profiles():
        assert profile.source
        for var in profile.variables:
            assert re.search(r"\.(py|txt|cmake|rst|md)\b|README", var.source), (profile.name, var.name)
        for section in profile.sections:
            hint = profile.no_device_code_hint(section.vendor)
            assert hint and re.search(r"\b[A-Z][A-Z0-9_]{2,}(=|\b)", hint), (profile.name, section.vendor)


def test_hints_name_the_knob_that_fixes_it():
    assert "FORCE_CUDA=1" in profile_for("torchvision").no_device_code_hint("amd")
    assert "FLASH_ATTENTION_FORCE_BUILD=TRUE" in profile_for("flash-attn").no_device_code_hint("amd")
    assert "DS_BUILD_OPS=1" in profile_for("deepspeed").no_device_code_hint("amd")
    assert "COMPUTE_BACKEND=hip" in profile_for("bitsandbytes").no_device_code_hint("amd")
    assert "GGML_HIP=ON" in profile_for("llama-cpp-python").no_device_code_hint("amd")
    assert "COMPUTE_BACKEND=cuda" in profile_for("bitsandbytes").no_device_code_hint("nvidia")
    assert "GGML_CUDA=on" in profile_for("llama-cpp-python").no_device_code_hint("nvidia")
    assert "CAUSAL_CONV1D_FORCE_BUILD=TRUE" in profile_for("causal-conv1d").no_device_code_hint("nvidia")


def test_verified_by_names_existing_test_projects():
    for profile in profiles.all_profiles():
        assert profile.verified_by, profile.name
        for entry in profile.verified_by:
            for path in re.findall(r"(?:tests|sample_projects)/[\w/.]+", entry):
                assert (ROOT / path.split(" ")[0]).exists(), (profile.name, path)


def test_conflicts_present_in_the_environment():
    xformers = profile_for("xformers")
    found = xformers.conflicting({"FORCE_CUDA": "1", "TORCH_CUDA_ARCH_LIST": "", "PATH": "/bin"})
    assert [c.name for c in found] == ["FORCE_CUDA"]
    assert "CUDA" in found[0].why
    assert xformers.conflicting(None) == []


def test_describe_says_where_the_knowledge_comes_from():
    line = profile_for("flash-attn").describe()
    assert line.startswith("flash-attn ") and "Dao-AILab/flash-attention" in line


def test_loaded_lazily():
    code = (
        "import rocm_build_backend.builder.profiles as p\n"
        "assert p.all_profiles.cache_info().currsize == 0\n"
        "assert p.profile_for('torch') is not None\n"
        "assert p.all_profiles.cache_info().currsize == 1\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def _data():
    return json.loads(DATA.read_text())


def _fa(d, vendor):
    assert d["profiles"][2]["name"] == "flash-attn"
    return d["profiles"][2]["vendors"][vendor]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(schema_version=1), "schema_version"),
        (lambda d: d["profiles"][0].update(colour="blue"), "unknown keys"),
        (lambda d: _fa(d, "amd")["variables"][0].update(kind="meson"), "kind"),
        (lambda d: d["profiles"][2]["vendors"].update(intel={}), "vendor 'intel'"),
        (lambda d: _fa(d, "amd").update(colour="blue"), "unknown keys"),
        (lambda d: _fa(d, "amd")["variables"][0].update(value="{arch}"), "placeholders"),
        (lambda d: _fa(d, "amd")["variables"][0].update(value="{number}"), "placeholders"),  # NVIDIA's, not AMD's
        (lambda d: _fa(d, "amd")["variables"][0].update(sep=";"), "unknown keys"),
        (lambda d: _fa(d, "amd")["variables"][0].update(code="sass"), "unknown keys"),  # an NVIDIA option
        (lambda d: _fa(d, "nvidia")["variables"][0].update(code="both"), "code 'both'"),
        (lambda d: d["profiles"][2]["variables"][0].update(value="{target}"), "vendor-neutral variable is a constant"),
        (lambda d: d["profiles"][1]["distributions"].append("torch"), "claimed by"),
    ],
)
def test_malformed_data_is_refused(edit, message):
    data = copy.deepcopy(_data())
    edit(data)
    with pytest.raises(ValueError, match=message):
        load_profiles(data)


def test_shipped_data_loads_and_names_are_unique():
    loaded = load_profiles(_data())
    assert len({p.name for p in loaded}) == len(loaded)


SWITCHES = {"FORCE_CUDA", "BUILD_TARGET", "FLASH_ATTENTION_FORCE_BUILD", "VLLM_TARGET_DEVICE", "CUPY_INSTALL_USE_HIP"}


def test_unknown_project_gets_every_target_list_and_no_switch():
    profile = profiles.select_profile("auto", "flash-attention-fork")
    assert profile.name == profiles.TARGET_LISTS
    env = profile.env(T("gfx90a:xnack-;gfx942"))
    assert env == {"GPU_ARCHS": "gfx90a;gfx942", "HIP_ARCHITECTURES": "gfx90a:xnack- gfx942"}
    assert not SWITCHES & set(env)
    assert profile.cmake_defines(T("gfx942")) == {}
    assert "GPU_ARCHS as flash-attn, aiter read it" in profile.source


def test_no_name_at_all_also_gets_the_target_lists():
    assert profiles.select_profile("auto", None).name == profiles.TARGET_LISTS


@pytest.mark.parametrize(
    ("setting", "dist", "expected"),
    [
        ("auto", "Flash_Attn", "flash-attn"),
        ("none", "flash-attn", None),
        ("xformers", "my-fork", "xformers"),
        ("amd-aiter", None, "aiter"),
        ("xformer", "xformers", None),  # an unknown explicit name: the caller reports it
    ],
)
def test_select_profile(setting, dist, expected):
    found = profiles.select_profile(setting, dist)
    assert (found.name if found else None) == expected


def test_every_target_list_is_marked_and_switches_are_not():
    marked = {v.name for p in profiles.all_profiles() for v in p.variables if v.target_list}
    assert marked == {"GPU_ARCHS", "HIP_ARCHITECTURES"}
    for p in profiles.all_profiles():
        for v in p.variables:
            if v.name in SWITCHES:
                assert not v.target_list, (p.name, v.name)


def test_plan_of_an_unknown_project_names_the_target_lists():
    from rocm_build_backend.builder.plan import Host, make_plan
    from rocm_build_backend.builder.settings import load_settings

    p = make_plan(
        T("gfx942"),
        "from test",
        load_settings({}, None, {}),
        {},
        backend_kind="setuptools",
        host=Host(cpus=4, mem_available=8 << 30),
        dist_name="somebodys-kernels",
    )
    assert p.profile == profiles.TARGET_LISTS
    assert p.env["GPU_ARCHS"] == "gfx942" and p.env["HIP_ARCHITECTURES"] == "gfx942"
    assert "FLASH_ATTENTION_FORCE_BUILD" not in p.env and "FORCE_CUDA" not in p.env


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["profiles"][2]["vendors"]["amd"]["variables"][1].update(target_list=True), "target_list variable"),
        (lambda d: d["profiles"][2]["vendors"]["amd"]["variables"][0].update(target_list="yes"), "true or false"),
        (lambda d: d["profiles"][3]["vendors"]["amd"]["variables"][0].update(separator=","), "written differently"),
    ],
)
def test_malformed_target_lists_are_refused(edit, message):
    data = copy.deepcopy(_data())
    assert data["profiles"][2]["name"] == "flash-attn" and data["profiles"][3]["name"] == "aiter"
    edit(data)
    with pytest.raises(ValueError, match=message):
        load_profiles(data)


def test_load_project_reads_the_name_from_pkg_info(tmp_path):
    from rocm_build_backend.builder.flow import load_project

    (tmp_path / "setup.py").write_text("import os\nsetup(name=os.environ['X'])\n")
    (tmp_path / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: flash_attn\nVersion: 2.8.3\n\nName: not-this\n")
    project = load_project({}, env={}, source_dir=tmp_path)
    assert project.dist_name == "flash_attn"
    assert profile_for(project.dist_name).name == "flash-attn"
