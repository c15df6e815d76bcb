"""The compiler-cache setting: which cache, where it runs (behind the pinned programs, in front of
the rest), the targets in its key, and its counters read from the real programs' statistics."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from helpers import validate_json
from rocm_build_backend.builder.cache import (
    PROGRAM_VAR,
    TORCH_WRAPPER,
    CacheChoice,
    cache_variables,
    choose_cache,
    key_variables,
    user_cache,
)
from rocm_build_backend.builder.cachespawn import cached_command, pinned_under
from rocm_build_backend.builder.cachestats import parse_ccache, parse_sccache, server_up
from rocm_build_backend.builder.plan import make_plan
from rocm_build_backend.builder.settings import load_settings
from rocm_build_backend.errors import ConfigError
from rocm_build_backend.gpu.targets import parse_targets


def programs(folder: Path, *names: str) -> str:
    folder.mkdir(exist_ok=True)
    for name in names:
        path = folder / name
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    return str(folder)


def test_auto_takes_sccache_then_ccache_from_path(tmp_path):
    both = programs(tmp_path / "both", "sccache", "ccache")
    only = programs(tmp_path / "only", "ccache")
    assert choose_cache("auto", {"PATH": both}).kind == "sccache"
    assert choose_cache("auto", {"PATH": only}).kind == "ccache"
    assert choose_cache("auto", {"PATH": str(tmp_path)}).kind is None
    assert choose_cache("off", {"PATH": both}).kind is None
    assert choose_cache("ccache", {"PATH": both}).program == str(tmp_path / "both" / "ccache")


def test_auto_takes_the_cache_the_user_already_runs(tmp_path):
    both = programs(tmp_path / "both", "sccache", "ccache")
    got = choose_cache("auto", {"PATH": both, "CMAKE_CXX_COMPILER_LAUNCHER": "ccache"})
    assert got.kind == "ccache" and "user's ccache" in got.why


def test_a_cache_asked_for_by_name_must_be_there(tmp_path):
    with pytest.raises(ConfigError) as exc:
        choose_cache("sccache", {"PATH": str(tmp_path)})
    assert "no sccache on PATH" in str(exc.value.lines())


def test_the_setting_in_every_channel():
    assert load_settings({"tool": {"rocm-build-backend": {"compiler-cache": "ccache"}}}).compiler_cache == "ccache"
    assert load_settings(env={"ROCM_BUILD_BACKEND_COMPILER_CACHE": "off"}).compiler_cache == "off"
    assert load_settings().compiler_cache == "auto"
    with pytest.raises(ConfigError):
        load_settings(config_settings={"rocm-build-backend.compiler-cache": "distcc"})
    # the variable the pinned programs read is not a setting
    assert load_settings(env={PROGRAM_VAR: "/usr/bin/ccache"}).compiler_cache == "auto"


def test_the_plan_says_which_cache(tmp_path):
    choice = choose_cache("auto", {"PATH": programs(tmp_path / "b", "sccache")})
    plan = make_plan(parse_targets("gfx90a"), "settings", load_settings(), {}, backend_kind="setuptools", cache=choice)
    assert plan.to_json()["compiler_cache"]["kind"] == "sccache"
    assert any(line.startswith("compiler cache: sccache ") for line in plan.summary())
    doc = {"schema_version": 1, **plan.to_json(), "compiler": None, "compiler_problem": None, "stale": []}
    validate_json("plan", __import__("json").dumps(doc))


def test_a_cache_that_cannot_store_is_never_chosen(tmp_path):
    """XDG_CACHE_HOME naming a file: sccache would fail every compile. auto says so and uses none;
    naming the cache is an error; its own folder variable or a remote store makes it usable."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file")
    path = programs(tmp_path / "b", "sccache")
    env = {"PATH": path, "XDG_CACHE_HOME": str(blocker), "HOME": str(tmp_path)}
    got = choose_cache("auto", env)
    assert got.kind is None and "sccache's folder" in got.why and "is not a folder" in got.why
    with pytest.raises(ConfigError, match="sccache's folder"):
        choose_cache("sccache", env)
    assert choose_cache("auto", {**env, "SCCACHE_DIR": str(tmp_path / "own")}).kind == "sccache"
    assert choose_cache("auto", {**env, "SCCACHE_BUCKET": "team-cache"}).kind == "sccache"


def test_targets_enter_every_caches_key(tmp_path):
    got = key_variables(["gfx908"], {"CCACHE_EXTRAFILES": "/x/own", "SCCACHE_C_CUSTOM_CACHE_BUSTER": "mine"}, tmp_path)
    files = got["CCACHE_EXTRAFILES"].split(os.pathsep)
    assert files[0] == "/x/own" and "gfx908" in Path(files[1]).read_text()
    assert got["SCCACHE_C_CUSTOM_CACHE_BUSTER"].startswith("mine ") and "gfx908" in got["SCCACHE_C_CUSTOM_CACHE_BUSTER"]
    other = key_variables(["gfx90a"], {}, tmp_path / ".." / tmp_path.name)
    assert other["SCCACHE_C_CUSTOM_CACHE_BUSTER"] != got["SCCACHE_C_CUSTOM_CACHE_BUSTER"].removeprefix("mine ")


def test_the_cache_goes_behind_the_pinned_programs(tmp_path):
    pinned_dir = tmp_path / "enforce"
    pinned = pinned_under(str(pinned_dir))
    hip = str(pinned_dir / "amd-1" / "hip-launcher")
    nvcc = str(pinned_dir / "nvidia-1" / "cuda" / "bin" / "nvcc")
    env = {
        "CMAKE_HIP_COMPILER_LAUNCHER": f"{hip};ccache",
        "CUDACXX": nvcc,
        "CMAKE_CUDA_COMPILER_LAUNCHER": "ccache",
        "CMAKE_CXX_COMPILER_LAUNCHER": "ccache",
        "PYTORCH_NVCC": f"ccache {nvcc}",
    }
    got = cache_variables(CacheChoice("auto", "sccache", "/bin/sccache", "x"), env, pinned, "/src")
    assert got[PROGRAM_VAR] == "/bin/sccache"
    assert got["CMAKE_HIP_COMPILER_LAUNCHER"] == hip  # the launcher runs the cache itself
    assert got["CMAKE_CUDA_COMPILER_LAUNCHER"] == ""  # unset: the pinned nvcc runs it
    assert got["CMAKE_CXX_COMPILER_LAUNCHER"] == "/bin/sccache"  # no pinned program there: in front
    assert got["CMAKE_C_COMPILER_LAUNCHER"] == "/bin/sccache"
    assert got["PYTORCH_NVCC"] == nvcc
    assert got["SCCACHE_BASEDIRS"] == "/src"
    # the shim runs no cache: the user's is still moved behind the pinned programs
    off = cache_variables(CacheChoice(), env, pinned)
    assert off[PROGRAM_VAR] == "ccache" and off["CMAKE_CUDA_COMPILER_LAUNCHER"] == ""
    assert "CMAKE_CXX_COMPILER_LAUNCHER" not in off  # in front of a compiler that is not pinned: as it was
    assert user_cache({"CC": "ccache gcc"}) == "ccache"


def test_torchs_own_cache_wrapper_stays_out_of_the_pinned_nvcc_and_of_off(tmp_path):
    pinned = pinned_under(str(tmp_path / "enforce"))
    nvcc = str(tmp_path / "enforce" / "nvidia-1" / "cuda" / "bin" / "nvcc")
    sccache = CacheChoice("auto", "sccache", "/bin/sccache", "x")
    assert cache_variables(sccache, {"PYTORCH_NVCC": nvcc}, pinned)[TORCH_WRAPPER] == "1"
    assert cache_variables(CacheChoice(), {}, pinned)[TORCH_WRAPPER] == "1"  # compiler-cache = "off"
    assert TORCH_WRAPPER not in cache_variables(sccache, {}, pinned)  # no pinned nvcc: torch's may stand
    assert TORCH_WRAPPER not in cache_variables(CacheChoice(), {TORCH_WRAPPER: "0"}, pinned)  # the user's value


def test_sccache_is_not_put_in_front_of_hipcc_compiling_cpp_files():
    sccache = CacheChoice("auto", "sccache", "/bin/sccache", "x")
    got = cache_variables(sccache, {"CXX": "hipcc"}, lambda p: False)
    assert "CMAKE_CXX_COMPILER_LAUNCHER" not in got and got["CMAKE_C_COMPILER_LAUNCHER"] == "/bin/sccache"
    assert cached_command(["hipcc", "-c", "a.cpp"], sccache, lambda p: False) == ["hipcc", "-c", "a.cpp"]
    assert cached_command(["hipcc", "-c", "a.hip"], sccache, lambda p: False)[0] == "/bin/sccache"


def test_setuptools_compiles_go_through_the_cache():
    ccache = CacheChoice("auto", "ccache", "/bin/ccache", "x")
    pinned = pinned_under("/cache/enforce")
    assert cached_command(["gcc", "-fPIC", "-c", "a.c", "-o", "a.o"], ccache, pinned)[:2] == ["/bin/ccache", "gcc"]
    for cmd in (
        ["gcc", "-shared", "a.o", "-o", "a.so"],  # a link
        ["ccache", "gcc", "-c", "a.c"],  # CC="ccache gcc"
        ["/cache/enforce/nvidia-1/cuda/bin/nvcc", "-c", "k.cu"],
    ):  # the pinned nvcc runs it itself
        assert cached_command(cmd, ccache, pinned) == cmd


@pytest.mark.skipif(
    shutil.which("sccache") is None or shutil.which("ccache") is None, reason="needs sccache and ccache"
)
def test_counters_from_the_real_programs_statistics(tmp_path):
    from rocm_build_backend.gpu.programs import run_capped

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = dict(os.environ, SCCACHE_DIR=str(tmp_path / "s"), SCCACHE_SERVER_PORT=port, CCACHE_DIR=str(tmp_path / "c"))
    assert not server_up(env)
    try:
        subprocess.run(["sccache", "--start-server"], env=env, check=True, capture_output=True)
        assert server_up(env)
        out = run_capped(["sccache", "--show-stats", "--stats-format=json"], env=env, timeout=60)
        assert parse_sccache(out.stdout.decode()) is not None
    finally:
        run_capped(["sccache", "--stop-server"], env=env, timeout=60)
    assert not server_up(env)
    ccache = run_capped(["ccache", "--print-stats"], env=env, timeout=60)
    assert parse_ccache(ccache.stdout.decode()) is not None
    assert parse_sccache("not json") is None and parse_ccache("x\ty") is None


@pytest.mark.skipif(shutil.which("sccache") is None, reason="needs sccache")
def test_a_server_the_user_runs_stays_one_the_build_started_stops(tmp_path, capsys):
    from rocm_build_backend.builder.cachestats import watched

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = dict(os.environ, SCCACHE_DIR=str(tmp_path / "s"), SCCACHE_SERVER_PORT=port)
    choice = choose_cache("sccache", env)
    try:
        subprocess.run(["sccache", "--start-server"], env=env, check=True, capture_output=True)
        with watched(choice, env):
            pass
        assert server_up(env)  # the user's: used as it is, left running
        assert "its server, started by this build, stopped" not in capsys.readouterr().err
        subprocess.run(["sccache", "--stop-server"], env=env, capture_output=True)
        assert not server_up(env)
        with watched(choice, env):  # a compile of the build starts one
            subprocess.run(["sccache", "--start-server"], env=env, check=True, capture_output=True)
        assert not server_up(env)
        assert "its server, started by this build, stopped" in capsys.readouterr().err
    finally:
        subprocess.run(["sccache", "--stop-server"], env=env, capture_output=True)
