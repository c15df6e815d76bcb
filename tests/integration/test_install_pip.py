"""`install` with real pip and uv: a wheel that does not load is refused, one that loads is
installed, the cache trap (an sdist built for gfx90a, handed back by pip's wheel cache on a
gfx940 machine) cannot happen with pip (the sdist is built through the shim for this machine) and
is caught and rebuilt with uv, and an index wheel that does not load is rebuilt from its sdist.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from helpers import copy_sample, kfd_root, make_wheel, run, TESTS

BIN = TESTS / "data" / "binaries"


def _links_with(tmp_path: Path, wheel_targets: str) -> Path:
    data = {"gfx90a": "amdgpu_gfx90a_xnack+_cov4.co", "gfx942": "amdgpu_gfx942_cov5.hsaco"}[wheel_targets]
    links = tmp_path / "links"
    make_wheel(links, "demo-gpu", "1.0", members={"demo_gpu/k.co": (BIN / data).read_bytes()}, stamp=False)
    return links


def _install(tmp_path: Path, *args, targets: str = "gfx942"):
    env_args = [
        "--no-index",
        "--find-links",
        str(tmp_path / "links"),
        "--no-cache-dir",
        "--target",
        str(tmp_path / "site"),
    ]
    return run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "install",
            "--targets",
            targets,
            *args,
            "--",
            *env_args,
            "demo-gpu",
        ]
    )


def test_a_wheel_without_sdist_that_does_not_load_is_refused(tmp_path):
    _links_with(tmp_path, "gfx90a")
    proc = _install(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "refused" in proc.stdout and "no sdist" in proc.stdout and "gfx90a" in proc.stdout
    assert "nothing installed" in proc.stdout
    assert not (tmp_path / "site").exists()


def test_a_wheel_that_loads_is_installed(tmp_path):
    _links_with(tmp_path, "gfx942")
    dry = _install(tmp_path, "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "demo-gpu 1.0" in dry.stdout and "index" in dry.stdout and "yes" in dry.stdout
    assert not (tmp_path / "site").exists()
    done = _install(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "demo_gpu" / "k.co").is_file()


def test_install_catches_the_cached_wheel_and_rebuilds_it(tmp_path, build_env):
    from rocm_build_backend.binary.audit import audit_file

    project = copy_sample("setuptools_hip", tmp_path)
    links = tmp_path / "links"
    proc = run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", links, project], env=build_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gfx90a = kfd_root(tmp_path / "mi210", 90010)
    gfx940 = kfd_root(tmp_path / "mi300", 90400)
    cache = tmp_path / "pip-cache"
    env = dict(build_env)
    env.pop("PIP_NO_CACHE_DIR")
    pip_args = ["--cache-dir", str(cache), "--no-index", "--find-links", str(links), "--no-build-isolation"]

    # on the gfx90a machine pip builds the sdist through the shim and caches the wheel
    first = run(
        [sys.executable, "-m", "pip", "install", *pip_args, "--target", tmp_path / "site-a", "rocm-sample-hip"],
        env={**env, "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(gfx90a)},
    )
    assert first.returncode == 0, first.stdout + first.stderr
    (cached,) = cache.glob("wheels/**/*.whl")

    # on the gfx940 machine: a dry run builds nothing, so it cannot take the sdist (nor the
    # build of it in pip's cache) and says so
    cli = [sys.executable, "-m", "rocm_build_backend", "install", "--root", gfx940]
    dry = run([*cli, "--dry-run", "--", *pip_args, "--target", tmp_path / "site-b", "rocm-sample-hip"], env=env)
    assert dry.returncode == 3, dry.stdout + dry.stderr
    assert "dry run builds nothing" in dry.stderr and "rocm-sample-hip" in dry.stderr
    assert not (tmp_path / "site-b").exists()
    assert list(cache.glob("wheels/**/*.whl")) == [cached]

    # install builds the sdist pip would build through the shim for this machine: pip's cached
    # gfx90a build of it is never taken
    done = run([*cli, "--", *pip_args, "--target", tmp_path / "site-b", "rocm-sample-hip"], env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "note: rocm-sample-hip 0.1.0 built from its sdist through rocm-build-backend" in done.stdout
    row = next(line for line in done.stdout.splitlines() if line.startswith("rocm-sample-hip"))
    assert row.split()[2:] == ["built", "gfx940", "yes"], done.stdout
    (so,) = (tmp_path / "site-b").glob("rocm_sample_hip/_kernels*.so")
    assert audit_file(so).targets == ["gfx940"]
    assert list(cache.glob("wheels/**/*.whl")) == [cached]

    # an index with the gfx90a wheel beside the sdist: pip takes the wheel, which does not load
    # here; it is built again from the sdist (pip download) through the shim
    shutil.copy(cached, links)
    again = run([*cli, "--", *pip_args, "--target", tmp_path / "site-d", "rocm-sample-hip"], env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "the wheel from the index held gfx90a; rebuilt from its sdist" in again.stdout
    row = next(line for line in again.stdout.splitlines() if line.startswith("rocm-sample-hip"))
    assert row.split()[2:] == ["rebuilt", "gfx940", "yes"], again.stdout
    (so,) = (tmp_path / "site-d").glob("rocm_sample_hip/_kernels*.so")
    assert audit_file(so).targets == ["gfx940"]
    # and plain pip on the same machine still installs the gfx90a wheel: the trap is pip's
    plain = run(
        [sys.executable, "-m", "pip", "install", *pip_args, "--target", tmp_path / "site-c", "rocm-sample-hip"],
        env={**env, "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(gfx940)},
    )
    assert plain.returncode == 0
    (so,) = (tmp_path / "site-c").glob("rocm_sample_hip/_kernels*.so")
    assert audit_file(so).targets == ["gfx90a"]


def test_install_with_uv_catches_the_cached_build_and_rebuilds_it(tmp_path, build_env):
    import shutil

    from rocm_build_backend.binary.audit import audit_file

    if not shutil.which("uv"):
        pytest.skip("uv is not installed")
    project = copy_sample("setuptools_hip", tmp_path)
    links = tmp_path / "links"
    proc = run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", links, project], env=build_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gfx90a = kfd_root(tmp_path / "mi210", 90010)
    gfx940 = kfd_root(tmp_path / "mi300", 90400)
    uv_args = [
        "--cache-dir",
        str(tmp_path / "uv-cache"),
        "--no-index",
        "--find-links",
        str(links),
        "--no-build-isolation",
    ]

    def uv_install(site: Path, root: Path):
        return run(
            ["uv", "pip", "install", "--python", sys.executable, *uv_args, "--target", site, "rocm-sample-hip"],
            env={**build_env, "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(root)},
        )

    def so_targets(site: Path) -> list[str]:
        (so,) = site.glob("rocm_sample_hip/_kernels*.so")
        return audit_file(so).targets

    assert uv_install(tmp_path / "site-a", gfx90a).returncode == 0
    assert so_targets(tmp_path / "site-a") == ["gfx90a"]
    # uv hands its cached gfx90a build back on the gfx940 machine
    assert uv_install(tmp_path / "site-b", gfx940).returncode == 0
    assert so_targets(tmp_path / "site-b") == ["gfx90a"]

    cli = [sys.executable, "-m", "rocm_build_backend", "install", "--tool", "uv", "--root", gfx940, "--"]
    done = run([*cli, *uv_args, "--target", tmp_path / "site-c", "rocm-sample-hip"], env=build_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "held gfx90a; rebuilt from its sdist" in done.stdout
    assert so_targets(tmp_path / "site-c") == ["gfx940"]


def test_install_reports_its_progress(tmp_path):
    """Each long step of an install says so (shown on a terminal, unless -q)."""
    from rocm_build_backend import progress
    from rocm_build_backend.gpu.targets import parse_targets
    from rocm_build_backend.wheel.install.run import install_inspected

    _links_with(tmp_path, "gfx942")
    seen: list[tuple[str, int, int]] = []
    (tmp_path / "work").mkdir()
    progress.set_reporter(lambda what, done, total: seen.append((what, done, total)))
    try:
        result = install_inspected(
            [
                "--no-index",
                "--find-links",
                str(tmp_path / "links"),
                "--no-cache-dir",
                "--target",
                str(tmp_path / "site"),
                "demo-gpu",
            ],
            devices=parse_targets("gfx942"),
            work_dir=tmp_path / "work",
        )
    finally:
        progress.set_reporter(None)
    assert result.exit_code == 0 and (tmp_path / "site" / "demo_gpu" / "k.co").is_file()
    whats = [w for w, *_ in seen]
    assert whats[:3] == [
        "collecting wheels with pip",
        "checking wheels against this machine's GPUs",
        "installing with pip",
    ]
    assert set(whats[3:]) == {"checking distributions"}  # what was installed, read back
