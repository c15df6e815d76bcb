"""`check --env` on real environments: a venv with a wheel pip installed, one on a machine without
a GPU, and the audit results kept in the user's cache between runs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from rocm_build_backend.data import path as data_path
from rocm_build_backend.wheel.check.interpreter import venv_site
from helpers import check_env_site, kfd_root, make_wheel, run, TESTS

BIN = TESTS / "data" / "binaries"
GFX90A = (BIN / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes()
GFX942 = (BIN / "amdgpu_gfx942_cov5.hsaco").read_bytes()


@pytest.fixture
def site(tmp_path):
    return check_env_site(tmp_path)


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
    pip = run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--no-cache-dir",
            "--target",
            sitedir,
            *sorted(wheels.glob("*.whl")),
        ]
    )
    assert pip.returncode == 0, pip.stderr

    # the venv's folder read from its layout is the one its interpreter names
    asked = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"])
    assert venv_site(str(python)) == [Path(asked.stdout.strip())]

    proc = run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "check",
            "--env",
            python,
            "--targets",
            "gfx942",
            "--json",
            "--no-cache",
        ]
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    schema = json.loads(data_path("schemas/check-env.schema.json").read_text())
    jsonschema.validate(data, schema)
    assert list(data)[0] == "schema_version"
    assert Path(data["python"]).parent == python.parent
    assert [(d["name"], d["status"]) for d in data["distributions"]] == [("demo-gpu", "fails"), ("demo-ok", "ok")]

    text = run(
        [sys.executable, "-m", "rocm_build_backend", "check", "--env", python, "--targets", "gfx90a", "--no-cache"]
    )
    assert text.returncode == 1
    rows = {line.split()[0]: line.split() for line in text.stdout.splitlines() if line.startswith("demo-")}
    assert rows["demo-gpu"][-1] == "yes" and rows["demo-ok"][-1] == "no", text.stdout
    assert rows["demo-gpu"][2] == "1"  # one file with device code

    ok = run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "check",
            "--env",
            python,
            "--targets",
            "gfx90a,gfx942",
            "--json",
            "--no-cache",
        ]
    )
    jsonschema.validate(json.loads(ok.stdout), schema)


def test_cli_without_a_gpu_cannot_tell(tmp_path, site):
    venv = tmp_path / "venv"
    assert run([sys.executable, "-m", "venv", "--without-pip", venv]).returncode == 0
    (sitedir,) = (venv / "lib").glob("python3*/site-packages")
    shutil.copytree(site, sitedir, dirs_exist_ok=True)
    cpu_only = kfd_root(tmp_path / "cpu")
    proc = run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "check",
            "--env",
            venv / "bin" / "python",
            "--root",
            cpu_only,
            "--json",
            "--no-cache",
        ]
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["devices"] == [] and {d["status"] for d in data["distributions"]} == {"unknown"}
    gpu = run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "check",
            "--env",
            venv / "bin" / "python",
            "--root",
            kfd_root(tmp_path / "mi300", 90402),
            "--no-cache",
        ]
    )
    assert gpu.returncode == 1 and "devices: gfx942" in gpu.stdout, gpu.stdout + gpu.stderr


def test_cli_keeps_results_in_the_user_cache(site, tmp_path):
    venv = tmp_path / "venv"
    assert run([sys.executable, "-m", "venv", "--without-pip", venv]).returncode == 0
    (sitedir,) = (venv / "lib").glob("python3*/site-packages")
    shutil.copytree(site, sitedir, dirs_exist_ok=True)
    xdg = tmp_path / "xdg"
    argv = [
        sys.executable,
        "-m",
        "rocm_build_backend",
        "check",
        "--env",
        venv / "bin" / "python",
        "--targets",
        "gfx942",
        "--json",
    ]
    env = {**os.environ, "XDG_CACHE_HOME": str(xdg)}
    first = json.loads(run(argv, env=env).stdout)
    assert (xdg / "rocm-build-backend" / "check-env.json").is_file()
    second = json.loads(run(argv, env=env).stdout)
    assert (first["scanned"]["cached"], second["scanned"]["cached"]) == (0, 2)
    assert first["distributions"] == second["distributions"]
    fresh = json.loads(run([*argv, "--no-cache"], env=env).stdout)
    assert fresh["scanned"]["cached"] == 0
