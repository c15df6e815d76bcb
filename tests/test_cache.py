"""``cache list`` / ``cache purge``: real pip and uv caches in temporary folders.

A small sdist with an in-tree backend builds "for" the GPU named in FAKE_GPU_BUILD (it ships
real device code from tests/data/index/ and a stamp). It is installed with pip and uv on a
"gfx90a machine", whose caches keep the built wheel; on a "gfx942 machine" (a fake KFD root)
pip hands back the gfx90a wheel, and ``cache`` finds and removes exactly the misfits, after
which both tools build again.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.cli import render
from rocm_build_backend.wheel.cache import run as K
from rocm_build_backend.wheel.check.wheels import devices_from_detection
from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.gpu.targets import GpuTarget
from wheelmaker import record_line

BIN = Path(__file__).parent / "data" / "index"

BACKEND = r'''
"""In-tree PEP 517 backend: builds gpu-demo with the device code FAKE_GPU_BUILD names."""
import base64, hashlib, io, json, os, tarfile, zipfile

NAME, VERSION, DIST = "gpu-demo", "1.0", "gpu_demo"
HERE = os.path.dirname(os.path.abspath(__file__))
BUILDS = {
    "gfx90a": ("hip_two_tu_cov4.so", ["gfx908", "gfx90a"], ["gfx90a"]),
    "fat": ("hip_gfx90a_gfx942_cov5.so", ["gfx90a", "gfx942"], ["gfx90a", "gfx942"]),
}
METADATA = f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n\n".encode()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def _line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    which = os.environ.get("FAKE_GPU_BUILD", "gfx90a")
    lib, targets, complete = BUILDS[which]
    di = f"{DIST}-{VERSION}.dist-info"
    with open(os.path.join(HERE, "bin", lib), "rb") as fh:
        so = fh.read()
    stamp = {
        "schema_version": 1,
        "generator": {"name": "rocm-build-backend", "version": "0.1.0"},
        "requested": {"targets": complete, "source": "settings"},
        "audit": {"targets": targets, "complete": complete,
                  "files": {f"{DIST}/_k.so": {"targets": targets, "complete": complete}}},
        "host": {"gpus": []},
        "toolchain": {"compiler": "hipcc", "version": None, "hip_version": None, "rocm_version": None},
    }
    files = {
        f"{DIST}/__init__.py": f"BUILT = {which!r}\n".encode(),
        f"{DIST}/_k.so": so,
        f"{di}/METADATA": METADATA,
        f"{di}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n\n",
        f"{di}/rocm_build.json": json.dumps(stamp, indent=2).encode(),
    }
    files[f"{di}/RECORD"] = ("\n".join([_line(n, d) for n, d in files.items()] + [f"{di}/RECORD,,"]) + "\n").encode()
    name = f"{DIST}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = f"{DIST}-{VERSION}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tf:
        for rel in ["pyproject.toml", "_backend.py"] + [f"bin/{b}" for b in sorted(os.listdir(os.path.join(HERE, "bin")))]:
            tf.add(os.path.join(HERE, rel), f"{base}/{rel}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        pkg_info = b"Metadata-Version: 2.1\nName: gpu-demo\nVersion: 1.0\n"
        info.size = len(pkg_info)
        tf.addfile(info, io.BytesIO(pkg_info))
    return name
'''

PYPROJECT = """[build-system]
requires = []
build-backend = "_backend"
backend-path = ["."]

[project]
name = "gpu-demo"
version = "1.0"
"""


# --------------------------------------------------------------------------- helpers


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "UV_")) and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1",
               UV_NO_CONFIG="1", UV_PYTHON_DOWNLOADS="never", UV_OFFLINE="1")
    env.update(extra)
    return env


def run(cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout}\n{proc.stderr}"
    return proc


def pure_wheel(folder: Path, name: str = "plain", version: str = "1.0") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    di = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": b"",
        f"{di}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n".encode(),
        f"{di}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n\n",
    }
    files[f"{di}/RECORD"] = ("\n".join([record_line(n, d) for n, d in files.items()] + [f"{di}/RECORD,,"]) + "\n").encode()
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return path


def project(tmp: Path) -> tuple[Path, object]:
    proj = tmp / "proj"
    (proj / "bin").mkdir(parents=True)
    (proj / "_backend.py").write_text(BACKEND)
    (proj / "pyproject.toml").write_text(PYPROJECT)
    for b in ("hip_two_tu_cov4.so", "hip_gfx90a_gfx942_cov5.so"):
        shutil.copy(BIN / b, proj / "bin" / b)
    spec = importlib.util.spec_from_file_location("_test_backend", proj / "_backend.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return proj, mod


def kfd_root(tmp: Path, version: int) -> Path:
    nodes = tmp / "root/sys/class/kfd/kfd/topology/nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0/properties").write_text("cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n")
    (nodes / "1").mkdir()
    (nodes / "1/properties").write_text(f"cpu_cores_count 0\nsimd_count 608\nsimd_per_cu 2\ngfx_target_version {version}\n")
    return tmp / "root"


def pip_install(cache: Path, dest: Path, links: Path, build: str) -> str:
    run([sys.executable, "-m", "pip", "install", "--isolated", "--cache-dir", cache, "--target", dest,
         "--no-index", "--find-links", links, "--no-build-isolation", "gpu-demo"],
        env=clean_env(FAKE_GPU_BUILD=build))
    return (dest / "gpu_demo/__init__.py").read_text()


def uv_install(cache: Path, venv: Path, what: Path, build: str, *extra) -> str:
    if not venv.exists():
        run([sys.executable, "-m", "venv", "--without-pip", venv])
    py = venv / "bin/python"
    run([shutil.which("uv"), "pip", "install", "--no-config", "--cache-dir", cache, "--python", py, *extra, what],
        env=clean_env(FAKE_GPU_BUILD=build))
    (site,) = venv.glob("lib/python*/site-packages")
    init = site / "gpu_demo/__init__.py"
    return init.read_text() if init.exists() else ""


needs_uv = pytest.mark.integration  # uv comes with the test extras: a missing uv fails, it is not skipped


# --------------------------------------------------------------------------- where the caches are


def test_default_cache_dirs():
    home = Path("/home/u")
    assert K.default_cache_dirs({}, home=home, platform="linux") == {
        "pip": home / ".cache/pip", "uv": home / ".cache/uv"}
    assert K.default_cache_dirs({"XDG_CACHE_HOME": "/x"}, home=home, platform="linux") == {
        "pip": Path("/x/pip"), "uv": Path("/x/uv")}
    got = K.default_cache_dirs({"PIP_CACHE_DIR": "/p", "UV_CACHE_DIR": "/u", "XDG_CACHE_HOME": "/x"},
                               home=home, platform="linux")
    assert got == {"pip": Path("/p"), "uv": Path("/u")}
    assert K.default_cache_dirs({}, home=home, platform="darwin")["pip"] == home / "Library/Caches/pip"
    assert K.default_cache_dirs({}, home=home, platform="darwin")["uv"] == home / ".cache/uv"
    win = K.default_cache_dirs({"LOCALAPPDATA": "C:/L"}, home=home, platform="win32")
    assert win == {"pip": Path("C:/L/pip/Cache"), "uv": Path("C:/L/uv/cache")}


def test_variables_pick_the_caches(tmp_path):
    (tmp_path / "p/wheels").mkdir(parents=True)
    report = K.list_cache(["gfx90a"], env={"PIP_CACHE_DIR": str(tmp_path / "p"),
                                           "UV_CACHE_DIR": str(tmp_path / "nothing")})
    assert [(t, s) for t, _p, s in report.caches] == [("pip", "0 built wheels"), ("uv", "not found")]
    assert report.exit_code == 0 and "no cached wheel misfits" in render.cache(report)
    only_uv = K.list_cache("gfx90a", env={"UV_CACHE_DIR": str(tmp_path / "nothing")}, tools=("uv",))
    assert [t for t, _p, _s in only_uv.caches] == ["uv"]


def test_cache_dir_must_be_a_cache(tmp_path):
    with pytest.raises(RocmBuildBackendError) as err:
        K.list_cache(["gfx90a"], cache_dirs=[tmp_path / "missing"])
    assert "--cache-dir" in err.value.hint
    (tmp_path / "random").mkdir()
    (tmp_path / "random/file.txt").write_text("x")
    with pytest.raises(RocmBuildBackendError) as err:
        K.list_cache(["gfx90a"], cache_dirs=[tmp_path / "random"])
    assert "does not look like a pip or uv cache" in err.value.message
    (tmp_path / "pipish/http-v2").mkdir(parents=True)
    (tmp_path / "uvish/archive-v0").mkdir(parents=True)
    assert K.classify_cache(tmp_path / "pipish") == "pip"
    assert K.classify_cache(tmp_path / "uvish") == "uv"


def test_pip_layout_by_hand(tmp_path):
    """A pip cache laid out as pip 26 writes it: the wheel beside origin.json, http-v2 beside."""
    cache = tmp_path / "pip"
    entry = cache / "wheels/6e/b3/95/c1738e0c8b4c7785874418e069ec25b87d2564c54607a02b23"
    proj, backend = project(tmp_path)
    entry.mkdir(parents=True)
    os.environ["FAKE_GPU_BUILD"] = "gfx90a"
    try:
        backend.build_wheel(str(entry))
    finally:
        del os.environ["FAKE_GPU_BUILD"]
    (entry / "origin.json").write_text(json.dumps({"url": "file:///x/gpu_demo-1.0.tar.gz", "archive_info": {}}))
    pure = pure_wheel(cache / "wheels/aa/bb/cc/dd")
    (cache / "http-v2/a/b").mkdir(parents=True)
    (cache / "http-v2/a/b/0123").write_bytes(b"cached response header")
    (cache / "http-v2/a/b/0123.body").write_bytes(b"PK\x03\x04 a download")
    report = K.list_cache([GpuTarget("gfx942")], cache_dirs=[cache])
    assert report.caches[0][2] == "2 built wheels; 1 cached HTTP response (keyed by URL, left alone)"
    statuses = {e.path.name: e.status for e in report.entries}
    assert statuses == {"gpu_demo-1.0-py3-none-any.whl": "fails", pure.name: "ok"}
    bad = report.misfits[0]
    assert bad.remove == [entry / "gpu_demo-1.0-py3-none-any.whl", entry / "origin.json"]
    assert "gfx942: gpu_demo/_k.so has code for gfx90a, not for gfx942" in render.cache(report)
    assert report.exit_code == 1
    dry = K.purge_cache([GpuTarget("gfx942")], yes=False, cache_dirs=[cache])
    assert dry.misfits[0].action == "would remove" and dry.exit_code == 1
    assert (entry / "gpu_demo-1.0-py3-none-any.whl").exists()
    assert "run again with --yes" in render.cache(dry)
    done = K.purge_cache([GpuTarget("gfx942")], yes=True, cache_dirs=[cache])
    assert done.exit_code == 0 and done.misfits[0].action == "removed"
    assert not entry.exists() and not (cache / "wheels/6e").exists()
    assert pure.exists() and (cache / "http-v2/a/b/0123.body").exists() and (cache / "wheels").is_dir()
    # gfx90a still fits: nothing to do there
    assert K.list_cache(["gfx90a"], cache_dirs=[cache]).misfits == []
    doc = done.to_json()
    assert doc["mode"] == "purge" and doc["entries"][0]["action"] == "removed"


def test_unreadable_entries_are_kept_and_reported(tmp_path):
    cache = tmp_path / "pip"
    (cache / "wheels/aa/bb").mkdir(parents=True)
    broken = cache / "wheels/aa/bb/broken-1.0-py3-none-any.whl"
    broken.write_bytes(b"not a zip")
    report = K.purge_cache(["gfx90a"], yes=True, cache_dirs=[cache])
    (e,) = report.entries
    assert e.status == "unknown" and e.action is None and broken.exists()
    assert "not a readable wheel" in render.cache(report)


def test_read_only_cache_is_reported_not_raised(tmp_path, monkeypatch):
    cache = tmp_path / "pip"
    entry = cache / "wheels/11/22/33/44"
    entry.mkdir(parents=True)
    proj, backend = project(tmp_path)
    monkeypatch.setenv("FAKE_GPU_BUILD", "gfx90a")
    backend.build_wheel(str(entry))

    def denied(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(K, "_remove_path", denied)
    report = K.purge_cache(["gfx942"], yes=True, cache_dirs=[cache])
    (e,) = report.misfits
    assert e.action == "not removed" and "Permission denied" in e.errors[0]
    assert report.exit_code == 1
    assert "error: cannot remove" in render.cache(report)
    assert (entry / "gpu_demo-1.0-py3-none-any.whl").exists()


# --------------------------------------------------------------------------- real pip and uv caches


@pytest.mark.integration
@needs_uv
def test_real_caches_moved_to_another_gpu(tmp_path):
    proj, backend = project(tmp_path)
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
