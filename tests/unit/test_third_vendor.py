"""A third GPU vendor that exists only in the tests (``tests/thirdvendor``: "acme"), added with
``gpu.vendor.registered`` for a test's length: it plans with its own knobs and the project
profile's vendor-neutral switches, audits nothing (there is no binary reader for its code) and is
refused with one error line, one hint and exit status 1 where a build cannot go on; no module of
the package names it."""

from __future__ import annotations

import json

import pytest

from rocm_build_backend.binary.audit import audit_wheel, verify
from rocm_build_backend.builder.plan import Host, make_plan
from rocm_build_backend.builder.prepare import read_source
from rocm_build_backend.builder.settings import load_settings
from rocm_build_backend.errors import ConfigError, UnknownTargetError
from rocm_build_backend.gpu.build import choose_vendor
from rocm_build_backend.gpu.targets import parse_targets, vendor_name
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.gpu.vendor import registered, vendor_names, vendor_of
from helpers import ACME_ENTRY, ACME_OTHER_KNOBS, ROOT, copy_sample, make_wheel

ACME = ACME_ENTRY
OTHER_KNOBS = ACME_OTHER_KNOBS


@pytest.fixture
def acme():
    with registered(ACME):
        yield


def test_registered_for_the_block_only():
    assert "acme" not in vendor_names()
    with registered(ACME):
        assert vendor_names()[-1] == "acme" and vendor_of("acme2").name == "acme"
        assert build_side("acme").request_variable == "ACME_ARCH"
        with pytest.raises(ValueError, match="already registered"):
            with registered(ACME):
                pass
    assert "acme" not in vendor_names()
    with pytest.raises(KeyError):
        build_side("acme")
    with pytest.raises(UnknownTargetError):
        parse_targets("acme1")


def test_no_file_of_the_package_names_it():
    package = ROOT / "rocm_build_backend"
    named = [
        str(f.relative_to(ROOT))
        for f in package.rglob("*")
        if f.suffix in (".py", ".json") and "acme" in f.read_text(encoding="utf-8").lower()
    ]
    assert named == []


def test_its_targets_parse_and_sort_after_the_others(acme):
    got = parse_targets("acme2;sm_90;acme1;gfx942")
    assert [str(t) for t in got] == ["gfx942", "sm_90", "acme1", "acme2"]
    assert [vendor_name(t) for t in got] == ["amd", "nvidia", "acme", "acme"]
    with pytest.raises(UnknownTargetError, match="takes no ':' features"):
        parse_targets("acme1:xnack+")


def test_the_vendor_setting_and_the_vendor_choice_know_it(acme):
    assert load_settings(None, {"rocm-build-backend.vendor": "acme"}, {}).vendor == "acme"
    assert choose_vendor("auto", parse_targets("acme1"), []) == "acme"
    with pytest.raises(ConfigError, match="vendor = 'acme' but the targets are amd targets"):
        choose_vendor("acme", parse_targets("gfx942"), [])


def test_it_plans_with_its_own_knobs_and_the_neutral_profile_switch(acme):
    settings = load_settings(None, {"rocm-build-backend.targets": "acme2;acme1"}, {})
    plan = make_plan(
        parse_targets("acme2;acme1"),
        "settings",
        settings,
        {},
        backend_kind="setuptools",
        host=Host(cpus=2, mem_available=8 << 30),
        dist_name="causal-conv1d",
    )
    assert plan.vendor == "acme" and plan.profile == "causal-conv1d"
    assert plan.env["ACME_ARCH"] == "acme1,acme2"
    assert plan.env["CAUSAL_CONV1D_FORCE_BUILD"] == "TRUE"  # the project's switch for every vendor
    assert not OTHER_KNOBS & set(plan.env)
    assert "no ACME tool is pinned" in plan.summary()


def test_it_plans_without_enforcement_and_reads_the_projects_switches(acme, tmp_path):
    """ACME has no pinned compilers and no switch words of its own: the plan says it enforces
    nothing, and the project's switches are judged as for any vendor (another vendor's hard-coded
    list is information)."""
    (tmp_path / "setup.py").write_text(
        'import os\nFLAGS = ["-gencode", "arch=compute_80,code=sm_80"]\nON = os.getenv("FORCE_CUDA", "0") == "1"\n'
    )
    findings, extensions = read_source(tmp_path, "setuptools", {})
    settings = load_settings(None, {"rocm-build-backend.targets": "acme1"}, {})
    plan = make_plan(
        parse_targets("acme1"),
        "settings",
        settings,
        {},
        backend_kind="setuptools",
        host=Host(cpus=2, mem_available=8 << 30),
        findings=findings,
        extensions=extensions,
    )
    assert plan.enforce is None and plan.to_json()["enforce"] == {"enabled": False, "how": []}
    assert (
        "enforce: ACME builds have no pinned compilers: the compiler builds the targets the project lists"
        in plan.summary()
    )
    by_name = {s.finding.name: s for s in plan.switches}
    assert (by_name["-gencode"].action, by_name["-gencode"].detail) == ("info", "for NVIDIA builds")
    assert by_name["FORCE_CUDA"].todo == "FORCE_CUDA=1"


def test_plan_command_in_process(acme, tmp_path, monkeypatch, capsys):
    from rocm_build_backend.cli import main

    for var in OTHER_KNOBS | {"ACME_ARCH"}:
        monkeypatch.delenv(var, raising=False)
    project = copy_sample("pure_python", tmp_path)
    assert main(["plan", str(project), "--json", "-C", "rocm-build-backend.targets=acme1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["vendor"] == "acme" and data["targets"] == ["acme1"] and data["env"]["ACME_ARCH"] == "acme1"


def test_the_audit_finds_none_of_its_code(acme, tmp_path):
    hip = (ROOT / "tests" / "data" / "binaries" / "hip_ccob_v2_gfx90a_gfx942_cov5.so").read_bytes()
    amd_wheel = make_wheel(tmp_path / "a", "demo", "1.0", members={"demo/libk.so": hip}, stamp=False)
    report = audit_wheel(amd_wheel)
    assert report.targets and all(vendor_of(t.split(":")[0]).name == "amd" for t in report.targets)
    assert any("no ACME device code; acme1 was requested" in p for p in verify(report, ["acme1"]))
    plain = make_wheel(tmp_path / "b", "demo", "1.0", stamp=False)
    assert verify(audit_wheel(plain), ["acme1"]) == [
        f"wheel {plain.name} holds no GPU device code at all; acme1 was requested"
    ]
