"""``build_index(..., variants=True)``: one index of variant wheels and their variants JSON.

Proof by the resolvers that read it: variantlib with rocm-bootstrap's AMD provider, and uv's
``--preview-features wheel-variants`` with its vendored NVIDIA provider, both reading the
pages we wrote (the JSON found through the project page, not handed over).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rocm_build_backend.wheel.variant import properties as V
from rocm_build_backend.wheel.index.run import build_index
from test_variant import BIN, _picked, _uv_with_variants, code_object, gpu_wheel


def variant_dir(tmp: Path, blobs: dict[str, bytes], plain: bool = True) -> Path:
    """WHEEL_DIR: a variant wheel of demo-gpu 1.0 per blob, and (``plain``) one plain wheel."""
    wd = tmp / "wheels"
    for key, data in blobs.items():
        V.make_variant_wheel(gpu_wheel(tmp / "plain" / key, data), wd)
    if plain:
        shutil.copy(next((tmp / "plain" / next(iter(blobs))).glob("*.whl")), wd)
    return wd


def amd_blobs(tmp: Path) -> dict[str, bytes]:
    return {"gfx90a": (BIN / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes(),
            "gfx942": (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes(),
            "gfx1100": code_object(tmp, "gfx1100")}


def project_page(out: Path) -> dict:
    return json.loads((out / "variants/simple/demo-gpu/index.json").read_text())


def served_json(out: Path) -> Path:
    """The variants JSON the project page links to, found as an installer finds it."""
    page = out / "variants/simple/demo-gpu"
    (item,) = [f for f in project_page(out)["files"] if f["filename"].endswith("-variants.json")]
    return (page / item["url"]).resolve()


def test_variants_index_lists_variant_wheels_and_the_json(tmp_path):
    pytest.importorskip("variantlib")
    pytest.importorskip("rocm_bootstrap")
    wd, out = variant_dir(tmp_path, amd_blobs(tmp_path)), tmp_path / "out"
    result = build_index(wd, out, variants=True)
    assert result.skipped == {}
    labels = ["gfx1100", "gfx90a", "gfx942"]
    # every variant wheel, and the plain wheel as the fallback on the same page
    assert sorted(result.indexes["variants"]) == sorted(["demo_gpu-1.0-py3-none-any.whl"] + [
        f"demo_gpu-1.0-py3-none-any-{x}.whl" for x in labels])
    # the per-target indexes hold the plain wheel only (pip cannot install variant wheels)
    per_target = {k: v for k, v in result.indexes.items() if k != "variants"}
    assert per_target and all(v == ["demo_gpu-1.0-py3-none-any.whl"] for v in per_target.values())
    files = {f["filename"]: f for f in project_page(out)["files"]}
    assert sorted(files) == ["demo_gpu-1.0-py3-none-any-gfx1100.whl", "demo_gpu-1.0-py3-none-any-gfx90a.whl",
                             "demo_gpu-1.0-py3-none-any-gfx942.whl", "demo_gpu-1.0-py3-none-any.whl",
                             "demo_gpu-1.0-variants.json"]
    assert "core-metadata" not in files["demo_gpu-1.0-variants.json"]
    assert "core-metadata" in files["demo_gpu-1.0-py3-none-any-gfx942.whl"]
    html = (out / "variants/simple/demo-gpu/index.html").read_text()
    (anchor,) = [line for line in html.splitlines() if "variants.json<" in line]
    assert "data-core-metadata" not in anchor and "#sha256=" in anchor
    vj = served_json(out)
    assert sorted(json.loads(vj.read_text())["variants"]) == labels
    assert _picked(vj, {"ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx942"}) == ["gfx942"]
    assert _picked(vj, {"ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx908"}) == []


def test_variants_index_is_incremental_and_cleans_up(tmp_path):
    wd, out = variant_dir(tmp_path, {"gfx90a": (BIN / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes(),
                                     "gfx942": (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes()}), tmp_path / "out"
    build_index(wd, out, variants=True)
    old = served_json(out)
    again = build_index(wd, out, variants=True)
    assert again.written == [] and again.removed == [] and again.read == 0
    (wd / "demo_gpu-1.0-py3-none-any-gfx90a.whl").unlink()
    third = build_index(wd, out, variants=True)
    new = served_json(out)
    assert not old.exists() and new != old
    assert list(json.loads(new.read_text())["variants"]) == ["gfx942"]
    assert os.path.relpath(old, out) in third.removed
    assert [f["filename"] for f in project_page(out)["files"]] == [
        "demo_gpu-1.0-py3-none-any-gfx942.whl", "demo_gpu-1.0-py3-none-any.whl", "demo_gpu-1.0-variants.json"]


def test_without_variants_variant_wheels_are_skipped_with_the_reason(tmp_path):
    wd = variant_dir(tmp_path, {"gfx942": (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes()})
    result = build_index(wd, tmp_path / "out")
    assert "index variant wheels with variants" in result.skipped["demo_gpu-1.0-py3-none-any-gfx942.whl"]
    assert result.indexes["gfx942"] == ["demo_gpu-1.0-py3-none-any.whl"]
    assert not (tmp_path / "out" / "variants").exists()


def test_only_variant_wheels_write_only_the_variants_index(tmp_path):
    wd = variant_dir(tmp_path, {"gfx942": (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes()}, plain=False)
    result = build_index(wd, tmp_path / "out", variants=True)
    assert list(result.indexes) == ["variants"] and result.skipped == {}


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output clean
        pass


@pytest.mark.parametrize("over", ["file", "http"])
def test_uv_installs_the_nvidia_variant_from_our_index(tmp_path, over):
    uv = _uv_with_variants()
    wd, out = variant_dir(tmp_path, {"sm_80": (BIN / "cubin_abi8_sm80_cuda13.0.cubin").read_bytes(),
                                     "sm_90": (BIN / "cubin_abi7_sm90a_cuda12.4.cubin").read_bytes()},
                          plain=False), tmp_path / "out"
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
        env = {**os.environ, "NV_VARIANT_PROVIDER_FORCE_SM_ARCH": sm,
               "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": "13.0"}
        proc = subprocess.run([uv, "pip", "install", "--python", sys.executable, "--index-url", url,
                               "--target", str(target), "--no-cache", "--preview-features", "wheel-variants",
                               "demo-gpu"], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        (dist_info,) = target.glob("demo_gpu-1.0.dist-info")
        assert list(json.loads((dist_info / "variant.json").read_text())["variants"]) == [label]
