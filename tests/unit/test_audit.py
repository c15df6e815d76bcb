"""Per-file and per-wheel reports, reading wheels in place, and verify()'s matching rule."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.cli import render
from rocm_build_backend.binary import audit
from rocm_build_backend.binary import decompression as _decompression
from rocm_build_backend.binary import members as _members
from rocm_build_backend.binary.audit import (
    AuditReport,
    FileReport,
    audit_file,
    audit_paths,
    audit_wheel,
    mismatch_error,
    verify,
)
from rocm_build_backend.binary.container import Container
from rocm_build_backend.binary.members import InflateSource
from rocm_build_backend.errors import TargetMismatchError
from rocm_build_backend.gpu.targets import parse_target
from helpers import ROOT, TESTS

DATA = TESTS / "data" / "binaries"
MANIFEST = json.loads((DATA / "manifest.json").read_text())
ALL = sorted(f["file"] for f in MANIFEST["fixtures"] + MANIFEST["damaged"])


def _wheel(
    tmp_path, members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED, name="demo-1.0-py3-none-linux_x86_64.whl"
):
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", compression) as zf:
        for arc, data in members.items():
            zf.writestr(arc, data)
    return path


# ------------------------------------------------------------------ wheels in place


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2])
def test_wheel_members_read_like_files(tmp_path, compression):
    members = {f"demo/{n}": (DATA / n).read_bytes() for n in ALL}
    members["demo/__init__.py"] = b"print('hi')\n"
    members["demo-1.0.dist-info/RECORD"] = b""
    report = audit_wheel(_wheel(tmp_path, members, compression))
    assert report.skipped == 2
    by_path = {f.path: f for f in report.files}
    assert set(by_path) == {f"demo/{n}" for n in ALL}
    for n in ALL:
        got, want = by_path[f"demo/{n}"], audit_file(DATA / n)
        assert got.archive.endswith(".whl")
        assert (got.targets, got.complete, got.problems) == (want.targets, want.complete, want.problems), n
        assert [c.to_json() for c in got.containers] == [c.to_json() for c in want.containers]
    assert not report.ok  # the damaged copies are in there
    assert {"gfx90a", "sm_80", "compute_120f"} <= set(report.targets)


def test_wheel_of_good_files_is_ok(tmp_path):
    members = {f"demo/{f['file']}": (DATA / f["file"]).read_bytes() for f in MANIFEST["fixtures"]}
    report = audit_wheel(_wheel(tmp_path, members))
    assert report.ok
    assert len(report.device_files) == len(MANIFEST["fixtures"])


def test_host_library_without_device_code_is_listed(tmp_path):
    exe = Path(sys.executable).resolve().read_bytes()
    report = audit_wheel(_wheel(tmp_path, {"demo/_c.so": exe}))
    (f,) = report.files
    assert f.kind == "elf" and not f.containers and f.readable
    assert report.device_files == [] and report.ok


def test_not_a_wheel(tmp_path):
    bad = tmp_path / "x.whl"
    bad.write_bytes(b"PK\x03\x04 not really")
    report = audit_wheel(bad)
    assert report.problems and not report.ok


def test_audit_exit_code_is_0_or_cannot_tell(tmp_path):
    """An audit says what is there: 0 when every file was read, 3 (cannot tell) for a
    damaged or cut file, a .whl that is no zip, a container left unread; never 1."""
    assert audit_paths([DATA / "hip_two_tu_cov4.so", DATA / "cuda_two_tu_dlink_stub.so"]).exit_code == 0
    assert audit_paths([DATA / "trunc_hip_gfx90a_gfx940_cov4.so"]).exit_code == 3
    bad = tmp_path / "x.whl"
    bad.write_bytes(b"not a zip")
    assert audit_paths([bad]).exit_code == 3
    unread = FileReport("k.so", containers=[Container("fatbin", ".nv_fatbin", 0, ["sm_80"], read=False)]).finish()
    assert AuditReport(files=[unread]).finish().exit_code == 3


def test_truncated_deflate_member_is_damage(tmp_path):
    data = (DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes()
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("demo/k.so", data)
    info = zipfile.ZipFile(raw).infolist()[0]
    src = _members.member_source(zipfile.ZipFile(raw), raw, info)
    src._csize = info.compress_size // 2  # the compressed data stops half way
    r = audit._audit_source(src, "demo/k.so")
    assert not r.readable
    assert any("truncated" in p for p in r.problems)


def test_inflate_source_random_access_matches_bytes():
    rng = random.Random(7)
    data = bytes(rng.getrandbits(8) for _ in range(3000)) * 4000  # 12 MB, compressible
    import zlib

    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw = c.compress(data) + c.flush()
    fh = io.BytesIO(raw)
    src = InflateSource(fh, 0, len(raw), len(data))
    src.SPACING = 1 << 20
    # the end first (like a section table), then earlier offsets, then forward again
    offsets = [len(data) - 100, 5, 3 << 20, (3 << 20) + 10, 7_000_001, 100, len(data) - 1, 11 << 20]
    offsets += [rng.randrange(len(data)) for _ in range(30)]
    for off in offsets:
        n = rng.randrange(1, 70000)
        assert src.read(off, n) == data[off : off + n], off
    assert src.read(len(data), 10) == b""
    # restart points keep the cost bounded: far less than re-inflating from 0 every read
    assert src.inflated < 6 * len(data)
    assert len(src._cps) >= 10


def test_inflate_source_reads_the_end_once_then_sections_cheaply():
    import zlib

    data = os.urandom(1 << 20) * 20
    c = zlib.compressobj(1, zlib.DEFLATED, -15)
    raw = c.compress(data) + c.flush()
    src = InflateSource(io.BytesIO(raw), 0, len(raw), len(data))
    assert src.read(len(data) - 64, 64) == data[-64:]
    first = src.inflated
    assert first == len(data)
    src.read(5 << 20, 4096)  # a section near the start: restart from a saved point
    assert src.inflated - first <= InflateSource.SPACING + InflateSource.OUT_STEP + 4096


@pytest.mark.parametrize(
    "fixture, zstd",
    [
        ("hip_gfx90a_gfx942_cov5.so", False),  # an uncompressed bundle
        ("ccob_v2_zstd_gfx90a_gfx942.bin", True),
    ],
)
def test_a_zstd_decoder_is_imported_only_for_zstd_data(fixture, zstd):
    """Measured in a fresh isolated interpreter against the modules it had at its start (a
    ``.pth`` file of an editable install may have loaded some already)."""
    if zstd and _decompression._zstd_backend() is None:
        pytest.skip("no zstd decoder installed (backports.zstd, or Python 3.14's compression.zstd)")
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "before = set(sys.modules)\n"
        "import rocm_build_backend.binary.audit as a\n"
        "report = a.audit_bytes(open(sys.argv[1], 'rb').read(), 'x.so')\n"
        "print(report.targets)\n"
        "print([m for m in ('backports.zstd', 'compression.zstd')\n"
        "       if m in sys.modules and m not in before])\n"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code, str(DATA / fixture)], capture_output=True, text=True, check=True
    )
    targets, loaded = out.stdout.strip().splitlines()
    assert "gfx90a" in targets
    assert (loaded != "[]") is zstd, loaded


# ------------------------------------------------------------------ paths, json, text


def test_audit_paths_walks_directories(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a.so").write_bytes((DATA / "hip_two_tu_cov4.so").read_bytes())
    (tmp_path / "lib" / "notes.txt").write_text("hello")
    _wheel(tmp_path, {"demo/k.so": (DATA / "cuda_sm75_80_90_ptx90.so").read_bytes()})
    report = audit_paths([tmp_path])
    paths = sorted(f.path for f in report.files)
    assert paths == sorted(["demo/k.so", str(tmp_path / "lib" / "a.so")])
    assert report.skipped == 1
    assert report.targets == ["gfx908", "gfx90a", "sm_75", "sm_80", "sm_90", "compute_90"]
    missing = audit_paths([tmp_path / "nope"])
    assert missing.problems and not missing.ok


def test_json_shape():
    report = audit_paths([DATA / "hip_two_tu_cov4.so", DATA / "bad_hip_entry_offset.so"])
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["targets"] == ["gfx908", "gfx90a", "gfx940"]
    first, second = doc["files"]
    assert first["targets"] == ["gfx908", "gfx90a"] and first["complete"] == ["gfx90a"]
    assert first["problems"] == [] and first["readable"] is True
    assert [c["targets"] for c in first["containers"]] == [["gfx908", "gfx90a"], ["gfx90a"]]
    assert second["readable"] is False and second["problems"]
    assert doc["ok"] is False


def test_text_table():
    text = render.audit(
        audit_paths(
            [DATA / "hip_two_tu_cov4.so", DATA / "cuda_two_tu_dlink_stub.so", DATA / "trunc_hip_two_tu_cov4.so"]
        )
    )
    lines = text.splitlines()
    assert lines[1].split()[:4] == ["FILE", "KIND", "TARGETS", "EVERY"]
    assert any("hip_two_tu_cov4.so" in ln and "gfx908, gfx90a" in ln and ln.split()[-3] == "gfx90a" for ln in lines)
    assert any("device-link stub" in ln for ln in lines)
    assert "problems:" in lines
    assert any("truncated" in ln for ln in lines[lines.index("problems:") :])


# ------------------------------------------------------------------ verify


def _report(*names, source="demo-1.0-cp311-cp311-linux_x86_64.whl"):
    files = [audit.audit_bytes((DATA / n).read_bytes(), f"demo/{n}") for n in names]
    return AuditReport(files=files, source=source).finish()


@pytest.mark.parametrize(
    "fixture,requested,ok",
    [
        ("hip_gfx90a_gfx942_cov5.so", ["gfx90a", "gfx942"], True),
        ("hip_gfx90a_gfx942_cov5.so", ["gfx90a:xnack-", "gfx942:sramecc+:xnack+"], True),  # "any" code
        ("hip_gfx90a_gfx942_cov5.so", ["gfx908"], False),
        ("amdgpu_gfx90a_xnack+_cov4.co", ["gfx90a:xnack+"], True),
        ("amdgpu_gfx90a_xnack+_cov4.co", ["gfx90a"], False),  # xnack- mode is not covered
        ("amdgpu_gfx90a_xnack+_cov4.co", ["gfx90a:xnack-"], False),
        ("hip_features_cov4.so", ["gfx90a"], True),  # xnack+ and xnack- together cover both
        ("hip_features_cov4.so", ["gfx908"], False),  # only xnack-
        ("hip_features_cov4.so", ["gfx908:xnack-"], True),
        ("hip_features_cov4.so", ["gfx906:sramecc+:xnack-"], True),
        ("hip_two_tu_cov4.so", ["gfx90a"], True),
        ("hip_two_tu_cov4.so", ["gfx908"], False),  # only the first TU has gfx908
        ("hip_two_tu_ccob_v2_cov5.so", ["gfx942"], True),
        ("hip_two_tu_ccob_v2_cov5.so", ["gfx90a"], False),
        ("hip_generic_gfx9-generic_gfx11-generic_cov6.so", ["gfx906", "gfx1100", "gfx11-generic"], True),
        ("hip_generic_gfx9-generic_gfx11-generic_cov6.so", ["gfx942"], False),
        ("hip_newdriver_rdc_gfx90a_gfx942.o", ["gfx90a", "gfx942"], True),  # one TU, two images
        ("cuda_sm75_80_90_ptx90.so", ["sm_75", "sm_80", "sm_86", "sm_90", "compute_90"], True),
        ("cuda_sm75_80_90_ptx90.so", ["sm_100"], False),  # PTX alone does not count
        ("cuda_sm75_80_90_ptx90.so", ["sm_90a"], False),
        ("cuda_sm90a_100a_100f_103_120_ptx120f.so", ["sm_90a", "sm_100a", "sm_100f", "compute_120f"], True),
        ("cuda_sm90a_100a_100f_103_120_ptx120f.so", ["sm_120a"], False),
        ("cuda_two_tu_dlink_stub.so", ["sm_80"], True),
        ("cuda_two_tu_dlink_stub.so", ["sm_75"], False),  # a stub without kernels
        ("cuda_two_tu_dlink_stub.so", ["sm_90"], False),  # second TU has sm_80 only
    ],
)
def test_verify_matching_rule(fixture, requested, ok):
    problems = verify(_report(fixture), requested)
    assert (problems == []) == ok, problems


def test_verify_generic_can_be_refused():
    report = _report("hip_generic_gfx9-generic_gfx11-generic_cov6.so")
    assert verify(report, ["gfx906"]) == []
    (p,) = verify(report, ["gfx906"], generic_ok=False)
    assert "ROCm 6.4" in p


def test_verify_hard_coded_arch_message():
    # a library whose build ignored the requested targets
    report = _report("hip_two_tu_cov4.so")
    report.files[0].path = "demo/_k.so"
    (p1, p2) = verify(report, ["gfx942", "gfx908"])
    assert p1 == (
        "wheel demo-1.0-cp311-cp311-linux_x86_64.whl: demo/_k.so holds device code "
        "for gfx908 and gfx90a only; gfx942 was requested"
    )
    assert p2.startswith(
        "wheel demo-1.0-cp311-cp311-linux_x86_64.whl: demo/_k.so has gfx908 code "
        "for only some of its kernels (1 of 2 translation units lack it)"
    )
    err = mismatch_error([p1, p2])
    assert isinstance(err, TargetMismatchError)
    assert err.message.startswith("2 problems") and p1 in err.message
    assert "--offload-arch" in err.hint and 'verify = "off"' in err.hint
    assert mismatch_error([p1]).message == p1


def test_verify_on_a_real_wheel(tmp_path):
    path = _wheel(
        tmp_path, {"demo/_k.so": (DATA / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes(), "demo/__init__.py": b""}
    )
    (p,) = verify(audit_wheel(path), [parse_target("gfx908")])
    assert p.startswith(f"wheel {path.name}: demo/_k.so holds device code for gfx90a:xnack+ only; gfx908 was requested")
    (p,) = verify(audit_wheel(path), ["gfx90a"])
    assert "does not load on gfx90a running xnack-" in p


def test_verify_no_device_code_at_all(tmp_path):
    path = _wheel(tmp_path, {"demo/__init__.py": b"", "demo/_c.so": Path(sys.executable).resolve().read_bytes()})
    (p,) = verify(audit_wheel(path), ["gfx90a", "gfx942"])
    assert p == f"wheel {path.name} holds no GPU device code at all; gfx90a and gfx942 were requested"
    assert verify(audit_wheel(path), []) == []


def test_verify_other_vendor_only():
    (p,) = verify(_report("cuda_sm75_80_90_ptx90.so"), ["gfx90a"])
    assert "no AMD device code" in p
    # a vendor that was not requested is not checked
    assert verify(_report("cuda_sm75_80_90_ptx90.so", "hip_gfx90a_gfx942_cov5.so"), ["gfx90a"]) == []


def test_verify_reports_damage_and_unread(monkeypatch):
    problems = verify(_report("bad_hip_entry_offset.so"), ["gfx940"])
    assert len(problems) == 1 and "could not be read completely" in problems[0]

    monkeypatch.setattr(_decompression, "_zstd_backend", lambda: None)
    problems = verify(_report("hip_ccob_v2_gfx90a_gfx942_cov5.so"), ["gfx90a"])
    assert len(problems) == 1 and "install backports.zstd" in problems[0]
    hint = mismatch_error(problems).hint
    assert "backports.zstd" in hint and "hard-coded" not in hint  # unread is not a wrong target


def test_file_report_complete_ignores_unread():
    f = FileReport(
        "x", containers=[Container("ccob", "file", 0, read=False, note="n"), Container("bundle", "file", 9, ["gfx90a"])]
    ).finish()
    assert f.complete == ["gfx90a"] and f.readable and not f.fully_read


def test_relocatable_fatbin_of_a_linked_library_is_not_counted():
    """A linked .so keeps __nv_relfatbin for later device linking; the runtime loads .nv_fatbin
    (cuobjdump lists only that). Seen on a real libtorch_nvshmem.so, whose relocatable code had
    sm_89 and compute_120 that its loadable fatbin did not. Here: a real -rdc library with its
    relocatable entry's arch field patched to 89."""
    import struct

    from rocm_build_backend.binary import elf

    data = bytearray((DATA / "cuda_rdc_sm80_sm90.so").read_bytes())
    src = elf.BytesSource(bytes(data))
    table = elf.read_sections(src, elf.read_header(src), lambda name, _type: name == "__nv_relfatbin")
    (sec,) = [s for s in table.sections if s.name == "__nv_relfatbin"]
    _magic, _ver, header_size, _size = struct.unpack_from("<IHHQ", data, sec.offset)
    struct.pack_into("<I", data, sec.offset + header_size + 28, 89)
    report = audit.audit_bytes(bytes(data), "patched.so")
    rel = [c for c in report.containers if c.where == "__nv_relfatbin"]
    assert rel and "sm_89" in rel[0].targets and "not loaded at run time" in rel[0].note
    assert report.targets == ["sm_80", "sm_90"] and report.complete == ["sm_80", "sm_90"]
    # an object file has only relocatable code: there it is what counts
    obj = audit_file(DATA / "cuda_rdc_sm80_sm90.o")
    assert obj.targets == ["sm_80", "sm_90"]


def _cli_audit_json(*paths):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", "audit", "--json", *map(str, paths)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode in (0, 3), out.stderr  # an audit has no "no" (1)
    assert "Traceback" not in out.stderr
    return out.returncode, json.loads(out.stdout)


def test_audit_json_validates_against_its_schema(tmp_path):
    """Real `audit --json` outputs (every fixture, damaged ones included, a folder, a wheel
    with a hostile member) against data/schemas/audit.schema.json."""
    jsonschema = pytest.importorskip("jsonschema")
    from rocm_build_backend.data import path as data_path

    schema = json.loads(Path(data_path("schemas/audit.schema.json")).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("demo/k.so", (DATA / "hip_two_tu_ccob_v2_cov5.so").read_bytes())
        zf.writestr("demo/bad.so", (DATA / "trunc_hip_two_tu_cov4.so").read_bytes())
        zf.writestr("demo/__init__.py", "")
    fake = tmp_path / "fake-1.0-py3-none-any.whl"
    fake.write_bytes(b"not a zip")
    runs = [[DATA / name for name in ALL], [DATA], [wheel], [DATA / "cuda_ptx80.so"], [fake, DATA / "cuda_ptx80.so"]]
    seen_rc = set()
    for paths in runs:
        rc, doc = _cli_audit_json(*paths)
        seen_rc.add(rc)
        errors = sorted(validator.iter_errors(doc), key=str)
        assert not errors, (paths, [e.message for e in errors[:3]])
        assert list(doc)[0] == "schema_version" and doc["schema_version"] == 1
        assert (rc == 0) == doc["ok"]
    assert seen_rc == {0, 3}


def test_mismatch_error_escapes_names_from_the_wheel():
    report = AuditReport(
        files=[audit.audit_bytes((DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes(), "pkg/evil\n\x1b[2Kok.so")]
    ).finish()
    problems = verify(report, ["gfx1100"])
    err = mismatch_error(problems + ["second"])
    assert "\x1b" not in str(err) and "evil\\n\\x1b[2Kok.so" in str(err)


def _fatbin_library(cubin: bytes, containers: int, host: int) -> bytes:
    """A library-shaped ELF: ``host`` bytes of code-like data, then a .nv_fatbin of
    ``containers`` fatbins, each one ELF entry holding ``cubin``, then more host data."""
    import struct

    sys.path.insert(0, str(DATA / "src"))
    import hostile

    rng = random.Random(7)
    code = bytes(rng.getrandbits(8) for _ in range(4096)) * (host // 8192) + bytes(host // 2)
    payload = cubin + bytes(-len(cubin) % 8)
    fat = b""
    for i in range(containers):
        entry = (
            struct.pack("<HHIQIIHHIIIQQQ", 2, 0x101, 64, len(payload), 0, 0, 8, 1, 80 + 10 * (i % 2), 0, 0, 0x11, 0, 0)
            + payload
        )
        fat += hostile.FATBIN_MAGIC + struct.pack("<HHQ", 1, 16, len(entry)) + entry
    return hostile.elf64([(1, 1, 64 + len(code), len(fat))], code + fat + code[:4096], b"\0.nv_fatbin\0")


def test_fatbins_of_a_deflated_member_are_not_inflated_twice(tmp_path):
    """The section table is at the end: the first pass keeps what the fatbin reader needs, so
    coming back to .nv_fatbin does not inflate it again (it cost 1.33-1.75x on CUDA wheels)."""
    cubin = (DATA / "cubin_abi8_sm80_cuda13.0.cubin").read_bytes()
    so = _fatbin_library(cubin, containers=400, host=10 << 20)
    path = tmp_path / "cuda-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr("pkg/libk.so", so)
    seen = []
    real = InflateSource.__init__

    def spy(self, *args):
        real(self, *args)
        seen.append(self)

    InflateSource.__init__ = spy
    try:
        report = audit_wheel(path)
    finally:
        InflateSource.__init__ = real
    (f,) = report.files
    assert f.targets == ["sm_80", "sm_90"] and f.problems == []
    assert all(c.kernels for c in f.containers) and len(f.containers) == 400
    assert seen[0].inflated <= 1.05 * len(so)
