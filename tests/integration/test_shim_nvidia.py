"""NVIDIA builds through the shim with a real frontend and a real nvcc (no GPU needed).

Every build's proof is the binary (the wheel's device code, read by the audit) and the stamp
(valid under the shipped schema: ``only_wheel`` checks it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rocm_build_backend.binary.audit import audit_wheel
from rocm_build_backend.wheel.stamp import read_stamp
from helpers import copy_sample, error_lines, nvml, only_wheel, pip_wheel

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"

pytestmark = [
    pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="needs nvcc"),
    pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake"),
]


@pytest.fixture
def cuda_env(build_env):
    pytest.importorskip("scikit_build_core")
    build_env["PATH"] = str(Path(NVCC).parent) + os.pathsep + build_env.get("PATH", "")
    return build_env


def device_targets(wheel: Path) -> list[str]:
    return sorted({t for f in audit_wheel(wheel).files for t in f.targets})


@pytest.mark.parametrize(
    "settings, env, code, source",
    [
        (
            ["rocm-build-backend.targets=sm_80;sm_90", "rocm-build-backend.guard=true"],
            {},
            ["sm_80", "sm_90"],
            "settings",
        ),
        ([], {"TORCH_CUDA_ARCH_LIST": "9.0+PTX"}, ["compute_90", "sm_90"], "TORCH_CUDA_ARCH_LIST"),
    ],
)
def test_skbuild_cuda_through_the_shim(tmp_path, cuda_env, settings, env, code, source):
    project = copy_sample("skbuild_cuda", tmp_path)
    cuda_env.update(env)
    proc = pip_wheel(project, tmp_path / "out", cuda_env, *settings)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheel = only_wheel(tmp_path / "out")
    assert device_targets(wheel) == code
    stamp = read_stamp(wheel)
    assert sorted(stamp["requested"]["targets"]) == code and stamp["requested"]["source"] == source
    assert sorted(stamp["audit"]["targets"]) == code
    assert stamp["toolchain"]["compiler"] == "nvcc" and stamp["toolchain"]["version"].startswith("1")
    if "rocm-build-backend.guard=true" in settings:
        assert_guard_refuses_other_gpus(wheel)


def assert_guard_refuses_other_gpus(wheel: Path) -> None:
    """The wheel's guard, run with NVML answering sm_86 (loads sm_80 code) and sm_75 (refused)."""
    import ast
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        member = next(n for n in zf.namelist() if n.endswith("/_rocm_build_guard.py"))
        source = zf.read(member).decode()
    tree = ast.parse(source)
    tree.body = tree.body[:-1]  # without the import-time check()
    ns: dict = {"__name__": "pkg._rocm_build_guard"}
    exec(compile(tree, member, "exec"), ns)
    assert ns["TARGETS"] == ("sm_80", "sm_90")
    ns["check"]("/nonexistent", {}, nvml("8.6"))
    with pytest.raises(ImportError, match="sm_75"):
        ns["check"]("/nonexistent", {}, nvml("7.5"))


def test_target_nvcc_cannot_build_is_refused_before_compiling(tmp_path, cuda_env):
    project = copy_sample("skbuild_cuda", tmp_path)
    proc = pip_wheel(project, tmp_path / "out", cuda_env, "rocm-build-backend.targets=sm_60")
    assert proc.returncode != 0
    errors = error_lines(proc)
    assert any("sm_60" in e and "CUDA" in e for e in errors), errors
    assert not list(tmp_path.glob("out/*.whl"))
