"""NVIDIA's own libraries, from their real wheels on PyPI (``tests/real_wheels.json``).

On an H200 (sm_90), ``check --env`` once said cuBLAS, cuDNN, cuFFT, cuSPARSE and cuSPARSELt do
not load, while torch ran their kernels there. Two shapes caused it, both here:

- cuSPARSE 12.6.3.3: 133 kernel modules in ``.nv_fatbin``; 113 have code for sm_90, 20 hold one
  other architecture each (sm_75, sm_80, sm_86 variants the library picks by the GPU);
- cuFFT 12.0.0.61: ``.nv_fatbin`` is one device-link stub; its kernels are 11,255 fatbins in
  ``.ldata`` (SASS sm_75 ... sm_120 and PTX compute_75 ... compute_90, one architecture each;
  another 12,728 hold only entries of kind 8, which no GPU loads), which the library loads itself.

The facts asserted were read off the wheels independently (the fatbin headers counted by a
plain scan, ``readelf -S`` for the sections).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.cli import render
from rocm_build_backend.binary.audit import audit_wheel
from rocm_build_backend.wheel.check.wheels import check_wheels
from rocm_build_backend.wheel.check.environment import check_environment
from helpers import real_wheel, wheel_pin

pytestmark = pytest.mark.realinputs

CUFFT_TARGETS = [
    "sm_75",
    "compute_75",
    "sm_80",
    "compute_80",
    "sm_86",
    "compute_86",
    "sm_87",
    "sm_89",
    "sm_90",
    "compute_90",
    "sm_100",
    "sm_110",
    "sm_120",
]


@pytest.fixture(scope="module")
def cufft() -> Path:
    return real_wheel(wheel_pin("nvidia-cufft"))


@pytest.fixture(scope="module")
def cusparse() -> Path:
    return real_wheel(wheel_pin("nvidia-cusparse"))


def _file(report, suffix):
    return next(f for f in report.files if f.path.endswith(suffix))


def test_cufft_kernels_in_its_data_are_found(cufft):
    lib = _file(audit_wheel(cufft), "libcufft.so.12")
    assert lib.targets == CUFFT_TARGETS
    embedded = [c for c in lib.containers if c.where == ".ldata"]
    assert len(embedded) == 11_255
    assert sum(n for _, n in lib.modules) == 11_255  # the .nv_fatbin stub holds no kernels
    assert dict(lib.modules)[("compute_75",)] == 7_189
    assert dict(lib.modules)[("sm_90",)] == 393
    stub = _file(audit_wheel(cufft), "libcufftw.so.12")
    assert stub.modules == [] and stub.targets == ["sm_75"]


def test_cufft_verdicts(cufft):
    for device, status in (("sm_90", "ok"), ("sm_121", "ok"), ("sm_70", "fails")):
        got = check_wheels([cufft], [device])
        assert got.wheels[0].status == status, (device, render.check(got))
    sm90 = check_wheels([cufft], ["sm_90"]).wheels[0].verdicts[0]
    assert "8,524 of 11,255 kernel modules have code for sm_90" in (sm90.reason or "")
    assert check_wheels([cufft], ["sm_90"], strict=True).exit_code == 1


def test_cusparse_per_gpu_modules(cusparse):
    lib = _file(audit_wheel(cusparse), "libcusparse.so.12")
    assert lib.complete == []  # no target is in every module: the old rule said "does not load"
    assert sum(n for _, n in lib.modules) == 133
    assert {t: n for t, n in lib.modules if len(t) == 1} == {("sm_80",): 8, ("sm_86",): 8, ("sm_75",): 4}
    report = check_wheels([cusparse], ["sm_90"])
    assert report.exit_code == 0
    assert "113 of 133 kernel modules have code for sm_90; 20 hold only sm_75, sm_80, sm_86" in render.check(report)
    assert check_wheels([cusparse], ["sm_90"], strict=True).exit_code == 1
    assert check_wheels([cusparse], ["sm_70"]).exit_code == 1  # no module for it at all


def test_environment_with_nvidia_libraries(cufft, cusparse, tmp_path):
    """The H200 case: an environment holding these libraries, checked for sm_90 and sm_70."""
    site = tmp_path / "site-packages"
    for wheel in (cufft, cusparse):
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(site)
    report = check_environment("python", ["sm_90"], locations=[site])
    assert {d.dist.name: d.status for d in report.dists} == {"nvidia-cufft": "ok", "nvidia-cusparse": "ok"}
    assert report.exit_code == 0
    assert "nvidia-cusparse loads: sm_90: nvidia/cu13/lib/libcusparse.so.12: 113 of 133" in render.environment(report)
    strict = check_environment("python", ["sm_90"], locations=[site], strict=True)
    assert strict.exit_code == 1
    old = check_environment("python", ["sm_70"], locations=[site])
    assert {d.dist.name: d.status for d in old.dists} == {"nvidia-cufft": "fails", "nvidia-cusparse": "fails"}


def test_index_puts_cusparse_under_sm_90_not_sm_70(cusparse, tmp_path):
    """The per-target index uses the same rule: cuSPARSE serves sm_90, not sm_70."""
    import shutil

    from rocm_build_backend.gpu.targets import parse_targets
    from rocm_build_backend.wheel.index.run import build_index

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    shutil.copy(cusparse, wheels)
    result = build_index(wheels, tmp_path / "out", targets=parse_targets("sm_90;sm_70"))
    assert result.indexes == {"sm_90": [cusparse.name], "sm_70": []}, result.indexes


def test_json_outputs_with_modules_validate(cusparse, tmp_path):
    """`check --json` and `check --env --json` on the real library, through the CLI, against
    the shipped schemas: the modules, the note of a yes, and the notes per distribution."""
    import json
    import os
    import subprocess
    import sys

    import jsonschema

    from rocm_build_backend import data

    def validate(verb, out):
        doc = json.loads(out)
        jsonschema.Draft202012Validator(json.loads(data.path(f"schemas/{verb}.schema.json").read_text())).validate(doc)
        return doc

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    one = subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", "check", "--json", "--targets", "sm_90", str(cusparse)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    doc = validate("check", one.stdout)
    assert one.returncode == 0 and doc["exit_code"] == 0
    lib = doc["wheels"][0]["files"]["nvidia/cu13/lib/libcusparse.so.12"]
    assert sum(m["count"] for m in lib["modules"]) == 133
    assert "113 of 133" in doc["wheels"][0]["devices"][0]["reason"]
    site = tmp_path / "site-packages"
    with zipfile.ZipFile(cusparse) as zf:
        zf.extractall(site)
    report = check_environment("python", ["sm_90"], locations=[site])
    doc = validate("check-env", json.dumps(report.to_json()))
    assert doc["distributions"][0]["notes"] and doc["distributions"][0]["status"] == "ok"
