"""The build flow for NVIDIA targets: settings, where the targets come from, the vendor, the plan,
the toolchain step and the pinned tools. Pure parts table-driven; nvcc faked by a script."""

import json
import os
import shlex
import stat

import pytest

from rocm_build_backend.builder.plan import Host, make_plan
from rocm_build_backend.builder.prepare import resolve_targets
from rocm_build_backend.builder.settings import load_settings
from rocm_build_backend.errors import ConfigError, NoGpuDetectedError, ToolchainError
from rocm_build_backend.gpu.targets import parse_targets
from helpers import kfd_root


def settings(**values):
    return load_settings(
        {"tool": {"rocm-build-backend": {k.replace("_", "-"): v for k, v in values.items()}}}, None, {}
    )


# ---------------------------------------------------------------------------- settings


@pytest.mark.parametrize("channel", ["pyproject", "-C", "env"])
@pytest.mark.parametrize(
    "key, value, attr, expect",
    [
        ("vendor", "nvidia", "vendor", "nvidia"),
        ("vendor", "AMD", "vendor", "amd"),
        ("ptx", "highest", "ptx", "highest"),
        ("ptx", "all", "ptx", "all"),
    ],
)
def test_vendor_and_ptx_are_read_from_every_channel(channel, key, value, attr, expect):
    if channel == "pyproject":
        s = load_settings({"tool": {"rocm-build-backend": {key: value}}}, None, {})
    elif channel == "-C":
        s = load_settings(None, {f"rocm-build-backend.{key}": value}, {})
    else:
        s = load_settings(None, None, {f"ROCM_BUILD_BACKEND_{key.upper()}": value})
    assert getattr(s, attr) == expect and s.source_of(key) == channel


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("vendor", "intel", "'auto' or 'amd' or 'nvidia'"),
        ("ptx", "some", "'none' or 'highest' or 'all'"),
    ],
)
def test_bad_vendor_or_ptx_names_the_choices(key, value, words):
    with pytest.raises(ConfigError) as err:
        load_settings(None, {f"rocm-build-backend.{key}": value}, {})
    assert words in err.value.message and f"-C rocm-build-backend.{key}" in err.value.message


def test_ptx_choices_are_the_knobs_own():
    from rocm_build_backend.gpu.nvidia.knobs import PTX_CHOICES

    for choice in PTX_CHOICES:
        assert load_settings(None, {"rocm-build-backend.ptx": choice}, {}).ptx == choice


# ------------------------------------------------------------------- where the targets come from


@pytest.mark.parametrize(
    "values, env, targets, source, vendor",
    [
        ({"targets": "sm_80;sm_90"}, {}, ["sm_80", "sm_90"], "settings", "nvidia"),
        ({"targets": "sm_90", "vendor": "nvidia"}, {"TORCH_CUDA_ARCH_LIST": "9.0"}, ["sm_90"], "settings", "nvidia"),
        ({"targets": "sm_90", "ptx": "highest"}, {"TORCH_CUDA_ARCH_LIST": "9.0+PTX"}, ["sm_90"], "settings", "nvidia"),
        # another vendor's variable is no request for this build
        ({"targets": "sm_90"}, {"PYTORCH_ROCM_ARCH": "gfx942"}, ["sm_90"], "settings", "nvidia"),
        ({"targets": "gfx942"}, {"TORCH_CUDA_ARCH_LIST": "8.0"}, ["gfx942"], "settings", "amd"),
        (
            {},
            {"TORCH_CUDA_ARCH_LIST": "8.0;9.0+PTX"},
            ["sm_80", "sm_90", "compute_90"],
            "TORCH_CUDA_ARCH_LIST",
            "nvidia",
        ),
        ({}, {"TORCH_CUDA_ARCH_LIST": "8.0 9.0a"}, ["sm_80", "sm_90a"], "TORCH_CUDA_ARCH_LIST", "nvidia"),
        ({}, {"PYTORCH_ROCM_ARCH": "gfx942"}, ["gfx942"], "PYTORCH_ROCM_ARCH", "amd"),
        (
            {"vendor": "nvidia"},
            {"PYTORCH_ROCM_ARCH": "gfx942", "TORCH_CUDA_ARCH_LIST": "9.0"},
            ["sm_90"],
            "TORCH_CUDA_ARCH_LIST",
            "nvidia",
        ),
        (
            {"vendor": "amd"},
            {"PYTORCH_ROCM_ARCH": "gfx942", "TORCH_CUDA_ARCH_LIST": "9.0"},
            ["gfx942"],
            "PYTORCH_ROCM_ARCH",
            "amd",
        ),
    ],
)
def test_resolved_targets_and_vendor(values, env, targets, source, vendor):
    got = resolve_targets(settings(**values), env)
    assert [str(t) for t in got.targets] == targets
    assert (got.source, got.vendor) == (source, vendor)


@pytest.mark.parametrize(
    "values, env, words",
    [
        (
            {"targets": "sm_80;sm_90"},
            {"TORCH_CUDA_ARCH_LIST": "9.0"},
            "[tool.rocm-build-backend] targets asks for sm_80;sm_90 but TORCH_CUDA_ARCH_LIST=9.0 is set",
        ),
        ({"targets": "sm_90"}, {"TORCH_CUDA_ARCH_LIST": "9.0+PTX"}, "TORCH_CUDA_ARCH_LIST=9.0+PTX"),
        ({"targets": "gfx942"}, {"PYTORCH_ROCM_ARCH": "gfx90a"}, "PYTORCH_ROCM_ARCH=gfx90a"),
        ({}, {"PYTORCH_ROCM_ARCH": "gfx942", "TORCH_CUDA_ARCH_LIST": "9.0"}, "a build targets one vendor"),
        ({"targets": "gfx942;sm_90"}, {}, "a build targets one vendor"),
        ({"targets": "sm_90", "vendor": "amd"}, {}, "vendor = 'amd' but the targets are nvidia targets"),
    ],
)
def test_conflicting_requests_stop_the_build(values, env, words):
    with pytest.raises(ConfigError) as err:
        resolve_targets(settings(**values), env)
    assert words in err.value.message


def test_detected_gpus_of_another_vendor_are_named(tmp_path):
    root = kfd_root(tmp_path, *[90402] * 8)  # eight MI300X (gfx942)
    s = load_settings(None, None, {"ROCM_BUILD_BACKEND_SYSFS_ROOT": str(root), "ROCM_BUILD_BACKEND_VENDOR": "nvidia"})
    with pytest.raises(NoGpuDetectedError) as err:
        resolve_targets(s, {"PATH": "/nonexistent"})
    assert err.value.message.startswith("no NVIDIA GPU found (")
    assert err.value.message.endswith("; found gfx942, of another vendor)")


def test_detected_amd_gpus_pick_amd(tmp_path):
    root = kfd_root(tmp_path, *[90402] * 8)  # eight MI300X (gfx942)
    s = load_settings(None, None, {"ROCM_BUILD_BACKEND_SYSFS_ROOT": str(root)})
    got = resolve_targets(s, {"PATH": "/nonexistent"})
    assert ([str(t) for t in got.targets], got.vendor, got.source) == (["gfx942"], "amd", "detected:kfd")


# ------------------------------------------------------------------------------ the plan


def plan(targets, env=None, kind="setuptools", cs=None, dist=None, **values):
    return make_plan(
        parse_targets(targets),
        "settings",
        settings(**values),
        env or {},
        backend_kind=kind,
        config_settings=cs,
        host=Host(cpus=8, mem_available=64 << 30),
        dist_name=dist,
    )


@pytest.mark.parametrize(
    "targets, ptx, code, torch, cmake",
    [
        ("sm_80;sm_90", "none", ["sm_80", "sm_90"], "8.0;9.0", "80-real;90-real"),
        ("sm_90", "highest", ["sm_90", "compute_90"], "9.0+PTX", "90"),
        ("sm_80;sm_90a", "all", ["sm_80", "compute_80", "sm_90a", "compute_90"], None, None),
    ],
)
def test_nvidia_plan_knobs(targets, ptx, code, torch, cmake):
    p = plan(targets, ptx=ptx)
    assert p.vendor == "nvidia" and [str(t) for t in p.targets] == code
    for amd in ("PYTORCH_ROCM_ARCH", "GPU_TARGETS", "HIP_PLATFORM", "HIPCC_COMPILE_FLAGS_APPEND"):
        assert amd not in p.env
    if torch:
        assert p.env["TORCH_CUDA_ARCH_LIST"] == torch
    if cmake:
        assert p.env["CUDAARCHS"] == cmake
        assert shlex.split(p.env["CMAKE_ARGS"]) == [f"-DCMAKE_CUDA_ARCHITECTURES={cmake}"]
    flags = shlex.split(p.env["NVCC_APPEND_FLAGS"])
    assert len([f for f in flags if f.startswith("-gencode")]) == len(code)
    assert p.env["MAX_JOBS"] == "8"
    data = p.to_json()
    assert data["vendor"] == "nvidia" and data["targets"] == code
    assert "pinned nvidia-smi reports the targets (rocminfo & co. report no AMD GPU)" in p.summary()


def test_nvidia_plan_for_scikit_build_core_and_conflicts():
    p = plan("sm_80;sm_90", kind="scikit-build-core", cs={"other": "x"})
    assert p.config_settings == {"other": "x", "cmake.define.CMAKE_CUDA_ARCHITECTURES": "80-real;90-real"}
    with pytest.raises(ConfigError, match="conflicts with the targets"):
        plan("sm_80;sm_90", kind="scikit-build-core", cs={"cmake.define.CMAKE_CUDA_ARCHITECTURES": "75"})


def test_nvidia_plan_keeps_and_replaces_the_users_values():
    p = plan(
        "sm_80;sm_90",
        env={
            "TORCH_CUDA_ARCH_LIST": "8.0 9.0",
            "CUDAARCHS": "70",
            "CMAKE_ARGS": "-DFOO=1 -DCMAKE_CUDA_ARCHITECTURES=70",
        },
    )
    assert p.kept == {"TORCH_CUDA_ARCH_LIST": "8.0 9.0"}
    assert set(p.replaced) == {"CUDAARCHS", "CMAKE_ARGS"}
    assert shlex.split(p.env["CMAKE_ARGS"]) == ["-DFOO=1", "-DCMAKE_CUDA_ARCHITECTURES=80-real;90-real"]


def test_nvidia_profile_applies_by_distribution_name():
    p = plan("sm_90", dist="flash-attn")
    assert p.profile == "flash-attn" and p.env["FLASH_ATTN_CUDA_ARCHS"] == "90"
    assert plan("sm_90", dist="flash-attn", profile="none").profile is None


# ------------------------------------------------------------------- toolchain, pinned tools


def _fake_nvcc(tmp_path, codes):
    nvcc = tmp_path / "nvcc"
    gpu_code = " ".join(f"sm_{c}" for c in codes)
    arch = " ".join(f"compute_{c}" for c in codes)
    nvcc.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  --version) echo 'Cuda compilation tools, release 12.4, V12.4.131';;\n"
        f"  --list-gpu-code) for c in {gpu_code}; do echo $c; done;;\n"
        f"  --list-gpu-arch) for c in {arch}; do echo $c; done;;\n"
        "esac\n"
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    return nvcc


def _project(tmp_path, values):
    from rocm_build_backend.builder.source import Project

    s = settings(**values)
    return Project(source_dir=tmp_path, pyproject={"project": {"name": "demo"}}, settings=s, forward={})


def test_toolchain_step_checks_nvcc_for_nvidia_targets(tmp_path, monkeypatch):
    from rocm_build_backend.builder.prepare import prepare
    from rocm_build_backend.builder.project import plan_json

    nvcc = _fake_nvcc(tmp_path, [75, 80, 90])
    env = {"NVCC": str(nvcc), "XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": os.defpath}
    prepared = prepare(_project(tmp_path, {"targets": "sm_80;sm_90"}), env)
    assert prepared.compiler is not None and prepared.compiler.to_json()["version"] == "12.4"
    data = plan_json(prepared, [])
    assert data["compiler"]["compiler"] == "nvcc" and "path" not in data["compiler"]
    import jsonschema
    from rocm_build_backend import data as package_data

    schema = json.loads(package_data.path("schemas/plan.schema.json").read_text())
    jsonschema.validate(data, schema)
    with pytest.raises(ToolchainError) as err:
        prepare(_project(tmp_path, {"targets": "sm_100"}), env)
    assert "CUDA 12.4" in err.value.message and "\n" not in err.value.message


def test_pinned_tools_for_nvidia_add_nvidia_smi(tmp_path):
    from rocm_build_backend.builder.pinned import write_pinned_tools

    written = write_pinned_tools(tmp_path, parse_targets("sm_80;sm_90"))
    assert written[0].name == "nvidia-smi" and "rocminfo" in os.listdir(tmp_path)
    assert "nvidia-smi" not in os.listdir(write_pinned_tools(tmp_path / "amd", parse_targets("gfx942"))[0].parent)
    import subprocess

    out = subprocess.run(
        [str(written[0]), "--query-gpu=compute_cap", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["8.0", "9.0"]
