"""`check --env`: the installed distributions of an environment, audited against the GPUs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from rocm_build_backend.wheel.check import environment as E
from helpers import check_env_site, install_dist, run, TESTS

BIN = TESTS / "data" / "binaries"
GFX90A = (BIN / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes()
GFX942 = (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes()


@pytest.fixture
def site(tmp_path):
    return check_env_site(tmp_path)


def test_each_distribution_is_judged(site):
    report = E.check_environment("python", ["gfx942"], locations=[site])
    assert [(d.dist.name, d.status) for d in report.dists] == [("demo-gpu", "fails"), ("demo-ok", "ok")]
    bad = report.dists[0]
    assert bad.files == {
        "demo_gpu/_k.so": {
            "targets": ["gfx90a:xnack+"],
            "complete": ["gfx90a:xnack+"],
            "modules": [{"targets": ["gfx90a:xnack+"], "count": 1}],
        }
    }
    assert "gfx90a" in bad.reason and "gfx942" in bad.reason
    assert report.exit_code == 1
    # opened: _k.so, k.hsaco, data.bin (tiny.so is under 64 bytes, the others skipped by name);
    # files: RECORD's paths inside the site folder (its ../../bin/demo-tool rows are not counted)
    assert report.scanned == {"distributions": 3, "files": 13, "opened": 3, "audited": 2, "cached": 0}
    assert E.check_environment("python", ["gfx90a"], locations=[site]).exit_code == 1  # demo-ok fails there
    assert E.check_environment("python", ["gfx90a", "gfx942"], locations=[site]).dists[1].status == "fails"


def test_distributions_without_record_are_named(site):
    (site / "legacy-2.0.egg-info").mkdir()
    (site / "broken-1.0.dist-info").mkdir()
    report = E.check_environment("python", ["gfx942"], locations=[site])
    assert report.notes == ["not checked, no RECORD lists their files: broken, legacy"]
    assert report.scanned["distributions"] == 3


def test_no_device_is_cannot_tell(site):
    report = E.check_environment("python", [], locations=[site])
    assert {d.status for d in report.dists} == {"unknown"}
    assert report.exit_code == 3


def test_a_damaged_library_is_cannot_tell(tmp_path):
    site = tmp_path / "site"
    install_dist(site, "cut", {"cut/_k.so": (BIN / "bad_hip_bundle_count.so").read_bytes()})
    report = E.check_environment("python", ["gfx90a"], locations=[site])
    (d,) = report.dists
    assert d.status == "unknown" and d.files["cut/_k.so"]["problems"]
    assert report.exit_code == 3


@pytest.mark.parametrize(
    "path, may",
    [
        ("torch/lib/libtorch_cuda.so", True),
        ("cupy/_core/core.cpython-312-x86_64-linux-gnu.so", True),
        ("torch/lib/libc10.so.2", True),
        ("pkg/kernels/gfx942.hsaco", True),
        ("pkg/bin/tool", True),
        ("pkg/__init__.py", False),
        ("pkg/include/x.cuh", False),
        ("pkg-1.0.dist-info/RECORD", False),
        ("pkg/__pycache__/m.cpython-312.pyc", False),
        ("pkg/README.md", False),
    ],
)
def test_names_that_cannot_hold_device_code(path, may):
    assert E.may_hold_device_code(path) is may


def test_cli_bad_python_is_a_usage_error(tmp_path):
    proc = run([sys.executable, "-m", "rocm_build_backend", "check", "--env", tmp_path / "nope", "--targets", "gfx942"])
    assert proc.returncode == 2 and proc.stderr.startswith("error: cannot run"), proc.stderr
    both = run([sys.executable, "-m", "rocm_build_backend", "check", "--env", "--targets", "gfx942", "x.whl"])
    assert both.returncode == 2 and "takes no wheels" in both.stderr


def test_site_dirs_asks_an_interpreter_outside_a_venv():
    exe, dirs = E.site_dirs(sys.executable if not (Path(sys.prefix) / "pyvenv.cfg").exists() else None)
    import sysconfig

    assert Path(sysconfig.get_paths()["purelib"]) in dirs or not Path(sysconfig.get_paths()["purelib"]).is_dir()


@pytest.mark.parametrize("fixture", sorted(p.name for p in BIN.iterdir() if p.suffix in (".so", ".o", ".co", ".hsaco")))
def test_the_elf_filter_keeps_every_file_with_device_code(fixture):
    path = BIN / fixture
    with open(path, "rb") as fh:
        assert E.elf_may_hold_device_code(fh, path.stat().st_size)


def test_the_elf_filter_drops_a_host_library():
    host = Path(sys.executable).resolve()
    with open(host, "rb") as fh:
        assert fh.read(4) == b"\x7fELF"
        assert not E.elf_may_hold_device_code(fh, host.stat().st_size)


def test_results_are_kept_between_runs(site, tmp_path, monkeypatch):
    cache = tmp_path / "cache" / "check-env.json"
    first = E.check_environment("python", ["gfx942"], locations=[site], cache_path=cache)
    assert cache.is_file() and first.scanned["cached"] == 0

    import rocm_build_backend.binary.audit as audit

    real = audit.audit_file
    monkeypatch.setattr(audit, "audit_file", lambda p: pytest.fail(f"{p} was audited again"))
    again = E.check_environment("python", ["gfx942"], locations=[site], cache_path=cache)
    assert again.scanned["cached"] == 2
    assert [(d.dist.name, d.status, d.files) for d in again.dists] == [
        (d.dist.name, d.status, d.files) for d in first.dists
    ]

    # a file replaced by another is audited again
    monkeypatch.setattr(audit, "audit_file", real)
    lib = site / "demo_gpu" / "_k.so"
    lib.unlink()
    lib.write_bytes(GFX942)
    changed = E.check_environment("python", ["gfx942"], locations=[site], cache_path=cache)
    assert changed.scanned["cached"] == 1 and changed.exit_code == 0
    cache.write_text("{not json")
    assert E.check_environment("python", ["gfx942"], locations=[site], cache_path=cache).exit_code == 0
