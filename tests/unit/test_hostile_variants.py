"""Hostile variant wheels for ``index --variants``: a ``variant.json`` of another shape, a label
reused for other properties, claims the binaries do not earn, a provider swapped, values outside
``[a-z0-9_.]``. Each fails only its own wheel, skipped with the reason; the others are indexed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT
from helpers import hostile as G

GFX942 = (G.DATA / "amdgpu_gfx942_cov5.hsaco").read_bytes()
GFX90A = (G.DATA / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes()
AMD_942 = {"amd": {"gfx_arch": ["gfx942"]}}


def index(wheels: Path, out: Path) -> tuple[subprocess.CompletedProcess, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", "index", "--variants", "--json", str(wheels), "-o", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc, json.loads(proc.stdout) if proc.stdout.strip() else {}


def good(folder: Path) -> Path:
    return G.variant_wheel(
        folder, "good", "1.0", "gfx942", G.variant_json("gfx942", AMD_942), members={"good/k.hsaco": GFX942}
    )


def shape(kind: str) -> object:
    data = G.variant_json("gfx942", AMD_942)
    if kind == "priorities-list":
        data["default-priorities"] = [1]
    elif kind == "variants-list":
        data["variants"] = ["gfx942"]
    elif kind == "variants-string":
        data["variants"] = "gfx942"
    elif kind == "namespace-int":
        data["default-priorities"] = {"namespace": 1}
    elif kind == "providers-list":
        data["providers"] = ["amd"]
    elif kind == "not-an-object":
        data = [data]
    return data


@pytest.mark.parametrize(
    "kind", ["priorities-list", "variants-list", "variants-string", "namespace-int", "providers-list"]
)
def test_a_variant_json_of_another_shape_fails_only_its_wheel(tmp_path, kind):
    wheels = tmp_path / "wheels"
    good(wheels)
    bad = G.variant_wheel(wheels, "bad", "1.0", "gfx942", shape(kind), members={"bad/k.hsaco": GFX942})
    proc, doc = index(wheels, tmp_path / "out")
    assert proc.returncode == 1, proc.stderr
    assert bad.name in doc["skipped"] and "variant.json" in doc["skipped"][bad.name], doc
    assert doc["indexes"]["variants"] == ["good-1.0-py3-none-any-gfx942.whl"]
    assert (tmp_path / "out" / "variants" / "simple" / "good" / "index.html").is_file()


def test_a_label_reused_for_other_properties_fails_only_the_later_wheel(tmp_path):
    wheels = tmp_path / "wheels"
    good(wheels)
    first = G.variant_wheel(wheels, "demo", "1.0", "x", G.variant_json("x", AMD_942), members={"demo/k.hsaco": GFX942})
    later = G.variant_wheel(
        tmp_path / "other",
        "demo",
        "1.0",
        "x",
        G.variant_json("x", {"amd": {"gfx_arch": ["gfx90a"]}}),
        members={"demo/k.co": GFX90A},
    )
    later = later.rename(wheels / "demo-1.0-py3-none-manylinux_2_28_x86_64-x.whl")
    proc, doc = index(wheels, tmp_path / "out")
    assert proc.returncode == 1, proc.stderr
    assert set(doc["skipped"]) == {later.name} and "'x'" in doc["skipped"][later.name], doc
    assert first.name in doc["indexes"]["variants"] and "good-1.0-py3-none-any-gfx942.whl" in doc["indexes"]["variants"]


@pytest.mark.parametrize("how", ["claim", "provider", "script", "control"])
def test_claims_are_checked_against_the_audit_before_they_are_published(tmp_path, how):
    wheels = tmp_path / "wheels"
    good(wheels)
    data = G.variant_json("gfx942", AMD_942)
    members = {"liar/k.hsaco": GFX942}
    if how == "claim":  # a gfx90a:xnack+ wheel published as gfx942
        members = {"liar/k.co": GFX90A}
    elif how == "provider":
        data["providers"]["amd"] = {"requires": ["evil-provider"], "plugin-api": "evil_provider:Plugin"}
    else:
        value = "</script>" if how == "script" else "gfx942\x1b[2j"
        data["variants"]["gfx942"]["amd"]["gfx_arch"] = [value]
    liar = G.variant_wheel(wheels, "liar", "1.0", "gfx942", data, members=members)
    out = tmp_path / "out"
    proc, doc = index(wheels, out)
    assert proc.returncode == 1, proc.stderr
    assert liar.name in doc["skipped"], doc
    assert doc["indexes"]["variants"] == ["good-1.0-py3-none-any-gfx942.whl"], doc
    published = "".join(
        p.read_text(errors="replace") for p in out.rglob("*") if p.is_file() and p.suffix in (".json", ".html")
    )
    assert "liar" not in published and "evil" not in published and "</script>" not in published
