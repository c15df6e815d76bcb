"""``check``: will each wheel's device code load on these GPUs? Stamps, audits, the loader's rules.

Wheels are written here by hand (a .dist-info with METADATA, WHEEL, a real RECORD and a stamp
per docs/stamp.md); a few carry real device code from tests/data/index/ (README.md there says
how each binary was built).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.cli import render
from rocm_build_backend.wheel.check import wheels as C
from rocm_build_backend.errors import WheelError
from rocm_build_backend.gpu.targets import GpuTarget, parse_target
import helpers
from helpers import stamp_for, TESTS

BIN = TESTS / "data" / "index"


# --------------------------------------------------------------------------- wheels by hand


def make_wheel(*args, **kw):
    kw.setdefault("placeholder", b"\x7fELF not really a library")  # looks like a library, is not
    return helpers.make_wheel(*args, **kw)


# --------------------------------------------------------------------------- the loader's rules


CASES = [
    # (stamp: member -> targets or (targets, complete), device, generic_ok, expected, reason part)
    ({"p/k.so": ["gfx90a"]}, "gfx90a:sramecc+:xnack-", True, "ok", None),
    ({"p/k.so": ["gfx90a", "gfx942"]}, "gfx942:sramecc+:xnack-", True, "ok", None),
    ({"p/k.so": ["gfx90a"]}, "gfx942", True, "fails", "has code for gfx90a, not for gfx942"),
    ({"p/k.so": ["gfx90a"]}, "gfx940", True, "fails", "not for gfx940"),
    ({"p/k.so": ["gfx90a:xnack+"]}, "gfx90a:sramecc+:xnack-", True, "fails", "needs xnack+, the device runs xnack-"),
    ({"p/k.so": ["gfx90a:xnack+"]}, "gfx90a:xnack+", True, "ok", None),
    ({"p/k.so": ["gfx90a:xnack-", "gfx90a:xnack+"]}, "gfx90a:sramecc-:xnack+", True, "ok", None),
    ({"p/k.so": ["gfx906:sramecc+:xnack-"]}, "gfx906:sramecc-:xnack-", True, "fails", "needs sramecc+"),
    ({"p/k.so": ["gfx11-generic"]}, "gfx1101", True, "ok", None),
    ({"p/k.so": ["gfx11-generic"]}, "gfx1101", False, "fails", "ROCm 6.4"),
    ({"p/k.so": ["gfx11-generic"]}, "gfx1101", None, "unknown", "ROCm 6.4 or newer"),
    ({"p/k.so": ["gfx11-generic", "gfx1101"]}, "gfx1101", False, "ok", None),
    ({"p/k.so": ["gfx9-generic"]}, "gfx1100", True, "fails", "not for gfx1100"),
    # every file must have code for the device
    ({"p/a.so": ["gfx90a", "gfx942"], "p/b.so": ["gfx942"]}, "gfx90a", True, "fails", "p/b.so"),
    ({"p/a.so": ["gfx90a", "gfx942"], "p/b.so": ["gfx942"]}, "gfx942", True, "ok", None),
    # a file whose containers disagree: gfx908 lacks some kernels
    ({"p/k.so": (["gfx908", "gfx90a"], ["gfx90a"])}, "gfx908", True, "fails", "not for gfx908"),
    ({"p/k.so": (["gfx908", "gfx90a"], [])}, "gfx90a", True, "fails", "no target has code for all of its kernels"),
    # NVIDIA code on an AMD device, and NVIDIA's own rules
    ({"p/k.so": ["sm_80"]}, "gfx90a", True, "fails", "not for gfx90a"),
    ({"p/k.so": ["sm_80"]}, "sm_86", True, "ok", None),
    # no device code: loads everywhere
    ({}, "gfx1201", True, "ok", None),
]


@pytest.mark.parametrize("device_files, device, generic_ok, expected, reason", CASES)
def test_verdicts(tmp_path, device_files, device, generic_ok, expected, reason):
    wheel = make_wheel(tmp_path, "pkg", "1.0", device=device_files)
    report = C.check_wheels([wheel], [parse_target(device)], generic_ok=generic_ok, audit=False)
    (w,) = report.wheels
    assert w.status == expected, w.verdicts
    assert w.verdicts[0].status == expected
    if reason:
        assert reason in w.verdicts[0].reason
    assert report.exit_code == {"ok": 0, "fails": 1, "unknown": 3}[expected]
    assert w.facts.source == "stamp"


def test_every_device_must_load(tmp_path):
    wheel = make_wheel(tmp_path, "pkg", "1.0", device={"p/k.so": ["gfx90a", "gfx1100"]})
    devices = [GpuTarget("gfx1100"), GpuTarget("gfx1036")]
    report = C.check_wheels([wheel], devices, audit=False)
    assert [v.status for v in report.wheels[0].verdicts] == ["ok", "fails"]
    assert report.wheels[0].status == "fails"
    text = render.check(report)
    assert "gfx1036: p/k.so has code for gfx90a, gfx1100, not for gfx1036" in text


def test_exit_codes_over_several_wheels(tmp_path):
    good = make_wheel(tmp_path / "a", "good", "1.0", device={"g/k.so": ["gfx942"]})
    bad = make_wheel(tmp_path / "b", "bad", "1.0", device={"b/k.so": ["gfx90a"]})
    unreadable = tmp_path / "broken-1.0-py3-none-any.whl"
    unreadable.write_bytes(b"this is not a zip file")
    dev = [GpuTarget("gfx942")]
    assert C.check_wheels([good], dev, audit=False).exit_code == 0
    assert C.check_wheels([good, bad], dev, audit=False).exit_code == 1
    assert C.check_wheels([good, unreadable], dev, audit=False).exit_code == 3
    # one that fails outweighs one that cannot tell
    report = C.check_wheels([good, bad, unreadable], dev, audit=False)
    assert report.exit_code == 1
    assert [w.status for w in report.wheels] == ["ok", "fails", "unknown"]
    assert "not a readable wheel" in report.wheels[2].problems[0]


def test_missing_file_is_unknown_not_a_crash(tmp_path):
    report = C.check_wheels([tmp_path / "nope-1.0-py3-none-any.whl"], [GpuTarget("gfx90a")])
    assert report.exit_code == 3
    assert "no such file" in render.check(report)
    with pytest.raises(WheelError):
        C.wheel_targets(tmp_path / "nope-1.0-py3-none-any.whl")


def test_no_devices(tmp_path):
    gpu = make_wheel(tmp_path, "gpu", "1.0", device={"g/k.so": ["gfx90a"]})
    pure = make_wheel(tmp_path, "pure", "1.0", device={})
    report = C.check_wheels([gpu, pure], [], audit=False)
    assert [w.status for w in report.wheels] == ["unknown", "ok"]
    assert report.exit_code == 3
    assert "devices: none found" in render.check(report)


def test_foreign_wheel_without_binaries_is_pure(tmp_path):
    wheel = make_wheel(tmp_path, "plain", "2.0", stamp=False)
    facts = C.wheel_targets(wheel)
    assert facts.known and not facts.stamped and not facts.has_device_code
    assert C.check_wheels([wheel], [GpuTarget("gfx90a")]).exit_code == 0


def test_corrupt_stamp(tmp_path):
    wheel = make_wheel(tmp_path, "pkg", "1.0", device={"p/k.so": ["gfx90a"]}, stamp=b"{not json")
    facts = C.wheel_targets(wheel, audit=False)
    assert not facts.stamped
    assert any("not valid JSON" in p for p in facts.problems)
    # without a usable stamp the binaries decide; these dummy bytes hold no device code
    report = C.check_wheels([wheel], [GpuTarget("gfx90a")])
    assert "not valid JSON" in render.check(report)


def test_stamp_with_wrong_shape_and_newer_schema(tmp_path):
    shape = make_wheel(tmp_path / "a", "pkg", "1.0", device={"p/k.so": ["gfx90a"]}, stamp={"schema_version": 1})
    facts = C.wheel_targets(shape, audit=False)
    assert not facts.stamped and any("not valid" in p for p in facts.problems)
    newer = stamp_for({"p/k.so": ["gfx90a"]})
    newer["schema_version"] = 7
    wheel = make_wheel(tmp_path / "b", "pkg", "1.0", device={"p/k.so": ["gfx90a"]}, stamp=newer)
    facts = C.wheel_targets(wheel, audit=False)
    assert facts.stamped and any("newer" in p for p in facts.problems)
    assert facts.targets == ["gfx90a"]


def test_json_and_text(tmp_path):
    wheel = make_wheel(tmp_path, "pkg", "1.0", device={"p/k.so": ["gfx90a:xnack+"]})
    report = C.check_wheels([wheel], ["gfx90a:sramecc+:xnack-"], audit=False, notes=["a note"])
    doc = report.to_json()
    assert doc["exit_code"] == 1
    assert doc["notes"] == ["a note"]
    (w,) = doc["wheels"]
    assert w["status"] == "fails" and w["name"] == "pkg" and w["version"] == "1.0"
    assert w["files"] == {"p/k.so": {"targets": ["gfx90a:xnack+"], "complete": ["gfx90a:xnack+"]}}
    assert w["devices"][0]["device"] == "gfx90a:sramecc+:xnack-"
    assert "xnack+" in w["devices"][0]["reason"]
    text = render.check(report)
    assert text.splitlines()[0] == "devices: gfx90a:sramecc+:xnack-"
    assert "note: a note" in text and "fails" in text


def test_unpacked_wheel_directory(tmp_path):
    wheel = make_wheel(tmp_path, "pkg", "1.0", device={"p/k.so": ["gfx942"]})
    out = tmp_path / "unpacked"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(out)
    facts = C.wheel_targets(out, audit=False)
    assert (facts.name, facts.version, facts.targets) == ("pkg", "1.0", ["gfx942"])
    assert facts.verdict("gfx90a")[0] == "fails"


def test_rocm_version_and_generic():
    assert C.generic_ok_for("6.4.0") is True
    assert C.generic_ok_for("7.0") is True
    assert C.generic_ok_for("6.3.3") is False
    assert C.generic_ok_for("5.2.21153") is False
    assert C.generic_ok_for(None) is None


def test_host_rocm_version(tmp_path):
    root = tmp_path / "root"
    (root / "opt/rocm/.info").mkdir(parents=True)
    (root / "opt/rocm/.info/version").write_text("6.4.1-120\n")
    assert C.host_rocm_version(root=root, env={}) == "6.4.1"
    assert C.host_rocm_version(root=tmp_path / "empty", env={}) is None


# --------------------------------------------------------------------------- detection feeds check


def kfd_root(tmp_path: Path, versions: list[int]) -> Path:
    nodes = tmp_path / "root/sys/class/kfd/kfd/topology/nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0/properties").write_text("cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n")
    for i, v in enumerate(versions, 1):
        (nodes / str(i)).mkdir()
        (nodes / str(i) / "properties").write_text(
            f"cpu_cores_count 0\nsimd_count 240\nsimd_per_cu 2\ngfx_target_version {v}\n"
        )
    return tmp_path / "root"


def test_override_reported_by_detection(tmp_path):
    from rocm_build_backend.gpu.amd.detect import detect

    root = kfd_root(tmp_path, [110001])  # a gfx1101 ...
    wheel = make_wheel(tmp_path, "pkg", "1.0", device={"p/k.so": ["gfx1100"]})
    plain = detect(root=root, env={}, recorded={})
    devices, notes = C.devices_from_detection(plain)
    assert [str(d) for d in devices] == ["gfx1101"]
    assert C.check_wheels([wheel], devices, notes=notes, audit=False).exit_code == 1
    # ... that the runtime treats as a gfx1100
    over = detect(root=root, env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}, recorded={})
    devices, notes = C.devices_from_detection(over)
    assert [str(d) for d in devices] == ["gfx1100"]
    report = C.check_wheels([wheel], devices, notes=notes, audit=False)
    assert report.exit_code == 0
    assert "HSA_OVERRIDE_GFX_VERSION" in render.check(report)


def test_detection_with_full_target_ids(tmp_path):
    from rocm_build_backend.gpu.amd.detect import detect

    root = kfd_root(tmp_path, [90010])
    devices, _ = C.devices_from_detection(detect(root=root, env={}, recorded={}))
    assert [d.processor for d in devices] == ["gfx90a"]
    wheel = make_wheel(tmp_path, "pkg", "1.0", device={"p/k.so": ["gfx90a"]})
    assert C.check_wheels([wheel], devices, audit=False).exit_code == 0


# --------------------------------------------------------------------------- stamps against binaries


def test_unstamped_wheel_is_audited(tmp_path):
    so = (BIN / "hip_gfx90a_gfx942_cov5.so").read_bytes()
    wheel = make_wheel(tmp_path, "pkg", "1.0", members={"pkg/_k.so": so}, stamp=False)
    facts = C.wheel_targets(wheel)
    assert facts.source == "binaries"
    assert facts.targets == ["gfx90a", "gfx942"]
    report = C.check_wheels([wheel], [GpuTarget("gfx942"), GpuTarget("gfx1100")])
    assert [v.status for v in report.wheels[0].verdicts] == ["ok", "fails"]


def test_stamp_that_disagrees_with_the_binaries(tmp_path):
    so = (BIN / "hip_gfx90a_gfx942_cov5.so").read_bytes()
    lying = stamp_for({"pkg/_k.so": ["gfx1100"]})
    wheel = make_wheel(tmp_path, "pkg", "1.0", members={"pkg/_k.so": so}, stamp=lying)
    facts = C.wheel_targets(wheel)
    assert facts.source == "stamp+binaries"
    assert facts.mismatch and "gfx1100" in facts.mismatch[0] and "gfx942" in facts.mismatch[0]
    report = C.check_wheels([wheel], [GpuTarget("gfx942")])
    assert report.exit_code == 0  # the binaries decide
    assert "the stamp disagrees with the binaries" in render.check(report)
    assert report.to_json()["wheels"][0]["stamp_mismatch"]
    # a file the stamp does not list at all
    extra = make_wheel(tmp_path / "x", "pkg", "1.0", members={"pkg/_k.so": so}, stamp=stamp_for({}))
    assert "does not list" in C.wheel_targets(extra).mismatch[0]


def test_two_translation_units_and_features(tmp_path):
    two = (BIN / "hip_two_tu_cov4.so").read_bytes()
    xnack = (BIN / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes()
    wheel = make_wheel(tmp_path, "pkg", "1.0", members={"pkg/a.so": two, "pkg/k.co": xnack}, stamp=False)
    facts = C.wheel_targets(wheel)
    by_path = {f.path: f for f in facts.files}
    assert set(by_path["pkg/a.so"].complete) == {"gfx90a"}
    dev = [GpuTarget("gfx908"), parse_target("gfx90a:xnack-"), parse_target("gfx90a:xnack+")]
    statuses = [v.status for v in C.check_wheels([wheel], dev).wheels[0].verdicts]
    assert statuses == ["fails", "fails", "ok"]


def test_truncated_binary_cannot_tell(tmp_path):
    cut = (BIN / "trunc_hip_gfx90a_gfx940_cov4.so").read_bytes()
    wheel = make_wheel(tmp_path, "pkg", "1.0", members={"pkg/_k.so": cut}, stamp=False)
    # code for gfx90a was found, but cut off; other code may be missing from the list
    for device in ("gfx90a", "gfx1100"):
        report = C.check_wheels([wheel], [GpuTarget(device)])
        assert report.wheels[0].status == "unknown"
        assert report.exit_code == 3
        assert "could not be read completely: truncated" in render.check(report)
