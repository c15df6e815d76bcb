"""Variant wheels: properties from the audit, variant.json, the index's variants JSON, checked
against the reference implementation (variantlib) with a stand-in NVIDIA provider. variantlib
with rocm-bootstrap's AMD provider, uv's resolver and pip: tests/integration/test_variant_resolvers.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.errors import RocmBuildBackendError, WheelError
from rocm_build_backend.wheel.variant import properties as V
from rocm_build_backend.wheel.reader import wheel_targets
from helpers import gpu_wheel, make_wheel, picked_variants, TESTS, variant_links

BIN = TESTS / "data" / "binaries"


def props_of(data: bytes, tmp: Path) -> dict:
    return V.properties_for(wheel_targets(gpu_wheel(tmp / "w", data)))


def test_feature_suffixes_map_to_the_owner(tmp_path):
    # gfx90a:xnack+ code (a raw code object) and a bundle of gfx906:sramecc+:xnack-,
    # gfx908:xnack-, gfx90a:xnack+ and gfx90a:xnack-: owners are bare processors
    assert props_of((BIN / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes(), tmp_path / "a") == {
        "amd": {"gfx_arch": ["gfx90a"]}
    }
    assert props_of((BIN / "hip_features_cov4.so").read_bytes(), tmp_path / "b") == {
        "amd": {"gfx_arch": ["gfx906", "gfx908", "gfx90a"]}
    }


def test_generic_target_gives_every_owner_it_loads_on(tmp_path):
    got = props_of((BIN / "hip_generic_gfx9-generic_gfx11-generic_cov6.so").read_bytes(), tmp_path)
    # gfx9-generic loads on gfx900/902/904/906/909/90c (not gfx908 or gfx90a), gfx11-generic on
    # gfx1100-gfx1103 and gfx1150-gfx1153 (LLVM AMDGPUUsage, "Generic processors")
    assert got == {
        "amd": {
            "gfx_arch": sorted(
                [
                    "gfx900",
                    "gfx902",
                    "gfx904",
                    "gfx906",
                    "gfx909",
                    "gfx90c",
                    "gfx1100",
                    "gfx1101",
                    "gfx1102",
                    "gfx1103",
                    "gfx1150",
                    "gfx1151",
                    "gfx1152",
                    "gfx1153",
                ]
            )
        }
    }


def test_owner_needs_every_file(tmp_path):
    # one file has gfx90a+gfx942, the other gfx942 only: only gfx942 is served
    both = (BIN / "hip_gfx90a_gfx942_cov5.so").read_bytes()
    only = (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes()
    w = make_wheel(tmp_path, "demo-gpu", "1.0", members={"demo_gpu/a.so": both, "demo_gpu/b.hsaco": only}, stamp=False)
    assert V.properties_for(wheel_targets(w)) == {"amd": {"gfx_arch": ["gfx942"]}}


def test_owners_come_from_rocm_bootstrap():
    pytest.importorskip("rocm_bootstrap")
    from rocm_build_backend.gpu.amd.variant import amd_owners

    owners = amd_owners()
    assert owners["gfx942"] == ["gfx942"]
    assert "gfx1250-strict" in owners["gfx1250"]  # rocm_bootstrap/package_metadata.py:18
    assert all(V.VALUE_RE.fullmatch(o) for o in owners)


@pytest.mark.parametrize(
    "fixture, values",
    [
        ("cubin_abi8_sm80_cuda13.0.cubin", ["80_real"]),
        ("cubin_abi7_sm90a_cuda12.4.cubin", ["90_real"]),  # sm_90a: sm_90 is the only 9.x device
        ("cuda_sm75_80_90_ptx90.so", ["75_real", "80_real", "90_real", "90_virtual"]),
        ("cuda_sm80_sm100_ptx100.fatbin", ["100_real", "100_virtual", "80_real"]),
    ],
)
def test_nvidia_sm_arch_values(tmp_path, fixture, values):
    assert props_of((BIN / fixture).read_bytes(), tmp_path) == {"nvidia": {"sm_arch": values}}


def test_arch_specific_code_for_a_family_earns_nothing(tmp_path):
    # sm_100a loads only on sm_100, but the provider offers 100_real to sm_101 and sm_103 too
    w = gpu_wheel(tmp_path, (BIN / "cubin_abi8_sm100a_cuda13.0.cubin").read_bytes())
    assert V.properties_for(wheel_targets(w)) == {}
    with pytest.raises(WheelError, match="no variant property"):
        V.make_variant_wheel(w, tmp_path / "out")


def test_pure_wheel_is_the_null_variant(tmp_path):
    w = make_wheel(tmp_path, "demo", "1.0", stamp=False)
    assert V.properties_for(wheel_targets(w)) == {}
    out = V.make_variant_wheel(w, tmp_path / "out")
    assert out.name == "demo-1.0-py3-none-any-null.whl"
    label, data = V.read_variant(out)
    assert label == "null" and data["variants"] == {"null": {}}
    pytest.importorskip("variantlib")
    from variantlib.variant_dist_info import VariantDistInfo

    assert VariantDistInfo(json.dumps(data), expected_label="null").variant_desc.is_null_variant()


def test_labels():
    assert V.default_label({}) == "null"
    assert V.default_label({"amd": {"gfx_arch": ["gfx942"]}}) == "gfx942"
    assert V.default_label({"nvidia": {"sm_arch": ["90_real", "80_real"]}}) == "80_real.90_real"
    many = {"amd": {"gfx_arch": ["gfx1100", "gfx1101", "gfx1102", "gfx1103"]}}
    lines = "".join(f"amd :: gfx_arch :: {v}\n" for v in many["amd"]["gfx_arch"])
    assert V.default_label(many) == hashlib.sha256(lines.encode()).hexdigest()[:8]
    with pytest.raises(RocmBuildBackendError):
        V.check_label("GFX942", {"amd": {"gfx_arch": ["gfx942"]}})
    with pytest.raises(RocmBuildBackendError):
        V.check_label("null", {"amd": {"gfx_arch": ["gfx942"]}})


@pytest.mark.parametrize(
    "name, base, label",
    [
        ("a-1.0-py3-none-any.whl", "a-1.0-py3-none-any.whl", None),
        ("a-1.0-1-py3-none-any.whl", "a-1.0-1-py3-none-any.whl", None),
        ("a-1.0-py3-none-any-gfx942.whl", "a-1.0-py3-none-any.whl", "gfx942"),
        ("a-1.0-2-cp312-cp312-linux_x86_64-80_real.whl", "a-1.0-2-cp312-cp312-linux_x86_64.whl", "80_real"),
    ],
)
def test_file_names(name, base, label):
    assert V.split_variant_name(name) == (base, label)
    if label:
        assert V.variant_filename(base, label) == name


def test_variants_json_name_is_normalized():
    assert V.variants_json_name("Demo.GPU", "1.0.0") == "demo_gpu-1.0.0-variants.json"
    assert V.variants_json_name("demo-gpu", "01.2") == "demo_gpu-1.2-variants.json"


def _record_ok(path: Path) -> None:
    with zipfile.ZipFile(path) as zf:
        record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        rows = [r.split(",") for r in zf.read(record).decode().splitlines() if r]
        listed = {r[0] for r in rows}
        assert listed == set(zf.namelist())
        for name, digest, size in rows:
            if name == record:
                continue
            data = zf.read(name)
            want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == (want, len(data)), name


def test_variant_wheel_is_valid_by_variantlib(tmp_path):
    variantlib = pytest.importorskip("variantlib")
    pytest.importorskip("rocm_bootstrap")
    from variantlib.api import make_variant_dist_info, validate_variant
    from variantlib.variant_dist_info import VariantDistInfo

    src = gpu_wheel(tmp_path, (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes())
    before = src.read_bytes()
    out = V.make_variant_wheel(src, tmp_path / "out")
    assert out.name == "demo_gpu-1.0-py3-none-any-gfx942.whl"
    assert src.read_bytes() == before  # the original is left alone
    _record_ok(out)
    label, data = V.read_variant(out)
    with zipfile.ZipFile(out) as zf:
        raw = zf.read("demo_gpu-1.0.dist-info/variant.json")
        assert zf.read("demo_gpu/_k.so") == (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes()
    info = VariantDistInfo(raw, expected_label="gfx942")
    result = validate_variant(info.variant_desc, info)
    assert result.is_valid(allow_unknown_plugins=False), result
    # variantlib writes the same document from the same description (only $schema differs:
    # variantlib 0.2.2 writes its own URL, uv 0.13 reads only the PEP 825/850 ones)
    theirs = json.loads(make_variant_dist_info(info.variant_desc, variant_info=info))
    theirs["$schema"] = V.SCHEMA_URL
    assert theirs == data
    assert variantlib.__name__ == "variantlib"
    with pytest.raises(WheelError, match="already exists"):
        V.make_variant_wheel(src, tmp_path / "out")


def test_the_build_replaces_its_own_wheel(tmp_path):
    src = gpu_wheel(tmp_path, (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes())
    out = V.make_variant_wheel(src, keep_original=False)
    assert out.parent == src.parent and not src.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_read_variant_refuses_a_label_that_disagrees(tmp_path):
    src = gpu_wheel(tmp_path, (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes())
    out = V.make_variant_wheel(src, tmp_path / "out")
    liar = out.with_name(out.name.replace("gfx942", "gfx90a"))
    out.rename(liar)
    with pytest.raises(WheelError, match="exactly the variant 'gfx90a'"):
        V.read_variant(liar)
    assert V.read_variant(src) is None


def test_index_files_for_a_folder(tmp_path):
    plain = gpu_wheel(tmp_path / "plain", (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes())
    v942 = V.make_variant_wheel(plain, tmp_path / "links")
    v90a = V.make_variant_wheel(
        gpu_wheel(tmp_path / "p2", (BIN / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes()), tmp_path / "links"
    )
    files = V.index_files_for([plain, v942, v90a])
    data = json.loads(files["demo_gpu-1.0-variants.json"])
    assert list(files) == ["demo_gpu-1.0-variants.json"]
    assert data["variants"] == {
        "gfx90a": {"amd": {"gfx_arch": ["gfx90a"]}},
        "gfx942": {"amd": {"gfx_arch": ["gfx942"]}},
    }
    assert data["$schema"] == V.SCHEMA_URL and data["default-priorities"] == {"namespace": ["amd"]}


def test_merge_refuses_one_label_for_two_property_sets():
    a = V.variant_json("x", {"amd": {"gfx_arch": ["gfx942"]}})
    b = V.variant_json("x", {"amd": {"gfx_arch": ["gfx90a"]}})
    with pytest.raises(WheelError, match="two property sets"):
        V.merge_variants([a, b])


def test_merge_keeps_the_longest_namespace_order():
    a = V.variant_json("gfx942", {"amd": {"gfx_arch": ["gfx942"]}})
    b = V.variant_json("90_real", {"nvidia": {"sm_arch": ["90_real"]}}, namespaces=["amd", "nvidia"])
    merged = V.merge_variants([a, b])
    assert merged["default-priorities"]["namespace"] == ["amd", "nvidia"]
    assert sorted(merged["variants"]) == ["90_real", "gfx942"]


# A stand-in for NVIDIA's provider, which is not on PyPI (only a 0.0.0a0 placeholder is): the
# values its get_supported_configs gives for the highest SM of the machine, as
# nvidia_variant_provider/plugin.py lines 223-250 (wheelnext/nvidia-variant-provider ffea5d3b)
# compute them, honouring the provider's own NV_VARIANT_PROVIDER_FORCE_SM_ARCH.
NVIDIA_STAND_IN = """
import os
from dataclasses import dataclass

@dataclass(frozen=True)
class VariantFeatureConfig:
    name: str
    values: list
    multi_value: bool = False

class NvidiaVariantPlugin:
    namespace = "nvidia"
    is_aot_plugin = False

    @classmethod
    def get_all_configs(cls):
        sm = [f"{a}{b}_real" for a in range(12, 4, -1) for b in range(9, -1, -1)]
        sm += [f"{a}{b}_virtual" for a in range(12, 4, -1) for b in range(9, -1, -1)]
        return [VariantFeatureConfig("sm_arch", sm, True)]

    @classmethod
    def get_supported_configs(cls):
        major, minor = map(int, os.environ["NV_VARIANT_PROVIDER_FORCE_SM_ARCH"].split(".", 1))
        values = [f"{major}{m}_real" for m in range(minor, -1, -1)] + [f"{major}0_virtual"]
        return [VariantFeatureConfig("sm_arch", values, True)]
"""


def test_variantlib_picks_the_nvidia_wheel(tmp_path):
    pytest.importorskip("variantlib")
    links = variant_links(
        tmp_path,
        {
            "sm_80": (BIN / "cubin_abi8_sm80_cuda13.0.cubin").read_bytes(),
            "sm_90": (BIN / "cubin_abi7_sm90a_cuda12.4.cubin").read_bytes(),
        },
    )
    plugin = tmp_path / "plugin" / "nvidia_variant_provider"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text("")
    (plugin / "plugin.py").write_text(NVIDIA_STAND_IN)
    vj = links / "demo_gpu-1.0-variants.json"
    where = str(tmp_path / "plugin")
    assert picked_variants(vj, {"NV_VARIANT_PROVIDER_FORCE_SM_ARCH": "9.0"}, where) == ["90_real"]
    assert picked_variants(vj, {"NV_VARIANT_PROVIDER_FORCE_SM_ARCH": "8.6"}, where) == ["80_real"]
    assert picked_variants(vj, {"NV_VARIANT_PROVIDER_FORCE_SM_ARCH": "7.5"}, where) == []
