"""The import guard in installed wheels: pip and uv install a guarded wheel, which then imports on
a GPU it has code for and refuses one it has not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from rocm_build_backend.wheel.guard import guard_files
from rocm_build_backend.wheel.stamp import make_stamp, rewrite_wheel
from helpers import guard_root, valid_stamp


@pytest.fixture(scope="module")
def guarded_wheel(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("guarded")
    proj = base / "proj"
    (proj / "tiny_gpu_pkg").mkdir(parents=True)
    (proj / "pyproject.toml").write_text(
        textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "tiny-gpu-pkg"
        version = "1.0"

        [tool.setuptools]
        packages = ["tiny_gpu_pkg"]
        """)
    )
    (proj / "tiny_gpu_pkg" / "__init__.py").write_text('"""Tiny."""\nfrom __future__ import annotations\nVALUE = 42\n')
    out = base / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "--no-cache-dir",
            "-q",
            "-w",
            str(out),
            str(proj),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    extra, patches = guard_files(names, ["gfx90a"], "tiny-gpu-pkg")
    stamp = valid_stamp(
        make_stamp(
            requested=["gfx90a"], source="settings", audit_files={}, host_gpus=["gfx90a"], toolchain={}, version="0.1.0"
        )
    )
    return rewrite_wheel(wheel, stamp=stamp, new_version="1.0+gfx90a", extra_files=extra, patch_files=patches)


def try_import(python, env_extra, **kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HSA_OVERRIDE", "ROCM_BUILD_BACKEND"))}
    env.update(env_extra)
    return subprocess.run(
        [str(python), "-c", "import tiny_gpu_pkg; print(tiny_gpu_pkg.VALUE)"],
        env=env,
        capture_output=True,
        text=True,
        **kw,
    )


def test_guarded_wheel_installed_with_pip(guarded_wheel, tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "installer",
            "--validate-record",
            "all",
            "--no-compile-bytecode",
            "--destdir",
            str(tmp_path / "root"),
            str(guarded_wheel),
        ],
        check=True,
        capture_output=True,
    )
    target = tmp_path / "target"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--no-cache-dir",
            "-q",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(guarded_wheel),
        ],
        check=True,
        capture_output=True,
    )
    path = {"PYTHONPATH": str(target)}
    gfx90a, gfx940 = guard_root(tmp_path / "a", 90010), guard_root(tmp_path / "b", 90400)

    ok = try_import(sys.executable, {**path, "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(gfx90a)})
    assert ok.returncode == 0 and ok.stdout.strip() == "42", ok.stderr
    bad = try_import(sys.executable, {**path, "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(gfx940)})
    assert bad.returncode != 0
    last = bad.stderr.strip().splitlines()
    assert any(line.startswith("ImportError: tiny-gpu-pkg was built for the GPU targets gfx90a") for line in last)
    assert "gfx940" in bad.stderr
    assert "pip install --no-cache-dir --force-reinstall --no-deps --no-binary tiny-gpu-pkg tiny-gpu-pkg" in bad.stderr
    off = try_import(
        sys.executable, {**path, "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(gfx940), "ROCM_BUILD_BACKEND_GUARD_OFF": "1"}
    )
    assert off.returncode == 0, off.stderr
    override = try_import(
        sys.executable, {**path, "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(gfx940), "HSA_OVERRIDE_GFX_VERSION": "9.0.10"}
    )
    assert override.returncode == 0, override.stderr
    none = try_import(sys.executable, {**path, "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(tmp_path / "no-kfd")})
    assert none.returncode == 0, none.stderr


def test_guarded_wheel_installed_with_uv(guarded_wheel, tmp_path):
    assert shutil.which("uv"), "uv comes with the test extras"
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_NO_CONFIG": "1"}
    venv = tmp_path / "venv"
    subprocess.run(
        ["uv", "venv", "-q", "--python", sys.executable, str(venv)], check=True, env=env, capture_output=True
    )
    python = venv / "bin" / "python"
    subprocess.run(
        ["uv", "pip", "install", "-q", "--offline", "--no-deps", "--python", str(python), str(guarded_wheel)],
        check=True,
        env=env,
        capture_output=True,
    )
    bad = try_import(python, {"ROCM_BUILD_BACKEND_SYSFS_ROOT": str(guard_root(tmp_path / "b", 90400))})
    assert bad.returncode != 0 and "ImportError" in bad.stderr and "gfx940" in bad.stderr
    ok = try_import(python, {"ROCM_BUILD_BACKEND_SYSFS_ROOT": str(guard_root(tmp_path / "a", 90010))})
    assert ok.returncode == 0, ok.stderr
