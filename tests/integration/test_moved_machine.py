"""The wrong-GPU wheel, end to end: built for gfx90a, reused by pip's cache on a gfx940 machine.

An sdist is served from a local folder; pip builds it through the shim on a "gfx90a machine"
(a fake KFD root) and caches the wheel. On the "gfx940 machine" pip hands the cached wheel back
without building. `check`, `cache list/purge` and the import guard each catch it, and after the
purge pip builds again, for gfx940.
"""

from __future__ import annotations

import json
import sys
import zipfile


from rocm_build_backend.binary.audit import audit_file
from helpers import copy_sample, kfd_root, run


def test_cached_wheel_moved_to_another_gpu(tmp_path, build_env):
    project = copy_sample("setuptools_hip", tmp_path)
    links = tmp_path / "links"
    proc = run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", links, project], env=build_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gfx90a = kfd_root(tmp_path / "mi210", 90010)
    gfx940 = kfd_root(tmp_path / "mi300", 90400)
    cache = tmp_path / "pip-cache"
    env = {**build_env, "ROCM_BUILD_BACKEND_GUARD": "true"}
    env.pop("PIP_NO_CACHE_DIR")

    def install(dest, root):
        return run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--cache-dir",
                cache,
                "--target",
                dest,
                "--no-index",
                "--find-links",
                links,
                "--no-build-isolation",
                "--no-deps",
                "rocm-sample-hip",
            ],
            env={**env, "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(root)},
        )

    def so_targets(dest):
        (so,) = dest.glob("rocm_sample_hip/_kernels*.so")
        return audit_file(so).targets

    first = install(tmp_path / "site-a", gfx90a)
    assert first.returncode == 0, first.stdout + first.stderr
    assert so_targets(tmp_path / "site-a") == ["gfx90a"]
    (cached,) = cache.glob("wheels/**/*.whl")

    # on the gfx940 machine pip builds nothing: it installs the cached gfx90a wheel
    second = install(tmp_path / "site-b", gfx940)
    assert second.returncode == 0, second.stderr
    assert so_targets(tmp_path / "site-b") == ["gfx90a"]
    assert list(cache.glob("wheels/**/*.whl")) == [cached]

    # check
    check = run(
        [sys.executable, "-m", "rocm_build_backend", "check", "--json", "--root", gfx940, cached], env=build_env
    )
    assert check.returncode == 1, check.stdout + check.stderr
    report = json.loads(check.stdout)
    assert "gfx940" in json.dumps(report) and "gfx90a" in json.dumps(report)
    ok = run([sys.executable, "-m", "rocm_build_backend", "check", "--root", gfx90a, cached], env=build_env)
    assert ok.returncode == 0, ok.stdout + ok.stderr

    # the import guard
    imported = run(
        [sys.executable, "-c", "import rocm_sample_hip"],
        cwd=tmp_path,
        env={**build_env, "PYTHONPATH": str(tmp_path / "site-b"), "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(gfx940)},
    )
    assert imported.returncode != 0 and "ImportError" in imported.stderr and "gfx940" in imported.stderr

    # cache list, then purge (nothing without --yes)
    listed = run(
        [sys.executable, "-m", "rocm_build_backend", "cache", "list", "--cache-dir", cache, "--root", gfx940],
        env=build_env,
    )
    assert listed.returncode == 1 and cached.name in listed.stdout, listed.stdout + listed.stderr
    dry = run(
        [sys.executable, "-m", "rocm_build_backend", "cache", "purge", "--cache-dir", cache, "--root", gfx940],
        env=build_env,
    )
    assert cached.exists() and cached.name in dry.stdout
    done = run(
        [sys.executable, "-m", "rocm_build_backend", "cache", "purge", "--yes", "--cache-dir", cache, "--root", gfx940],
        env=build_env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not cached.exists()

    # and now pip builds again, for the GPU it is on
    third = install(tmp_path / "site-c", gfx940)
    assert third.returncode == 0, third.stdout + third.stderr
    assert so_targets(tmp_path / "site-c") == ["gfx940"]
    (rebuilt,) = cache.glob("wheels/**/*.whl")
    with zipfile.ZipFile(rebuilt) as zf:
        stamp = json.loads(zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/rocm_build.json"))))
    assert stamp["requested"] == {"targets": ["gfx940"], "source": "detected:kfd"}
