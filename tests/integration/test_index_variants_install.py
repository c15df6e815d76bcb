"""``build_index(..., variants=True)``: one index of variant wheels and their variants JSON.

Proof by the resolvers that read it: variantlib with rocm-bootstrap's AMD provider, and uv's
``--preview-features wheel-variants`` with its vendored NVIDIA provider, both reading the
pages we wrote (the JSON found through the project page, not handed over).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rocm_build_backend.wheel.index.run import build_index
from helpers import (
    TESTS,
    code_object,
    picked_variants,
    served_variants_json,
    uv_or_skip,
    variant_dir,
    variants_project_page,
)

BIN = TESTS / "data" / "binaries"


def amd_blobs(tmp: Path) -> dict[str, bytes]:
    return {
        "gfx90a": (BIN / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes(),
        "gfx942": (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes(),
        "gfx1100": code_object(tmp, "gfx1100"),
    }


def test_variants_index_lists_variant_wheels_and_the_json(tmp_path):
    pytest.importorskip("variantlib")
    pytest.importorskip("rocm_bootstrap")
    wd, out = variant_dir(tmp_path, amd_blobs(tmp_path)), tmp_path / "out"
    result = build_index(wd, out, variants=True)
    assert result.skipped == {}
    labels = ["gfx1100", "gfx90a", "gfx942"]
    # every variant wheel, and the plain wheel as the fallback on the same page
    assert sorted(result.indexes["variants"]) == sorted(
        ["demo_gpu-1.0-py3-none-any.whl"] + [f"demo_gpu-1.0-py3-none-any-{x}.whl" for x in labels]
    )
    # the per-target indexes hold the plain wheel only (pip cannot install variant wheels)
    per_target = {k: v for k, v in result.indexes.items() if k != "variants"}
    assert per_target and all(v == ["demo_gpu-1.0-py3-none-any.whl"] for v in per_target.values())
    files = {f["filename"]: f for f in variants_project_page(out)["files"]}
    assert sorted(files) == [
        "demo_gpu-1.0-py3-none-any-gfx1100.whl",
        "demo_gpu-1.0-py3-none-any-gfx90a.whl",
        "demo_gpu-1.0-py3-none-any-gfx942.whl",
        "demo_gpu-1.0-py3-none-any.whl",
        "demo_gpu-1.0-variants.json",
    ]
    assert "core-metadata" not in files["demo_gpu-1.0-variants.json"]
    assert "core-metadata" in files["demo_gpu-1.0-py3-none-any-gfx942.whl"]
    html = (out / "variants/simple/demo-gpu/index.html").read_text()
    (anchor,) = [line for line in html.splitlines() if "variants.json<" in line]
    assert "data-core-metadata" not in anchor and "#sha256=" in anchor
    vj = served_variants_json(out)
    assert sorted(json.loads(vj.read_text())["variants"]) == labels
    assert picked_variants(vj, {"ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx942"}) == ["gfx942"]
    assert picked_variants(vj, {"ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx908"}) == []


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output clean
        pass


@pytest.mark.parametrize("over", ["file", "http"])
def test_uv_installs_the_nvidia_variant_from_our_index(tmp_path, over):
    uv = uv_or_skip()
    wd, out = (
        variant_dir(
            tmp_path,
            {
                "sm_80": (BIN / "cubin_abi8_sm80_cuda13.0.cubin").read_bytes(),
                "sm_90": (BIN / "cubin_abi7_sm90a_cuda12.4.cubin").read_bytes(),
            },
            plain=False,
        ),
        tmp_path / "out",
    )
    build_index(wd, out, variants=True)
    url = (out / "variants" / "simple").as_uri()
    srv = None
    if over == "http":
        srv = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(out)))
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{srv.server_address[1]}/variants/simple/"
    try:
        _install_each(uv, url, tmp_path)
    finally:
        if srv is not None:
            srv.shutdown()
            srv.server_close()


def _install_each(uv: str, url: str, tmp_path: Path) -> None:
    for sm, label in (("9.0", "90_real"), ("8.6", "80_real")):
        target = tmp_path / f"site-{sm}"
        env = {
            **os.environ,
            "NV_VARIANT_PROVIDER_FORCE_SM_ARCH": sm,
            "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": "13.0",
        }
        proc = subprocess.run(
            [
                uv,
                "pip",
                "install",
                "--python",
                sys.executable,
                "--index-url",
                url,
                "--target",
                str(target),
                "--no-cache",
                "--preview-features",
                "wheel-variants",
                "demo-gpu",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        (dist_info,) = target.glob("demo_gpu-1.0.dist-info")
        assert list(json.loads((dist_info / "variant.json").read_text())["variants"]) == [label]
