"""Variant wheels picked by real resolvers: variantlib with rocm-bootstrap's AMD provider (a
gfx1100 code object made by clang-19), uv with its vendored NVIDIA provider, and pip, which
does not pick them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import code_object, picked_variants, TESTS, uv_or_skip, variant_links

BIN = TESTS / "data" / "binaries"


def test_variantlib_picks_the_amd_wheel(tmp_path):
    pytest.importorskip("variantlib")
    pytest.importorskip("rocm_bootstrap")
    links = variant_links(
        tmp_path,
        {
            "gfx90a": (BIN / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes(),
            "gfx942": (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes(),
            "gfx1100": code_object(tmp_path, "gfx1100"),
        },
    )
    assert sorted(p.name for p in links.iterdir()) == [
        "demo_gpu-1.0-py3-none-any-gfx1100.whl",
        "demo_gpu-1.0-py3-none-any-gfx90a.whl",
        "demo_gpu-1.0-py3-none-any-gfx942.whl",
        "demo_gpu-1.0-variants.json",
    ]
    vj = links / "demo_gpu-1.0-variants.json"
    assert picked_variants(vj, {"ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx942"}) == ["gfx942"]
    assert picked_variants(vj, {"ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx90a"}) == ["gfx90a"]
    assert picked_variants(vj, {"ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx908"}) == []


def _uv_install(uv: str, links: Path, target: Path, env: dict[str, str], *preview: str):
    argv = [
        uv,
        "pip",
        "install",
        "--python",
        sys.executable,
        "--no-index",
        "--find-links",
        str(links),
        "--target",
        str(target),
        "--no-cache",
        *preview,
        "demo-gpu",
    ]
    return subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)


def test_uv_picks_the_nvidia_wheel_with_its_vendored_provider(tmp_path):
    uv = uv_or_skip()
    links = variant_links(
        tmp_path,
        {
            "sm_80": (BIN / "cubin_abi8_sm80_cuda13.0.cubin").read_bytes(),
            "sm_90": (BIN / "cubin_abi7_sm90a_cuda12.4.cubin").read_bytes(),
        },
    )
    preview = ("--preview-features", "wheel-variants")
    force = {"NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": "13.0"}
    for sm, label in (("9.0", "90_real"), ("8.6", "80_real")):
        target = tmp_path / f"site-{sm}"
        proc = _uv_install(uv, links, target, {**force, "NV_VARIANT_PROVIDER_FORCE_SM_ARCH": sm}, *preview)
        if proc.returncode != 0 and "variant" not in proc.stderr:
            pytest.skip(f"this uv does not read wheel variants: {proc.stderr.strip()[-200:]}")
        assert proc.returncode == 0, proc.stderr
        (dist_info,) = target.glob("demo_gpu-1.0.dist-info")
        assert list(json.loads((dist_info / "variant.json").read_text())["variants"]) == [label]
    proc = _uv_install(
        uv, links, tmp_path / "site-7.5", {**force, "NV_VARIANT_PROVIDER_FORCE_SM_ARCH": "7.5"}, *preview
    )
    assert proc.returncode != 0 and "unsupported wheel variants" in proc.stderr
    # without the preview feature uv installs no variant wheel
    proc = _uv_install(uv, links, tmp_path / "site-plain", {**force, "NV_VARIANT_PROVIDER_FORCE_SM_ARCH": "9.0"})
    assert proc.returncode != 0 and not (tmp_path / "site-plain" / "demo_gpu").exists()


def test_pip_does_not_pick_variant_wheels(tmp_path):
    links = variant_links(tmp_path, {"gfx942": (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes()})
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    base = [sys.executable, "-m", "pip", "install", "--no-index", "--no-cache-dir", "--target", str(tmp_path / "site")]
    found = subprocess.run(base + ["--find-links", str(links), "demo-gpu"], env=env, capture_output=True, text=True)
    assert found.returncode != 0 and "from versions: none" in found.stderr
    direct = subprocess.run(
        base + [str(links / "demo_gpu-1.0-py3-none-any-gfx942.whl")], env=env, capture_output=True, text=True
    )
    assert direct.returncode != 0 and "Invalid build number" in direct.stderr
    assert not (tmp_path / "site" / "demo_gpu").exists()
