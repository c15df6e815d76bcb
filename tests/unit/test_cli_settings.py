"""Verbs honour what the others honour: `check` and `cache` read the build's detection settings
(`ROCM_BUILD_BACKEND_SYSFS_ROOT`, `ROCM_BUILD_BACKEND_TARGETS`), the `cache list` purge hint
repeats the list's own options, and `plan` stops where the build would on a backend it
cannot import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import ROOT, TESTS, kfd_root, make_wheel

BIN = TESTS / "data" / "binaries"


def cli(*argv, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_BUILD_BACKEND_")}
    base["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", *map(str, argv)],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def gfx90a_wheel(folder: Path) -> Path:
    return make_wheel(
        folder,
        "demo-gpu",
        "1.0",
        stamp=False,
        members={"demo_gpu/k.co": (BIN / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes()},
    )


def test_check_reads_the_sysfs_root_a_build_reads(tmp_path):
    wheel = gfx90a_wheel(tmp_path / "w")
    mi300 = kfd_root(tmp_path / "mi300", 90402)
    proc = cli("check", wheel, env={"ROCM_BUILD_BACKEND_SYSFS_ROOT": str(mi300)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0] == "devices: gfx942", proc.stdout
    mi210 = kfd_root(tmp_path / "mi210", 90010)
    assert cli("check", wheel, env={"ROCM_BUILD_BACKEND_SYSFS_ROOT": str(mi210)}).returncode == 0
    # --root wins over the variable, as a command-line option does
    assert cli("check", wheel, "--root", mi210, env={"ROCM_BUILD_BACKEND_SYSFS_ROOT": str(mi300)}).returncode == 0
    bad = cli("check", wheel, env={"ROCM_BUILD_BACKEND_SYSFS_ROOT": str(tmp_path / "nowhere")})
    assert bad.returncode == 2 and bad.stderr.startswith("error: ROCM_BUILD_BACKEND_SYSFS_ROOT="), bad.stderr


def test_check_reads_the_targets_a_build_reads(tmp_path):
    wheel = gfx90a_wheel(tmp_path / "w")
    proc = cli("check", wheel, env={"ROCM_BUILD_BACKEND_TARGETS": "gfx942"})
    assert proc.returncode == 1 and "targets from ROCM_BUILD_BACKEND_TARGETS=gfx942" in proc.stdout, proc.stdout
    assert cli("check", wheel, env={"ROCM_BUILD_BACKEND_TARGETS": "gfx90a"}).returncode == 0
    assert cli("check", wheel, "--targets", "gfx90a", env={"ROCM_BUILD_BACKEND_TARGETS": "gfx942"}).returncode == 0
    # auto is the build's default: this machine's GPUs (none here)
    assert (
        cli(
            "check",
            wheel,
            env={
                "ROCM_BUILD_BACKEND_TARGETS": "auto",
                "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(kfd_root(tmp_path / "a", 90010)),
            },
        ).returncode
        == 0
    )


def test_cache_list_hint_keeps_the_targets(tmp_path):
    cache = tmp_path / "pip"
    entry = cache / "wheels/6e/b3/95/c1738e0c8b4c7785874418e069ec25b87d2564c54607a02b23"
    gfx90a_wheel(entry)
    (cache / "http-v2").mkdir()
    proc = cli("cache", "list", "--tool", "pip", "--cache-dir", cache, "--targets", "gfx942")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    hint = proc.stdout.splitlines()[-1]
    assert hint.endswith(f"rocm-build-backend cache purge --targets gfx942 --tool pip --cache-dir {cache} --yes"), hint
    # the hint, run as printed, removes exactly that wheel
    argv = hint.split("remove them with: rocm-build-backend ", 1)[1].split()
    done = cli(*argv)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not list(cache.glob("wheels/**/*.whl"))


def test_plan_stops_on_a_backend_it_cannot_import(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["rocm-build-backend", "no-such-backend"]\nbuild-backend = "rocm_build_backend"\n'
        '[project]\nname = "demo"\nversion = "1.0"\n'
        '[tool.rocm-build-backend]\nbackend = "no_such_backend.build"\ntargets = "gfx90a"\ncompiler-check = false\n'
    )
    proc = cli("plan", proj)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: cannot import the wrapped build backend 'no_such_backend.build'")
    assert "hint: " in proc.stderr and proc.stdout == ""
    assert cli("plan", "--json", proj).returncode == 2
