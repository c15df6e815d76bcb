"""Variant wheels only where the frontend takes them back, plain wheels elsewhere; labels within
16 characters; provider requirements the package index can satisfy.

Here: how the frontend is told (``builder.frontend``: its copy of the sources, whether it takes
a variant wheel back), the labels and the providers' requirements. Real ``uv pip install`` and
``uv build`` of a variant project: tests/integration/test_variant_frontends_installs.py.
"""

from __future__ import annotations

import pytest
from packaging.requirements import Requirement

from rocm_build_backend.builder.frontend import frontend_copy, variant_verdict
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.gpu.vendor import vendor_names
from rocm_build_backend.wheel.variant import properties as V
from helpers import TESTS, gpu_wheel

BIN = TESTS / "data" / "binaries"
# what the package index holds of each provider (``pip index versions --pre``): the only
# versions a requirement in ``variant.json`` can be satisfied with
INDEX_HOLDS = {"rocm-bootstrap": ["0.1.0", "0.2.0", "0.3.0"], "nvidia-variant-provider": ["0.0.0a0"]}


def test_the_frontend_decides_variant_or_plain(tmp_path):
    cache = tmp_path / "uv-cache"
    (cache / "builds-v0" / ".tmpX").mkdir(parents=True)
    (cache / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    uv = {"UV": "/usr/bin/uv", "UV_INTERNAL__BUILD_DIR": str(tmp_path)}
    hooks = {"_PYPROJECT_HOOKS_BUILD_BACKEND": "rocm_build_backend"}
    assert variant_verdict(tmp_path / "dist", uv)[0] is True  # uv build: the user's --out-dir
    assert variant_verdict(cache / "builds-v0" / ".tmpX", uv) == (
        False,
        "uv installs what it builds only as a plain wheel (`uv pip install`, `uv sync`)",
    )
    assert variant_verdict(tmp_path, {"PIP_BUILD_TRACKER": "/tmp/t", **hooks})[0] is False
    assert variant_verdict(tmp_path, hooks, parent=["/usr/bin/python3", "-m", "build", "--wheel"])[0] is True
    assert variant_verdict(tmp_path, hooks, parent=["/venv/bin/python", "/venv/bin/pyproject-build"])[0] is True
    assert variant_verdict(tmp_path, hooks, parent=["/usr/bin/python3", "-m", "pdm", "build"])[0] is False
    assert variant_verdict(tmp_path, {})[0] is False  # unknown frontend: the plain wheel


def test_frontend_copies_are_told_from_the_users_checkout(tmp_path):
    temp = tmp_path / "tmp"
    for name, who in (
        ("pip-req-build-abc", "pip"),
        ("pip-install-x1/demo_0ad5", "pip"),
        ("pip-wheel-x2/demo_0ad5", "pip"),
        ("build-via-sdist-q/demo-1.0", "build"),
        ("checkout", None),
    ):
        (temp / name).mkdir(parents=True)
        assert frontend_copy(temp / name, str(temp)) == who, name
    uv = tmp_path / "cache"
    src = uv / "sdists-v11" / "index" / "a5a7" / "demo" / "1.0" / "s5je" / "src"
    src.mkdir(parents=True)
    assert frontend_copy(src, str(temp)) is None  # no CACHEDIR.TAG: not a cache
    (uv / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    assert frontend_copy(src, str(temp)) == "uv"
    assert frontend_copy(uv / "sdists-v11", str(temp)) is None


def test_labels_fit_in_16_characters_and_say_what_they_stand_for(tmp_path):
    props = {"amd": {"gfx_arch": ["gfx1030", "gfx908", "gfx90a"]}}
    label = V.default_label(props)
    assert len(label) == 8 and label == V.default_label({"amd": {"gfx_arch": ["gfx90a", "gfx908", "gfx1030"]}})
    assert V.default_label({"amd": {"gfx_arch": ["gfx908", "gfx90a"]}}) == "gfx908.gfx90a"
    assert V.default_label({"nvidia": {"sm_arch": ["75_real", "80_real", "90_real"]}}) != "75_real.80_real.90_real"
    with pytest.raises(Exception, match="longer than 16"):
        V.check_label("gfx1030.gfx908.gfx90a", props)
    # a library with code for three GPUs (gfx906, gfx908, gfx90a): "gfx906.gfx908.gfx90a" is 20
    # characters; the label is the short form, and variant.json says what it stands for
    out = V.make_variant_wheel(
        gpu_wheel(tmp_path / "plain", (BIN / "hip_features_cov4.so").read_bytes()), tmp_path / "out"
    )
    got_label, data = V.read_variant(out)
    assert len(got_label) == 8 and out.name.endswith(f"-{got_label}.whl")
    assert data["variants"] == {got_label: {"amd": {"gfx_arch": ["gfx906", "gfx908", "gfx90a"]}}}


def test_provider_requirements_are_satisfiable_by_the_index():
    providers = [build_side(name).variant for name in vendor_names()]
    assert {p.namespace for p in providers if p is not None} == {"amd", "nvidia"}
    for provider in providers:
        assert provider is not None
        for text in provider.provider["requires"]:
            req = Requirement(text)
            versions = INDEX_HOLDS[req.name]
            assert any(req.specifier.contains(v) for v in versions), (provider.namespace, text, versions)
