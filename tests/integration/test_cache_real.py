"""``cache list`` / ``cache purge``: real pip and uv caches in temporary folders.

A small sdist with an in-tree backend builds "for" the GPU named in FAKE_GPU_BUILD (it ships
real device code from tests/data/index/ and a stamp). It is installed with pip and uv on a
"gfx90a machine", whose caches keep the built wheel; on a "gfx942 machine" (a fake KFD root)
pip hands back the gfx90a wheel, and ``cache`` finds and removes exactly the misfits, after
which both tools build again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from rocm_build_backend.wheel.cache import run as K
from rocm_build_backend.wheel.check.wheels import devices_from_detection
from helpers import gpu_demo_project, pure_wheel, TESTS

BIN = TESTS / "data" / "index"


def clean_env(**extra) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "UV_")) and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        UV_NO_CONFIG="1",
        UV_PYTHON_DOWNLOADS="never",
        UV_OFFLINE="1",
    )
    env.update(extra)
    return env


def run(cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout}\n{proc.stderr}"
    return proc


def kfd_root(tmp: Path, version: int) -> Path:
    nodes = tmp / "root/sys/class/kfd/kfd/topology/nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0/properties").write_text("cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n")
    (nodes / "1").mkdir()
    (nodes / "1/properties").write_text(
        f"cpu_cores_count 0\nsimd_count 608\nsimd_per_cu 2\ngfx_target_version {version}\n"
    )
    return tmp / "root"


def pip_install(cache: Path, dest: Path, links: Path, build: str) -> str:
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--isolated",
            "--cache-dir",
            cache,
            "--target",
            dest,
            "--no-index",
            "--find-links",
            links,
            "--no-build-isolation",
            "gpu-demo",
        ],
        env=clean_env(FAKE_GPU_BUILD=build),
    )
    return (dest / "gpu_demo/__init__.py").read_text()


def uv_install(cache: Path, venv: Path, what: Path, build: str, *extra) -> str:
    if not venv.exists():
        run([sys.executable, "-m", "venv", "--without-pip", venv])
    py = venv / "bin/python"
    run(
        [shutil.which("uv"), "pip", "install", "--no-config", "--cache-dir", cache, "--python", py, *extra, what],
        env=clean_env(FAKE_GPU_BUILD=build),
    )
    (site,) = venv.glob("lib/python*/site-packages")
    init = site / "gpu_demo/__init__.py"
    return init.read_text() if init.exists() else ""


def test_real_caches_moved_to_another_gpu(tmp_path):
    proj, backend = gpu_demo_project(tmp_path)
    links = tmp_path / "links"
    links.mkdir()
    backend.build_sdist(str(links))
    sdist = links / "gpu_demo-1.0.tar.gz"
    plain = pure_wheel(tmp_path / "plainwheels")
    fat_dir = tmp_path / "fat"
    fat_dir.mkdir()
    os.environ["FAKE_GPU_BUILD"] = "fat"
    try:
        fat = fat_dir / backend.build_wheel(str(fat_dir))
    finally:
        del os.environ["FAKE_GPU_BUILD"]
    pipc, uvc = tmp_path / "pipc", tmp_path / "uvc"

    # on the gfx90a machine: both tools build and keep the gfx90a wheel
    assert "gfx90a" in pip_install(pipc, tmp_path / "t1", links, "gfx90a")
    assert "gfx90a" in uv_install(uvc, tmp_path / "v1", sdist, "gfx90a")
    uv_install(uvc, tmp_path / "v2", plain, "gfx90a")
    uv_install(uvc, tmp_path / "v3", fat, "gfx90a")

    # "moved" to a gfx942 machine: pip hands back the cached gfx90a wheel
    assert "gfx90a" in pip_install(pipc, tmp_path / "t2", links, "fat")
    from rocm_build_backend.gpu.amd.detect import detect

    devices, notes = devices_from_detection(detect(root=kfd_root(tmp_path, 90402), env={}, recorded={}))
    assert [d.processor for d in devices] == ["gfx942"]

    listed = K.list_cache(devices, cache_dirs=[pipc, uvc], notes=notes)
    by_tool = {}
    for e in listed.entries:
        by_tool.setdefault(e.tool, []).append((e.label, e.status))
    assert by_tool["pip"] == [("gpu_demo-1.0-py3-none-any.whl", "fails")]
    assert sorted(by_tool["uv"]) == sorted([("gpu-demo-1.0", "fails"), ("gpu-demo-1.0", "ok"), ("plain-1.0", "ok")])
    assert listed.exit_code == 1

    dry = K.purge_cache(devices, yes=False, cache_dirs=[pipc, uvc])
    assert all(p.exists() or p.is_symlink() for e in dry.misfits for p in e.remove)
    uv_bad = [e for e in dry.misfits if e.tool == "uv"][0]
    # the links and the built wheel go first, the unpacked archive last
    assert any(p.is_symlink() for p in uv_bad.remove) and uv_bad.remove[-1] == uv_bad.path
    assert any(p.suffix == ".whl" for p in uv_bad.remove)

    done = K.purge_cache(devices, yes=True, cache_dirs=[pipc, uvc])
    assert done.exit_code == 0 and len(done.misfits) == 2
    assert all(e.action == "removed" for e in done.misfits)
    assert all(not (p.exists() or p.is_symlink()) for e in done.misfits for p in e.remove)
    after = K.list_cache(devices, cache_dirs=[pipc, uvc])
    assert after.misfits == [] and len(after.entries) == 2  # uv's fat and plain wheels stay

    # both tools build again, for the new machine, from what is left of their caches
    assert "fat" in pip_install(pipc, tmp_path / "t3", links, "fat")
    assert "fat" in uv_install(uvc, tmp_path / "v1", sdist, "fat", "--reinstall")
    final = K.list_cache(devices, cache_dirs=[pipc, uvc])
    assert final.misfits == [] and {e.status for e in final.entries} == {"ok"}
