"""Target parsing, list forms, validation and suggestions: table-driven."""

import pytest

from rocm_build_backend.errors import UnknownTargetError
from rocm_build_backend.gpu.targets import (
    GpuTarget,
    join_targets,
    parse_target,
    parse_targets,
    sort_targets,
    split_targets,
    suggest,
    table,
    target_info,
    vendor_name,
)
from rocm_build_backend.gpu.amd.names import kfd_to_processor
from helpers import ROOT


@pytest.mark.parametrize(
    "text, expected",
    [
        ("gfx942", "gfx942"),
        ("GFX942", "gfx942"),
        ("gfx90a:xnack-", "gfx90a:xnack-"),
        ("gfx90a:xnack-:sramecc+", "gfx90a:sramecc+:xnack-"),  # canonical order
        ("gfx90a:sramecc+:xnack-", "gfx90a:sramecc+:xnack-"),
        ("gfx11-generic", "gfx11-generic"),
        ("gfx9-4-generic", "gfx9-4-generic"),
        (" gfx1201 ", "gfx1201"),
        ("sm_90a", "sm_90a"),
        ("compute_90", "compute_90"),
    ],
)
def test_parse_target(text, expected):
    assert str(parse_target(text)) == expected


@pytest.mark.parametrize(
    "text, words",
    [
        ("gfx924", ["unknown GPU target 'gfx924'", "'gfx942'"]),
        ("gfx9422", ["'gfx942'"]),
        ("gfx1100:xnack+", ["has no 'xnack' feature"]),
        ("gfx90a:xnack", ["bad feature 'xnack'"]),
        ("gfx90a:xnack+:xnack-", ["given twice"]),
        ("nvidia", ["unknown GPU target 'nvidia'"]),
        ("sm_91", ["unknown GPU target 'sm_91'"]),
    ],
)
def test_parse_target_errors(text, words):
    with pytest.raises(UnknownTargetError) as exc:
        parse_target(text)
    for word in words:
        assert word in exc.value.message
    assert "rocm-build-backend targets" in exc.value.hint


def test_suggest_prefers_swapped_digits():
    assert suggest("gfx924")[0] == "gfx942"
    assert suggest("gfx90A".lower())[0] == "gfx90a"
    assert suggest("gfx1110")[0] in {"gfx1100", "gfx1101", "gfx1150", "gfx1151"}
    assert suggest("completely-wrong") == []


@pytest.mark.parametrize(
    "value",
    [
        "gfx90a;gfx942",
        "gfx90a,gfx942",
        "gfx90a gfx942",
        " gfx942 ; gfx90a ",
        ["gfx942", "gfx90a"],
        "gfx942;gfx90a;gfx942",
        ["gfx90a;gfx942"],
    ],
)
def test_list_forms(value):
    assert join_targets(parse_targets(value)) == "gfx90a;gfx942"


def test_every_bad_entry_reported_together():
    with pytest.raises(UnknownTargetError) as exc:
        parse_targets("gfx924;gfx90a;gfx1100:xnack+;foo")
    msg = exc.value.message
    assert "gfx924" in msg and "gfx1100" in msg and "foo" in msg and "gfx90a'" not in msg


def test_stable_order_numeric_not_lexical():
    got = join_targets(parse_targets("gfx1100 gfx942 gfx90a gfx908 gfx11-generic gfx9-4-generic gfx1030"))
    assert got == "gfx908;gfx90a;gfx942;gfx9-4-generic;gfx1030;gfx1100;gfx11-generic"


@pytest.mark.parametrize(
    "value, name",
    [
        (90006, "gfx906"),
        (90008, "gfx908"),
        (90010, "gfx90a"),
        (90012, "gfx90c"),
        (90402, "gfx942"),
        (100302, "gfx1032"),
        (110001, "gfx1101"),
        (110501, "gfx1151"),
        (120001, "gfx1201"),
        (0, None),
    ],
)
def test_kfd_decoding(value, name):
    assert kfd_to_processor(value) == name


def test_table_rows_match_kfd_and_names():
    """Every AMD row with a KFD number decodes back to its own name."""
    for name, row in table().items():
        if row.get("vendor") == "amd" and row.get("kfd"):
            assert kfd_to_processor(row["kfd"]) == name, name


def test_target_properties():
    t = parse_target("gfx90a:sramecc+:xnack-")
    assert t.bare == GpuTarget("gfx90a") and vendor_name(t) == "amd" and not t.is_generic
    assert target_info(t)["kind"] == "dgpu"
    assert target_info(parse_target("gfx1036"))["kind"] == "apu"
    assert vendor_name(parse_target("sm_90a")) == "nvidia"
    assert split_targets(["a;b", "c d"]) == ["a", "b", "c", "d"]


@pytest.mark.parametrize("extra", [[], ["--all"]])
def test_targets_json_meets_its_schema(extra):
    import json
    import os
    import subprocess
    import sys

    from rocm_build_backend.data import path

    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(path("schemas/targets.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    repo = ROOT
    proc = subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", "targets", "--json", *extra],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(proc.stdout)
    assert list(data)[0] == "schema_version"
    jsonschema.validate(data, schema)
    names = [row["name"] for row in data["targets"]]
    assert len(names) == len(set(names)) and "gfx942" in names
    assert ("sm_90" in names) == bool(extra)
    assert names.index("gfx908") < names.index("gfx90a") < names.index("gfx942") < names.index("gfx1030")


def test_every_target_in_the_table_belongs_to_the_vendor_its_row_names():
    from rocm_build_backend.gpu.vendor import claimant, vendor_named

    for name, row in table().items():
        found = claimant(name)
        assert found is not None and found.name == row["vendor"], name
        assert vendor_named(row["vendor"]) is found
        assert vendor_name(GpuTarget(name)) == row["vendor"] and target_info(GpuTarget(name)) == row


def test_sort_order_puts_vendors_in_registry_order_and_unknown_names_last():
    got = [
        str(t)
        for t in sort_targets(
            [GpuTarget("zz9"), GpuTarget("sm_90"), GpuTarget("gfx942"), GpuTarget("compute_90"), GpuTarget("gfx90a")]
        )
    ]
    assert got == ["gfx90a", "gfx942", "sm_90", "compute_90", "zz9"]


def test_compat_asks_the_vendor_of_the_code():
    from rocm_build_backend.gpu.compat import why_not

    assert why_not("gfx90a", "sm_90") == "gfx90a is amd code, the device is nvidia"
    assert why_not("gfx90a:xnack+", "gfx90a:xnack-") == "gfx90a:xnack+ needs xnack+, the device runs xnack-"
    assert why_not("sm_80", "sm_90") == "sm_80 loads on sm_8x devices from sm_80 on"
    assert why_not("compute_80", "sm_90") is None


def test_the_earlier_detection_import_path_still_works():
    from rocm_build_backend.gpu import detect as neutral
    from rocm_build_backend.gpu.amd import detect as earlier

    for name in earlier.__all__:
        assert getattr(earlier, name) is not None
    assert earlier.detect is neutral.detect and earlier.Detection is neutral.Detection
