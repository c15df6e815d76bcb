"""``build_index(..., variants=True)``: one index of variant wheels and their variants JSON, written
again only when it changes. The resolvers that read it: tests/integration/test_index_variants_install.py.
"""

from __future__ import annotations

import json
import os

from rocm_build_backend.wheel.index.run import build_index
from helpers import served_variants_json, TESTS, variant_dir, variants_project_page

BIN = TESTS / "data" / "binaries"


def test_variants_index_is_incremental_and_cleans_up(tmp_path):
    wd, out = (
        variant_dir(
            tmp_path,
            {
                "gfx90a": (BIN / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes(),
                "gfx942": (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes(),
            },
        ),
        tmp_path / "out",
    )
    build_index(wd, out, variants=True)
    old = served_variants_json(out)
    again = build_index(wd, out, variants=True)
    assert again.written == [] and again.removed == [] and again.read == 0
    (wd / "demo_gpu-1.0-py3-none-any-gfx90a.whl").unlink()
    third = build_index(wd, out, variants=True)
    new = served_variants_json(out)
    assert not old.exists() and new != old
    assert list(json.loads(new.read_text())["variants"]) == ["gfx942"]
    assert os.path.relpath(old, out) in third.removed
    assert [f["filename"] for f in variants_project_page(out)["files"]] == [
        "demo_gpu-1.0-py3-none-any-gfx942.whl",
        "demo_gpu-1.0-py3-none-any.whl",
        "demo_gpu-1.0-variants.json",
    ]


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
