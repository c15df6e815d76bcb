"""``thin`` and ``split`` on whole wheels made from the real binary fixtures: the output's
members, RECORD and stamp, and every bad input as one clear line with its exit code and
nothing written. pip installing a split wheel: tests/integration/test_thin_installs.py.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.wheel.stamp import read_stamp, stamp_problems
from helpers import fat_wheel, make_wheel, run_main, stamp_for, TESTS, zip_members

DATA = TESTS / "data" / "binaries"


def test_thin_writes_a_wheel_with_only_the_kept_code(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    code, out, err = run_main(capsys, "thin", src, "--targets", "gfx942", "--outdir", tmp_path / "out")
    assert code == 0, err
    dst = tmp_path / "out" / src.name
    got = zip_members(dst)
    assert "pkg/kernels/gfx90a.co" not in got
    assert got["pkg/kernels/gfx942.hsaco"] == (DATA / "amdgpu_gfx942_cov5.hsaco").read_bytes()
    assert got["pkg/_host.py"] == b"print('host code')\n"
    assert len(got["pkg/_hip.so"]) < len((DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes())  # compacted
    from rocm_build_backend.binary.audit import audit_wheel

    report = audit_wheel(dst)
    assert report.ok and report.targets == ["gfx942"]
    assert "gfx90a" in out and "gfx942" in out


def test_keep_layout_keeps_each_library_s_size(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    code, out, err = run_main(
        capsys, "thin", src, "--targets", "gfx942", "--outdir", tmp_path / "out", "--keep-layout", "--json"
    )
    assert code == 0, err
    got = zip_members(tmp_path / "out" / src.name)
    assert len(got["pkg/_hip.so"]) == len((DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes())
    lib = next(f for f in json.loads(out)["files"] if f["path"] == "pkg/_hip.so")
    assert lib["layout"] == "in place" and lib["size_after"] == lib["size_before"]


def test_record_is_rebuilt_from_the_bytes_written(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    assert run_main(capsys, "thin", src, "--targets", "gfx90a", "--outdir", tmp_path / "out")[0] == 0
    got = zip_members(tmp_path / "out" / src.name)
    rows = list(csv.reader(io.StringIO(got["pkg-1.0.dist-info/RECORD"].decode())))
    listed = {r[0] for r in rows}
    assert listed == set(got)
    for name, digest, size in rows:
        if name.endswith("RECORD"):
            assert digest == size == ""
            continue
        want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(got[name]).digest()).rstrip(b"=").decode()
        assert (digest, int(size)) == (want, len(got[name]))


def test_the_stamp_names_the_targets_and_where_the_wheel_came_from(tmp_path, capsys):
    old = stamp_for({"pkg/_hip.so": ["gfx90a", "gfx942"]})
    src = fat_wheel(tmp_path / "in", stamp=old)
    assert run_main(capsys, "thin", src, "--targets", "gfx942", "--outdir", tmp_path / "out")[0] == 0
    stamp = read_stamp(tmp_path / "out" / src.name)
    assert stamp is not None and stamp_problems(stamp) == []
    assert stamp["requested"] == {"targets": ["gfx942"], "source": "thin"}
    assert stamp["audit"]["targets"] == ["gfx942"]
    assert stamp["toolchain"]["compiler"] == "hipcc"  # kept from the build's stamp
    src_sha = hashlib.sha256(src.read_bytes()).hexdigest()
    assert stamp["thinned_from"] == {
        "wheel": src.name,
        "sha256": src_sha,
        "targets": ["gfx90a", "gfx90a:xnack+", "gfx942"],
    }


def test_a_wheel_without_a_stamp_gets_one(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    assert run_main(capsys, "thin", src, "--targets", "gfx90a", "--outdir", tmp_path / "out")[0] == 0
    stamp = read_stamp(tmp_path / "out" / src.name)
    assert stamp["audit"]["files"]["pkg/kernels/gfx90a.co"]["targets"] == ["gfx90a:xnack+"]
    assert "pkg/kernels/gfx942.hsaco" not in stamp["audit"]["files"]


def test_split_per_target_labels_each_wheel(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    code, out, err = run_main(capsys, "split", src, "--outdir", tmp_path / "out", "--json")
    assert code == 0, err
    doc = json.loads(out)
    names = sorted(Path(w["output"]).name for w in doc["wheels"])
    assert names == ["pkg-1.0+gfx90a-py3-none-any.whl", "pkg-1.0+gfx942-py3-none-any.whl"]
    got = zip_members(tmp_path / "out" / "pkg-1.0+gfx942-py3-none-any.whl")
    assert "pkg-1.0+gfx942.dist-info/METADATA" in got
    assert b"Version: 1.0+gfx942" in got["pkg-1.0+gfx942.dist-info/METADATA"]


def test_split_per_family_groups_amd_targets(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    code, out, _err = run_main(capsys, "split", src, "--per", "family", "--outdir", tmp_path / "out", "--json")
    assert code == 0
    units = {w["unit"]: w["targets"] for w in json.loads(out)["wheels"]}
    assert units == {"gfx90X-dcgpu": ["gfx90a"], "gfx94X-dcgpu": ["gfx942"]}


def test_split_output_is_ready_for_index(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    assert run_main(capsys, "split", src, "--outdir", tmp_path / "wheels")[0] == 0
    code, _out, err = run_main(capsys, "index", tmp_path / "wheels", "-o", tmp_path / "idx")
    assert code == 0, err
    page = (tmp_path / "idx" / "gfx942" / "simple" / "pkg" / "index.html").read_text()
    assert "1.0%2Bgfx942" in page or "1.0+gfx942" in page
    assert "gfx90a-py3" not in page


def _bad(capsys, tmp_path, src, target, code, words):
    out_dir = tmp_path / "out"
    got, out, err = run_main(capsys, "thin", src, "--targets", target, "--outdir", out_dir)
    assert got == code, err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ") and all(w in lines[0] for w in words), err
    assert len(lines) <= 2 and "Traceback" not in err
    assert not out_dir.exists()


def test_no_device_code_is_an_input_error(tmp_path, capsys):
    src = make_wheel(tmp_path / "in", "pure", "1.0", stamp=False)
    _bad(capsys, tmp_path, src, "gfx942", 2, ["no GPU device code"])


def test_a_target_without_code_names_what_the_wheel_has(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    _bad(capsys, tmp_path, src, "gfx1100", 1, ["gfx90a", "gfx942", "gfx1100"])


def test_a_damaged_bundle_is_named(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in", members={"pkg/_bad.so": (DATA / "bad_hip_entry_offset.so").read_bytes()})
    _bad(capsys, tmp_path, src, "gfx942", 3, ["pkg/_bad.so"])


@pytest.mark.parametrize("sig", ["RECORD.jws", "RECORD.p7s"])
def test_a_signed_wheel_is_refused(tmp_path, capsys, sig):
    src = fat_wheel(tmp_path / "in", members={f"pkg-1.0.dist-info/{sig}": b"signature"})
    _bad(capsys, tmp_path, src, "gfx942", 2, ["signed", sig])


def test_not_a_zip(tmp_path, capsys):
    src = tmp_path / "pkg-1.0-py3-none-any.whl"
    src.write_bytes(b"not a zip")
    _bad(capsys, tmp_path, src, "gfx942", 3, ["not a readable zip"])


def test_a_wheel_without_record(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    bare = tmp_path / "bare" / src.name
    bare.parent.mkdir()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(bare, "w") as zout:
        for info in zin.infolist():
            if not info.filename.endswith("RECORD"):
                zout.writestr(info, zin.read(info))
    _bad(capsys, tmp_path, bare, "gfx942", 2, ["RECORD"])


def test_an_unknown_target_is_a_usage_error(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    from rocm_build_backend.errors import UnknownTargetError

    got, _out, err = run_main(capsys, "thin", src, "--targets", "gfx9422", "--outdir", tmp_path / "out")
    assert got == UnknownTargetError.exit_code and "gfx942" in err and not (tmp_path / "out").exists()


def test_the_source_is_never_replaced(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    before = src.read_bytes()
    got, _out, err = run_main(capsys, "thin", src, "--targets", "gfx942", "--outdir", src.parent)
    assert got == 2 and "replace its source" in err
    assert src.read_bytes() == before


def test_json_outputs_match_their_schemas(tmp_path, capsys):
    import jsonschema

    from rocm_build_backend.data import path as data_path

    src = fat_wheel(
        tmp_path / "in",
        members={
            "pkg/_odd.o": (DATA / "hip_newdriver_rdc_gfx90a_gfx942.o").read_bytes(),
            "pkg/_cuda.so": (DATA / "cuda_sm75_80_90_ptx90.so").read_bytes(),
        },
    )
    for verb, args in (("thin", ["--targets", "sm_90"]), ("split", ["--per", "family"])):
        code, out, err = run_main(capsys, verb, src, *args, "--outdir", tmp_path / verb, "--json")
        doc = json.loads(out)
        assert code == doc["exit_code"] == 1, err  # pkg/_odd.o is kept whole: written, not what was asked
        assert list(doc)[0] == "schema_version"
        schema = json.loads(data_path(f"schemas/{verb}.schema.json").read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
        if verb == "thin":
            odd = [f for f in doc["files"] if f["path"] == "pkg/_odd.o"][0]
            assert odd["action"] == "kept-whole" and "LLVM" in odd["reason"]


def test_members_stored_or_compressed_otherwise_are_thinned_and_copied(tmp_path, capsys):
    src = tmp_path / "in" / "pkg-1.0-py3-none-any.whl"
    plain = fat_wheel(tmp_path / "plain")
    src.parent.mkdir()
    kinds = {"pkg/_hip.so": zipfile.ZIP_BZIP2, "pkg/_ccob.so": zipfile.ZIP_STORED, "pkg/_host.py": zipfile.ZIP_LZMA}
    with zipfile.ZipFile(plain) as zin, zipfile.ZipFile(src, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info), compress_type=kinds.get(info.filename, zipfile.ZIP_DEFLATED))
    code, _out, err = run_main(capsys, "thin", src, "--targets", "gfx942", "--outdir", tmp_path / "out")
    assert code == 0, err
    got = zip_members(tmp_path / "out" / src.name)
    assert got["pkg/_host.py"] == b"print('host code')\n"
    from rocm_build_backend.binary.audit import audit_bytes

    for name in ("pkg/_hip.so", "pkg/_ccob.so"):
        assert audit_bytes(got[name], name).targets == ["gfx942"]


def test_a_damaged_member_is_refused(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    data = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as zf:
        info = zf.getinfo("pkg/_hip.so")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + 100 : start + 140] = bytes(40)  # garbage inside its deflate stream
    src.write_bytes(bytes(data))
    _bad(capsys, tmp_path, src, "gfx942", 3, ["pkg/_hip.so"])


def test_members_over_the_memory_cap_go_through_a_mapped_file(tmp_path, capsys, monkeypatch):
    from rocm_build_backend.wheel.thin import stream as thin_zip

    src = fat_wheel(tmp_path / "in")
    assert run_main(capsys, "thin", src, "--targets", "gfx942", "--outdir", tmp_path / "mem")[0] == 0
    monkeypatch.setattr(thin_zip, "MEMORY_CAP", 1024)
    assert run_main(capsys, "thin", src, "--targets", "gfx942", "--outdir", tmp_path / "map")[0] == 0
    assert zip_members(tmp_path / "mem" / src.name) == zip_members(tmp_path / "map" / src.name)
    assert [p.name for p in (tmp_path / "map").iterdir()] == [src.name]  # no temporary file left


def test_sizes_count_every_member(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    code, out, _err = run_main(capsys, "thin", src, "--targets", "gfx942", "--outdir", tmp_path / "out", "--json")
    assert code == 0
    doc = json.loads(out)
    dst = tmp_path / "out" / src.name
    for path, key in ((src, "before"), (dst, "after")):
        with zipfile.ZipFile(path) as zf:
            assert doc["installed_size"][key] == sum(i.file_size for i in zf.infolist())
        assert doc["wheel_size"][key] == path.stat().st_size


def test_an_earlier_thin_output_is_replaced_a_foreign_file_is_not(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    out = tmp_path / "out"
    assert run_main(capsys, "thin", src, "--targets", "gfx942", "--outdir", out)[0] == 0
    assert run_main(capsys, "thin", src, "--targets", "gfx90a", "--outdir", out)[0] == 2  # other targets: --force
    assert run_main(capsys, "thin", src, "--targets", "gfx90a", "--outdir", out, "--force")[0] == 0
    assert read_stamp(out / src.name)["requested"]["targets"] == ["gfx90a"]
    (out / src.name).write_bytes(b"someone else's file")
    code, _o, err = run_main(capsys, "thin", src, "--targets", "gfx942", "--outdir", out)
    assert code == 2 and "not written by thin" in err
    assert (out / src.name).read_bytes() == b"someone else's file"


def test_thinning_is_reproducible(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    for out in ("a", "b"):
        assert run_main(capsys, "thin", src, "--targets", "gfx942", "--outdir", tmp_path / out)[0] == 0
    assert (tmp_path / "a" / src.name).read_bytes() == (tmp_path / "b" / src.name).read_bytes()
