"""`check --env`: the installed distributions of an environment, audited against the GPUs."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import run
from rocm_build_backend.data import path as data_path
from rocm_build_backend.wheel.check import environment as E
from wheelmaker import make_wheel, record_line

BIN = Path(__file__).parent / "data" / "binaries"
GFX90A = (BIN / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes()
GFX942 = (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes()


def install_dist(site: Path, name: str, files: dict[str, bytes]) -> None:
    """What an installer leaves: the files, and a .dist-info with METADATA and RECORD."""
    dist = name.replace("-", "_")
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\n")
    rows = []
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
        rows.append(record_line(rel, data))
    rows += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,", "../../bin/demo-tool,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")


@pytest.fixture
def site(tmp_path):
    site = tmp_path / "site-packages"
    install_dist(site, "demo-gpu", {"demo_gpu/__init__.py": b"", "demo_gpu/_k.so": GFX90A})
    install_dist(site, "demo-ok", {"demo_ok/k.hsaco": GFX942, "demo_ok/data.bin": b"\0" * 4096})
    # device code under a name that cannot hold any is never opened
    install_dist(site, "pure", {"pure/__init__.py": GFX90A, "pure/notes.txt": GFX90A, "pure/tiny.so": b"\x7fELF"})
    return site


def test_each_distribution_is_judged(site):
    report = E.check_environment("python", ["gfx942"], locations=[site])
    assert [(d.dist.name, d.status) for d in report.dists] == [("demo-gpu", "fails"), ("demo-ok", "ok")]
    bad = report.dists[0]
    assert bad.files == {"demo_gpu/_k.so": {"targets": ["gfx90a:xnack+"], "complete": ["gfx90a:xnack+"],
                                            "modules": [{"targets": ["gfx90a:xnack+"], "count": 1}]}}
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


@pytest.mark.parametrize("path, may", [
    ("torch/lib/libtorch_cuda.so", True), ("cupy/_core/core.cpython-312-x86_64-linux-gnu.so", True),
    ("torch/lib/libc10.so.2", True), ("pkg/kernels/gfx942.hsaco", True), ("pkg/bin/tool", True),
    ("pkg/__init__.py", False), ("pkg/include/x.cuh", False), ("pkg-1.0.dist-info/RECORD", False),
    ("pkg/__pycache__/m.cpython-312.pyc", False), ("pkg/README.md", False),
])
def test_names_that_cannot_hold_device_code(path, may):
    assert E.may_hold_device_code(path) is may


def test_cli_on_a_real_environment(tmp_path):
    import jsonschema

    venv = tmp_path / "venv"
    made = run([sys.executable, "-m", "venv", "--without-pip", venv])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    (sitedir,) = (venv / "lib").glob("python3*/site-packages")
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "demo-gpu", "1.0", members={"demo_gpu/_k.so": GFX90A}, stamp=False)
    make_wheel(wheels, "demo-ok", "1.0", members={"demo_ok/k.hsaco": GFX942}, stamp=False)
    pip = run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-cache-dir", "--target", sitedir,
               *sorted(wheels.glob("*.whl"))])
    assert pip.returncode == 0, pip.stderr

    # the venv's folder read from its layout is the one its interpreter names
    asked = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"])
    assert E._venv_site(str(python)) == [Path(asked.stdout.strip())]

    proc = run([sys.executable, "-m", "rocm_build_backend", "check", "--env", python, "--targets", "gfx942", "--json",
                "--no-cache"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    schema = json.loads(data_path("schemas/check-env.schema.json").read_text())
    jsonschema.validate(data, schema)
    assert list(data)[0] == "schema_version"
    assert Path(data["python"]).parent == python.parent
    assert [(d["name"], d["status"]) for d in data["distributions"]] == [("demo-gpu", "fails"), ("demo-ok", "ok")]

    text = run([sys.executable, "-m", "rocm_build_backend", "check", "--env", python, "--targets", "gfx90a",
                "--no-cache"])
    assert text.returncode == 1
    rows = {line.split()[0]: line.split() for line in text.stdout.splitlines() if line.startswith("demo-")}
    assert rows["demo-gpu"][-1] == "yes" and rows["demo-ok"][-1] == "no", text.stdout
    assert rows["demo-gpu"][2] == "1"  # one file with device code

    ok = run([sys.executable, "-m", "rocm_build_backend", "check", "--env", python, "--targets", "gfx90a,gfx942",
              "--json", "--no-cache"])
    jsonschema.validate(json.loads(ok.stdout), schema)


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


def test_cli_without_a_gpu_cannot_tell(tmp_path, site):
    from test_shim_builds import kfd_root

    venv = tmp_path / "venv"
    assert run([sys.executable, "-m", "venv", "--without-pip", venv]).returncode == 0
    (sitedir,) = (venv / "lib").glob("python3*/site-packages")
    shutil.copytree(site, sitedir, dirs_exist_ok=True)
    cpu_only = kfd_root(tmp_path / "cpu")
    proc = run([sys.executable, "-m", "rocm_build_backend", "check", "--env", venv / "bin" / "python",
                "--root", cpu_only, "--json", "--no-cache"])
    assert proc.returncode == 3, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["devices"] == [] and {d["status"] for d in data["distributions"]} == {"unknown"}
    gpu = run([sys.executable, "-m", "rocm_build_backend", "check", "--env", venv / "bin" / "python",
               "--root", kfd_root(tmp_path / "mi300", 90402), "--no-cache"])
    assert gpu.returncode == 1 and "devices: gfx942" in gpu.stdout, gpu.stdout + gpu.stderr


def test_results_are_kept_between_runs(site, tmp_path, monkeypatch):
    cache = tmp_path / "cache" / "check-env.json"
    first = E.check_environment("python", ["gfx942"], locations=[site], cache_path=cache)
    assert cache.is_file() and first.scanned["cached"] == 0

    import rocm_build_backend.binary.audit as audit

    real = audit.audit_file
    monkeypatch.setattr(audit, "audit_file", lambda p: pytest.fail(f"{p} was audited again"))
    again = E.check_environment("python", ["gfx942"], locations=[site], cache_path=cache)
    assert again.scanned["cached"] == 2
    assert [(d.dist.name, d.status, d.files) for d in again.dists] == [(d.dist.name, d.status, d.files) for d in first.dists]

    # a file replaced by another is audited again
    monkeypatch.setattr(audit, "audit_file", real)
    lib = site / "demo_gpu" / "_k.so"
    lib.unlink()
    lib.write_bytes(GFX942)
    changed = E.check_environment("python", ["gfx942"], locations=[site], cache_path=cache)
    assert changed.scanned["cached"] == 1 and changed.exit_code == 0
    cache.write_text("{not json")
    assert E.check_environment("python", ["gfx942"], locations=[site], cache_path=cache).exit_code == 0


def test_cli_keeps_results_in_the_user_cache(site, tmp_path):
    venv = tmp_path / "venv"
    assert run([sys.executable, "-m", "venv", "--without-pip", venv]).returncode == 0
    (sitedir,) = (venv / "lib").glob("python3*/site-packages")
    shutil.copytree(site, sitedir, dirs_exist_ok=True)
    xdg = tmp_path / "xdg"
    argv = [sys.executable, "-m", "rocm_build_backend", "check", "--env", venv / "bin" / "python",
            "--targets", "gfx942", "--json"]
    env = {**os.environ, "XDG_CACHE_HOME": str(xdg)}
    first = json.loads(run(argv, env=env).stdout)
    assert (xdg / "rocm-build-backend" / "check-env.json").is_file()
    second = json.loads(run(argv, env=env).stdout)
    assert (first["scanned"]["cached"], second["scanned"]["cached"]) == (0, 2)
    assert first["distributions"] == second["distributions"]
    fresh = json.loads(run([*argv, "--no-cache"], env=env).stdout)
    assert fresh["scanned"]["cached"] == 0
