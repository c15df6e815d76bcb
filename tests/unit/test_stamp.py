"""The wheel stamp: the record, local version labels, and rewriting handmade wheels safely (a
damaged or duplicated member refused, nothing written). Real wheels built by pip, checked by the
strict tools and installed: tests/integration/test_stamp_installs.py.
"""

from __future__ import annotations

import json
import os
import re
import zipfile

import pytest

from rocm_build_backend.errors import RocmBuildBackendError, WheelError
from rocm_build_backend.wheel.label import local_version, target_label
from rocm_build_backend.wheel.stamp import read_stamp, rewrite_metadata_dir, rewrite_wheel, stamp_problems
from helpers import handmade_wheel, ROOT, sample_stamp, set_member


SCHEMA = ROOT / "rocm_build_backend" / "data" / "stamp.schema.json"


def test_make_stamp_matches_the_schema_and_the_doc():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    stamp = sample_stamp()
    jsonschema.validate(stamp, schema)
    assert stamp["schema_version"] == 1
    assert stamp["generator"] == {"name": "rocm-build-backend", "version": "0.1.0"}
    assert stamp["requested"] == {"targets": ["gfx90a", "gfx942"], "source": "settings"}
    assert stamp["toolchain"] == {
        "compiler": "hipcc",
        "version": "5.2.21153",
        "hip_version": "5.2.21153",
        "rocm_version": None,
    }
    assert stamp_problems(stamp) == []
    # The example in docs/stamp.md is a valid stamp too.
    doc = (ROOT / "docs" / "stamp.md").read_text()
    example = json.loads(re.search(r"```json\n(.*?)```", doc, re.S).group(1))
    jsonschema.validate(example, schema)
    assert stamp_problems(example) == []


def test_a_file_the_audit_could_not_read_is_stamped_with_its_problems():
    """verify = "warn": a library the audit could not read is listed with what it could not
    read (at most 20 problems), valid under the schema, and read back as such."""
    from rocm_build_backend.wheel.reader import stamp_files

    jsonschema = pytest.importorskip("jsonschema")
    many = [f"problem {i}" for i in range(30)]
    stamp = sample_stamp(
        audit_files={
            "pkg/a.so": {"targets": ["gfx90a"], "complete": ["gfx90a"]},
            "pkg/b.so": {"targets": [], "complete": [], "problems": many},
        }
    )
    jsonschema.validate(stamp, json.loads(SCHEMA.read_text()))
    b = stamp["audit"]["files"]["pkg/b.so"]
    assert b["problems"][:19] == many[:19] and b["problems"][19] == "too many problems: 11 more not listed"
    assert "problems" not in stamp["audit"]["files"]["pkg/a.so"]
    assert stamp["audit"]["complete"] == []
    files, problems = stamp_files(stamp)
    assert problems == [] and files is not None
    assert [f.problems[:1] for f in files] == [(), ("problem 0",)]
    bad = json.loads(json.dumps(stamp))
    bad["audit"]["files"]["pkg/b.so"]["problems"] = "not a list"
    assert stamp_problems(bad) == ["'audit.files' entry 'pkg/b.so' has 'problems' that are not a list of strings"]


def test_make_stamp_audit_union_and_complete():
    stamp = sample_stamp(
        audit_files={
            "b/two.so": {"targets": ["gfx942", "gfx90a"], "complete": ["gfx942"], "containers": 3},
            "a/one.so": {"targets": ["gfx90a", "gfx1100"]},
        }
    )
    files = stamp["audit"]["files"]
    assert list(files) == ["a/one.so", "b/two.so"]
    assert files["a/one.so"] == {"targets": ["gfx90a", "gfx1100"], "complete": ["gfx90a", "gfx1100"]}
    assert files["b/two.so"] == {"targets": ["gfx90a", "gfx942"], "complete": ["gfx942"]}
    assert stamp["audit"]["targets"] == ["gfx90a", "gfx942", "gfx1100"]
    assert stamp["audit"]["complete"] == []  # nothing every file covers completely


def test_make_stamp_without_device_code_and_without_gpus():
    jsonschema = pytest.importorskip("jsonschema")
    stamp = sample_stamp(audit_files={}, host_gpus=[], toolchain={}, source="detected:kfd")
    assert stamp["audit"] == {"targets": [], "complete": [], "files": {}}
    assert stamp["host"] == {"gpus": []}
    assert set(stamp["toolchain"].values()) == {None}
    jsonschema.validate(stamp, json.loads(SCHEMA.read_text()))


def test_make_stamp_is_deterministic():
    assert json.dumps(sample_stamp()) == json.dumps(sample_stamp())
    eight = sample_stamp(host_gpus=["gfx942:sramecc+:xnack-"] * 8)
    assert eight["host"]["gpus"] == ["gfx942:sramecc+:xnack-"]


def test_stamp_records_nothing_else_from_the_environment(monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    text = json.dumps(sample_stamp())
    assert "hunter2" not in text and "/opt/rocm" not in text


@pytest.mark.parametrize(
    "version,targets,expected",
    [
        ("1.0", ["gfx942"], "1.0+gfx942"),
        ("2.5.1+rocm6.2", ["gfx942"], "2.5.1+rocm6.2.gfx942"),
        ("1.0", ["gfx942", "gfx90a"], "1.0+gfx90a.gfx942"),
        ("1.0", "gfx942;gfx90a", "1.0+gfx90a.gfx942"),
        ("1.0", ["gfx90a:xnack-"], "1.0+gfx90a.xnackoff"),
        ("1.0", ["gfx90a:sramecc+:xnack-"], "1.0+gfx90a.srameccon.xnackoff"),
        ("1.0", ["gfx1100", "gfx11-generic", "gfx9-4-generic"], "1.0+gfx94generic.gfx1100.gfx11generic"),
        ("1.0", ["sm_90a", "gfx942"], "1.0+gfx942.sm90a"),
        ("1.0+gfx942", ["gfx942"], "1.0+gfx942"),  # idempotent
        ("2.5.1+rocm6.2.gfx942", ["gfx942"], "2.5.1+rocm6.2.gfx942"),
        ("1.0", [], "1.0"),
        ("1.0.0-RC1", ["gfx942"], "1.0.0rc1+gfx942"),
        ("1!2.0.post1.dev3+Local-Build", ["GFX942"], "1!2.0.post1.dev3+local.build.gfx942"),
    ],
)
def test_local_version(version, targets, expected):
    from packaging.version import Version

    if isinstance(targets, str):
        targets = targets.split(";")
    got = local_version(version, targets)
    assert got == expected
    assert str(Version(got)) == got
    assert re.fullmatch(r"[a-z0-9.]+", Version(got).local or "gfx")


def test_local_version_bad_version_is_an_error_not_a_traceback():
    with pytest.raises(RocmBuildBackendError) as exc:
        local_version("not a version", ["gfx942"])
    assert "not a valid PEP 440 version" in exc.value.message
    assert exc.value.hint


def test_target_label_segments():
    assert target_label("gfx942") == "gfx942"
    assert target_label("gfx906:sramecc-:xnack+") == "gfx906.srameccoff.xnackon"
    assert target_label("compute_90") == "compute90"


def test_prepared_metadata_errors(tmp_path):
    with pytest.raises(WheelError, match="exactly one .dist-info"):
        rewrite_metadata_dir(tmp_path, "1.0+gfx942")
    broken = tmp_path / "x-1.0.dist-info"
    broken.mkdir()
    (broken / "METADATA").write_text("Metadata-Version: 2.1\nName: x\n\nVersion: in the body\n")
    with pytest.raises(WheelError, match="no 'Version:' field"):
        rewrite_metadata_dir(tmp_path, "1.0+gfx942")


def test_not_a_wheel(tmp_path):
    fake = tmp_path / "fake-1.0-py3-none-any.whl"
    fake.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(WheelError, match="not a readable zip"):
        read_stamp(fake)
    with pytest.raises(WheelError, match="not a readable zip"):
        rewrite_wheel(fake, stamp=sample_stamp())
    assert fake.read_bytes() == b"PK\x03\x04 truncated"
    with pytest.raises(WheelError, match="no such wheel"):
        read_stamp(tmp_path / "missing-1.0-py3-none-any.whl")
    bad_name = tmp_path / "not_a_wheel_name.whl"
    bad_name.write_bytes(b"")
    with pytest.raises(WheelError, match="not a valid wheel file name"):
        rewrite_wheel(bad_name, stamp=None)


PAYLOAD = bytes(range(256)) * 4000 + os.urandom(300_000)


@pytest.mark.parametrize("member", ["hand/_k.so", "hand/stored.bin"])
def test_a_damaged_member_is_refused(tmp_path, member):
    wheel = handmade_wheel(tmp_path, PAYLOAD)
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo(member)
    data = bytearray(wheel.read_bytes())
    name_len, extra_len = (
        int.from_bytes(data[info.header_offset + 26 : info.header_offset + 28], "little"),
        int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little"),
    )
    start = info.header_offset + 30 + name_len + extra_len
    data[start + info.compress_size // 2] ^= 0xFF
    wheel.write_bytes(bytes(data))
    with pytest.raises(WheelError) as exc:
        rewrite_wheel(wheel, stamp=sample_stamp(), new_version="1.0+gfx942")
    assert member in exc.value.message and "damaged" in exc.value.message
    assert wheel.read_bytes() == bytes(data)
    assert sorted(p.name for p in tmp_path.iterdir()) == [wheel.name]


def test_duplicate_members_are_refused(tmp_path):
    wheel = handmade_wheel(tmp_path, b"x" * 100)
    with pytest.warns(UserWarning, match="Duplicate name"):
        set_member(wheel, "hand/_k.so", b"other")
    original = wheel.read_bytes()
    with pytest.raises(WheelError, match="duplicate members: hand/_k.so"):
        rewrite_wheel(wheel, stamp=sample_stamp())
    assert wheel.read_bytes() == original


def test_make_stamp_records_the_switches_the_build_applied():
    jsonschema = pytest.importorskip("jsonschema")
    from rocm_build_backend.wheel.stamp import make_stamp

    given = [{"file": "CMakeLists.txt", "line": 6, "name": "USE_CUDA", "given": "-C cmake.define.USE_CUDA=ON"}]
    stamp = make_stamp(
        requested=["sm_90"],
        source="settings",
        audit_files={},
        host_gpus=[],
        toolchain={},
        version="0.1.0",
        switches=given,
    )
    jsonschema.validate(stamp, json.loads(SCHEMA.read_text()))
    assert stamp["switches"] == given and stamp_problems(stamp) == []
    none = make_stamp(
        requested=["sm_90"], source="settings", audit_files={}, host_gpus=[], toolchain={}, version="0.1.0"
    )
    assert "switches" not in none
