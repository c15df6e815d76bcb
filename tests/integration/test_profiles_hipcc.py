"""Project profiles' knobs read by the real compilers: hipcc steered by HCC_AMDGPU_TARGET as CuPy
relies on, and clang taking a comma-joined ``--offload-arch`` as causal-conv1d and mamba pass it.
"""

from __future__ import annotations

import os
import subprocess

from rocm_build_backend.builder.profiles import profile_for
from rocm_build_backend.gpu.targets import parse_targets
from helpers import ROOT


T = parse_targets


def test_hcc_amdgpu_target_steers_hipcc_as_cupy_relies_on(tmp_path):
    """CuPy leaves the targets to hipcc, which reads HCC_AMDGPU_TARGET (','-joined) when no
    --offload-arch is given; the generic knob sets it."""
    source = ROOT / "tests" / "projects" / "env_gpu_archs" / "csrc" / "kernels.hip"
    lib = tmp_path / "k.so"
    env = {k: v for k, v in os.environ.items() if k not in ("HIPCC_COMPILE_FLAGS_APPEND",)}
    env.update(HIP_PLATFORM="amd", HCC_AMDGPU_TARGET="gfx90a,gfx940")
    subprocess.run(
        ["hipcc", "-O2", "-fPIC", "-shared", str(source), "-o", str(lib)], env=env, check=True, capture_output=True
    )
    fatbin = tmp_path / "k.fatbin"
    subprocess.run(["llvm-objcopy-19", f"--dump-section=.hip_fatbin={fatbin}", str(lib), os.devnull], check=True)
    listing = subprocess.run(
        ["clang-offload-bundler-19", "--list", "--type=o", f"--input={fatbin}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert sorted(x for x in listing if x.startswith("hipv4")) == [
        "hipv4-amdgcn-amd-amdhsa--gfx90a",
        "hipv4-amdgcn-amd-amdhsa--gfx940",
    ]


def test_comma_joined_offload_arch_as_causal_conv1d_and_mamba_pass_it(tmp_path):
    """causal-conv1d and mamba-ssm put all of HIP_ARCHITECTURES into one --offload-arch=; clang
    splits that at ',' (a space makes one invalid target ID), so their profiles join with ','."""
    value = profile_for("causal-conv1d").env(T("gfx90a:xnack-;gfx942"))["HIP_ARCHITECTURES"]
    source = tmp_path / "k.hip"
    source.write_text("__attribute__((global)) void k(int *p) { *p = 1; }\n")
    out = tmp_path / "k.o"
    subprocess.run(
        [
            "clang-19",
            "-x",
            "hip",
            "-nogpuinc",
            "-nogpulib",
            "--cuda-device-only",
            "-c",
            f"--offload-arch={value}",
            str(source),
            "-o",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    listing = subprocess.run(
        ["clang-offload-bundler-19", "--list", "--type=o", f"--input={out}"], check=True, capture_output=True, text=True
    ).stdout.split()
    assert sorted(x for x in listing if x.startswith("hipv4")) == [
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
        "hipv4-amdgcn-amd-amdhsa--gfx942",
    ]
    spaced = subprocess.run(
        [
            "clang-19",
            "-x",
            "hip",
            "-nogpuinc",
            "-nogpulib",
            "--cuda-device-only",
            "-c",
            f"--offload-arch={value.replace(',', ' ')}",
            str(source),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert spaced.returncode != 0 and "invalid target ID" in spaced.stderr
