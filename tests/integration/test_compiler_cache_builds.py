"""The compiler cache with real builds: targets A, then B, then A again, each in a fresh copy of
the project (as pip, uv and CI build), through the shim with the cache on. Each wheel holds exactly
its own target (the audit reads it back), and the second build for A is served from the cache.

- hipcc as CMake's C++ compiler, with the project's own --offload-arch options and the user's
  CMAKE_CXX_COMPILER_LAUNCHER=ccache: the shim's targets reach hipcc only through
  HIPCC_COMPILE_FLAGS_APPEND; before CCACHE_EXTRAFILES held them, ccache handed the gfx90a objects
  to the gfx908 build (the audit stopped it: "holds device code for gfx90a only");
- clang-19 through CMake's HIP language: sccache behind the HIP compile launcher;
- nvcc from a torch-style setuptools build without ninja: sccache behind the pinned nvcc (and in
  front of the host compiles through setuptools' spawn).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

import pytest

from helpers import PROJECTS, ROOT, cmake_hip_env, only_wheel, run
from rocm_build_backend.binary.audit import audit_wheel
from rocm_build_backend.builder.cachestats import parse_ccache, server_up
from rocm_build_backend.gpu.nvidia.enforce import toolkit_root

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
needs_ccache = pytest.mark.skipif(shutil.which("ccache") is None, reason="needs ccache")
needs_sccache = pytest.mark.skipif(shutil.which("sccache") is None, reason="needs sccache")


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def build(
    name: str, tmp_path: Path, env: dict[str, str], target: str, n: int, *settings: str, same: bool = False
) -> tuple[list[str], str]:
    """A fresh copy of project ``name`` (``same``: one checkout for every build) built for
    ``target``: the wheel's targets and the log."""
    src = tmp_path / ("src" if same else f"src{n}")
    if not src.exists():
        shutil.copytree(PROJECTS / name, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info"))
    out = tmp_path / f"out{n}"
    argv = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-v",
        "--no-build-isolation",
        "--no-deps",
        "-w",
        out,
        src,
        "-C",
        f"rocm-build-backend.targets={target}",
    ]
    for setting in settings:
        argv += ["-C", setting]
    proc = run(argv, env=dict(env, PYTHONPATH=str(ROOT)))
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    return sorted(audit_wheel(only_wheel(out)).targets), log


def cache_line(log: str) -> str:
    lines = [line for line in log.splitlines() if "compiler cache: sccache:" in line]
    assert lines, log[-3000:]
    return lines[-1]


def ccache_counts(env: dict[str, str]) -> tuple[int, int]:
    counts = parse_ccache(run(["ccache", "--print-stats"], env=env, check=True).stdout)
    assert counts is not None
    return counts.hits, counts.misses


@needs_ccache
@pytest.mark.skipif(shutil.which("hipcc") is None, reason="needs hipcc")
def test_users_ccache_in_front_of_hipcc_keys_on_the_targets(tmp_path, build_env):
    env = dict(
        build_env,
        HIP_PLATFORM="amd",
        CXX="hipcc",
        CMAKE_CXX_COMPILER_LAUNCHER="ccache",
        CCACHE_DIR=str(tmp_path / "ccache"),
    )
    seen = []
    for n, target in enumerate(["gfx90a", "gfx908", "gfx90a"]):
        before = ccache_counts(env)
        targets, _ = build(
            "cmake_hipcc_cxx", tmp_path, env, target, n, "rocm-build-backend.compiler-cache=off", same=True
        )  # one checkout, as in the report
        after = ccache_counts(env)
        assert targets == [target]
        seen.append((after[0] - before[0], after[1] - before[1]))
    assert seen[1][0] == 0 and seen[1][1] >= 2  # gfx908: both sources compiled, nothing from gfx90a
    assert seen[2][0] >= 2  # gfx90a again: from the cache


@needs_sccache
@pytest.mark.skipif(shutil.which("clang++-19") is None, reason="needs clang-19")
def test_sccache_behind_the_hip_launcher(tmp_path, build_env):
    env = dict(
        build_env, **cmake_hip_env(tmp_path), SCCACHE_DIR=str(tmp_path / "sccache"), SCCACHE_SERVER_PORT=free_port()
    )
    lines = []
    for n, target in enumerate(["gfx90a", "gfx908", "gfx90a"]):
        targets, log = build(
            "cmake_hip_hardcoded", tmp_path, env, target, n, "rocm-build-backend.compiler-cache=sccache"
        )
        assert targets == [target]
        lines.append(cache_line(log))
    assert " 0 hits" in lines[1] and "server, started by this build, stopped" in lines[1]
    assert " 0 hits" not in lines[2], lines
    assert not server_up(env)


@needs_sccache
@pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="needs nvcc")
def test_sccache_behind_the_pinned_nvcc(tmp_path, build_env):
    env = dict(build_env, TORCHLIKE_NINJA="0", SCCACHE_DIR=str(tmp_path / "sccache"), SCCACHE_SERVER_PORT=free_port())
    for var in ("CUDA_HOME", "CUDA_PATH", "PYTORCH_NVCC", "CUDACXX"):
        env.pop(var, None)
    root = toolkit_root(env)
    assert root is not None
    env.update(CUDA_HOME=str(root), PATH=str(root / "bin") + os.pathsep + env["PATH"])
    lines = []
    for n, target in enumerate(["sm_80", "sm_90", "sm_80"]):
        targets, log = build("nvcc_torchlike", tmp_path, env, target, n)  # compiler-cache = auto
        assert targets == [target]
        lines.append(cache_line(log))
    assert " 0 hits" in lines[1]
    # sm_80 again, in another copy: the .cpp through spawn and nvcc's device steps from the cache
    # (nvcc's front end runs again: its module id comes from the source's path)
    assert " 0 hits" not in lines[2], lines
    assert not server_up(env)


@needs_ccache
def test_setuptools_compiles_are_cached_through_the_method_setuptools_runs(tmp_path, build_env):
    """Six C extensions through setuptools (the compile pool on): setuptools 80 and later run every
    compile through ``CCompiler.call``, earlier ones through ``spawn``; the cache stands in front of
    the one this setuptools uses (behind the pool, which runs the command it is given), so a rebuild
    after ``rm -rf build`` is served from the cache. (The same checkout: with ``-g`` in Python's
    flags ccache keys on the working folder, by its default ``hash_dir``.)"""
    env = dict(build_env, CCACHE_DIR=str(tmp_path / "ccache"))
    src = tmp_path / "src"
    shutil.copytree(PROJECTS / "many_ext", src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    seen = []
    for n in range(2):
        before = ccache_counts(env)
        shutil.rmtree(src / "build", ignore_errors=True)
        argv = [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            tmp_path / f"out{n}",
            src,
            "-C",
            "rocm-build-backend.compiler-cache=ccache",
        ]
        proc = run(argv, env=dict(env, PYTHONPATH=str(ROOT)))
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        after = ccache_counts(env)
        seen.append((after[0] - before[0], after[1] - before[1]))
    assert seen[0][1] >= 6, seen  # the first build compiled the six sources through ccache
    assert seen[1][0] >= 6, seen  # the second, in another copy, took them from the cache
