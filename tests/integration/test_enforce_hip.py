"""HIP enforcement rewrites the command line: shapes that appending flags cannot hold, built through
the shim with a real frontend and the real compilers on this machine without a GPU: hipcc (HIP 5.2,
gfx90a) with ``--offload-arch=native``, a ``-fgpu-rdc`` link step that lists its own target, and a
response file naming one; CMake's HIP language with clang-19 (gfx942) with ``native`` and with a
``-fgpu-rdc`` link that lists its own target. Each wheel is read back with the audit and its
stamp's enforcement record checked. (An option that may name a target unread, in front of
clang-19: tests/unit/test_hip_launcher.py.)"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from helpers import PROJECTS, ROOT, cmake_hip_env, only_wheel, run
from rocm_build_backend.binary.audit import audit_wheel
from rocm_build_backend.wheel.stamp import read_stamp

needs_hipcc = pytest.mark.skipif(shutil.which("hipcc") is None, reason="needs hipcc")


def per_file(wheel: Path) -> dict[str, list[str]]:
    return {f.path.rsplit("/", 1)[-1].split(".")[0]: sorted(f.targets) for f in audit_wheel(wheel).files if f.targets}


def build(name: str, tmp_path: Path, env: dict[str, str], *settings: str, ok: bool = True) -> tuple[Path | None, str]:
    src = tmp_path / name
    shutil.copytree(PROJECTS / name, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info"))
    argv = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-v",
        "--no-build-isolation",
        "--no-deps",
        "-w",
        tmp_path / "out",
        src,
    ]
    for setting in settings:
        argv += ["-C", setting]
    proc = run(argv, env={**env, "PYTHONPATH": str(ROOT)}, cwd=src)  # this tree's package
    log = proc.stdout + proc.stderr
    assert (proc.returncode == 0) == ok, log[-4000:]
    return (only_wheel(tmp_path / "out") if ok else None), log


@needs_hipcc
def test_hipcc_shapes_hold_exactly_the_target(tmp_path, build_env):
    """hipcc passes native on to clang (which fails here before an appended reset applies), makes
    the device code of a -fgpu-rdc build at the link, where HIPCC_COMPILE_FLAGS_APPEND is not put,
    and copies a response file's words after the appended flags: each is rewritten to gfx90a."""
    build_env["HIP_SHAPES"] = "native,rdc,rsp"
    wheel, log = build("hipcc_shapes", tmp_path, build_env, "rocm-build-backend.targets=gfx90a")
    assert per_file(wheel) == {"_native": ["gfx90a"], "_rdc": ["gfx90a"], "_rsp": ["gfx90a"]}
    enforced = read_stamp(wheel)["enforced"]
    # native's compile, rdc's compile and its link, rsp's compile; native is no target to drop
    assert (enforced["compiles"], enforced["rewritten"], enforced["dropped"]) == (4, 4, ["gfx908"]), enforced


@pytest.mark.parametrize(
    "define, steps",
    [("KERNELS_ARCH_OPTION=--offload-arch=native", 1), ("KERNELS_RDC=ON", 2)],
    ids=["native", "rdc-link"],
)
def test_clang_cmake_native_and_rdc_link(tmp_path, build_env, define, steps):
    """CMake's HIP language with clang-19, targets gfx942: a target option of ``native`` in the
    target's own compile options (after every flag CMake gives), rewritten by the launcher; a
    -fgpu-rdc build whose link lists gfx908 (clang-19 would make a gfx908 code object there from
    gfx942 objects), rewritten by our HIPCXX. (A response file in front of clang-19:
    tests/unit/test_hip_launcher.py.)"""
    pytest.importorskip("scikit_build_core")
    if shutil.which("clang++-19") is None or shutil.which("cmake") is None:
        pytest.skip("needs clang++-19 and cmake")
    build_env.update(cmake_hip_env(tmp_path))
    wheel, _ = build(
        "cmake_hip_hardcoded",
        tmp_path,
        build_env,
        "rocm-build-backend.targets=gfx942",
        "rocm-build-backend.compiler=clang++-19",
        f"cmake.define.{define}",
    )
    assert per_file(wheel) == {"libkernels": ["gfx942"]}
    enforced = read_stamp(wheel)["enforced"]
    dropped = ["gfx906"] if steps == 1 else ["gfx906", "gfx908"]
    assert (enforced["compiles"], enforced["rewritten"], enforced["dropped"]) == (steps, steps, dropped), enforced
