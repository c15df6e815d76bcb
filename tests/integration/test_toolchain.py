"""The toolchain check asks the real compilers installed here (hipcc 5.2, clang-19)."""

import os
import subprocess

import pytest

from rocm_build_backend.errors import ToolchainError
from rocm_build_backend.gpu.targets import parse_targets
from rocm_build_backend.gpu.amd.toolchain import check_targets, find_compiler, require_supported


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    e["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return e


def test_hipcc_found_with_version(env):
    c = find_compiler("auto", env=env)
    assert c is not None and c.name == "hipcc" and c.kind == "hipcc"
    assert c.hip_version and c.hip_version.startswith("5.2")
    assert c.clang_version and c.clang_version.startswith("15")


def test_hipcc_accepts_and_rejects_from_the_compiler_itself(env):
    c = find_compiler("hipcc", env=env)
    verdict = check_targets(c, parse_targets("gfx90a;gfx940;gfx942"), env=env)
    assert verdict["gfx90a"] is None and verdict["gfx940"] is None
    assert "gfx942" in verdict["gfx942"]


def test_rejected_target_is_one_clear_error(env):
    c = find_compiler("hipcc", env=env)
    with pytest.raises(ToolchainError) as exc:
        require_supported(c, parse_targets("gfx90a;gfx942"), env=env)
    msg = exc.value.message
    assert (
        msg.startswith("hipcc (HIP 5.2") and "cannot emit code for gfx942" in msg and "gfx90a" not in msg.split(":")[0]
    )
    assert "LLVM 17" in exc.value.hint


def test_the_hint_names_an_installed_compiler_that_accepts_the_targets(env, tmp_path):
    c = find_compiler("hipcc", env=env)
    with pytest.raises(ToolchainError) as exc:
        require_supported(c, parse_targets("gfx942"), env=env)
    assert "clang++-19 (clang 19" in exc.value.hint and "ROCM_BUILD_BACKEND_COMPILER=clang++-19" in exc.value.hint
    # a PATH with hipcc alone: no other compiler to name, the general way out
    only = tmp_path / "only-hipcc"
    only.mkdir()
    (only / "hipcc").symlink_to(c.path)
    bare = {**env, "PATH": str(only)}
    with pytest.raises(ToolchainError) as exc:
        require_supported(find_compiler("hipcc", env=bare), parse_targets("gfx942"), env=bare)
    assert "installed here" not in exc.value.hint and "install a newer ROCm" in exc.value.hint


def test_plan_shows_the_plan_and_names_the_compiler_that_can(env, tmp_path):
    """Debian's hipcc rejects gfx942: plan still shows what a build gets, and exits 1 naming clang++-19."""
    import json
    import sys

    from helpers import ROOT, validate_json

    argv = [
        sys.executable,
        "-m",
        "rocm_build_backend",
        "plan",
        ROOT / "sample_projects" / "setuptools_hip",
        "--targets",
        "gfx942",
    ]
    text = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, timeout=300)
    assert text.returncode == 1, text.stderr
    assert "PYTORCH_ROCM_ARCH=gfx942" in text.stdout  # the plan is there
    assert (
        text.stderr.splitlines()[-2].startswith("error: hipcc (HIP 5.2")
        and "clang++-19" in text.stderr.splitlines()[-1]
    )
    js = subprocess.run([str(a) for a in [*argv, "--json"]], capture_output=True, text=True, env=env, timeout=300)
    assert js.returncode == 1
    doc = validate_json("plan", js.stdout)
    assert doc["targets"] == ["gfx942"] and doc["compiler"] is None
    assert "clang++-19" in doc["compiler_problem"]["hint"] and json.loads(js.stdout) == doc


def test_clang19_emits_newer_targets(env):
    c = find_compiler("clang-19", env=env)
    verdict = check_targets(c, parse_targets("gfx942;gfx1151;gfx1201;gfx950"), env=env)
    assert verdict["gfx942"] is None and verdict["gfx1151"] is None and verdict["gfx1201"] is None
    assert verdict["gfx950"] and "gfx950" in verdict["gfx950"]


def test_answers_cached_per_compiler(env):
    c = find_compiler("hipcc", env=env)
    calls = []

    def counting_run(argv, **kw):
        calls.append(argv)
        return subprocess.run(argv, **kw)

    check_targets(c, parse_targets("gfx90a"), env=env, run=counting_run)
    assert len(calls) == 1
    calls.clear()
    again = check_targets(c, parse_targets("gfx90a"), env=env, run=counting_run)
    assert calls == [] and again == {"gfx90a": None}


def test_rejections_are_asked_again(env):
    """Only accepted targets are cached: a rejected one is checked again on the next call."""
    c = find_compiler("hipcc", env=env)
    calls = []

    def counting_run(argv, **kw):
        calls.append(argv)
        return subprocess.run(argv, **kw)

    first = check_targets(c, parse_targets("gfx90a;gfx1100"), env=env, run=counting_run)
    assert first["gfx90a"] is None and "gfx1100" in first["gfx1100"]
    calls.clear()
    again = check_targets(c, parse_targets("gfx90a;gfx1100"), env=env, run=counting_run)
    assert again == first
    assert len(calls) == 1 and "--offload-arch=gfx1100" in calls[0] and "--offload-arch=gfx90a" not in calls[0]
