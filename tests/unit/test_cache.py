"""``cache list`` / ``cache purge`` in library form, on caches made in temporary folders: where the
caches are, their layouts, which cached wheels misfit the targets, what purging removes and what
it refuses. Real pip and uv caches moved to another GPU: tests/integration/test_cache_real.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rocm_build_backend.cli import render
from rocm_build_backend.wheel.cache import run as K
from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.gpu.targets import GpuTarget
from helpers import gpu_demo_project, pure_wheel, TESTS

BIN = TESTS / "data" / "index"


def test_default_cache_dirs():
    home = Path("/home/u")
    assert K.default_cache_dirs({}, home=home, platform="linux") == {
        "pip": home / ".cache/pip",
        "uv": home / ".cache/uv",
    }
    assert K.default_cache_dirs({"XDG_CACHE_HOME": "/x"}, home=home, platform="linux") == {
        "pip": Path("/x/pip"),
        "uv": Path("/x/uv"),
    }
    got = K.default_cache_dirs(
        {"PIP_CACHE_DIR": "/p", "UV_CACHE_DIR": "/u", "XDG_CACHE_HOME": "/x"}, home=home, platform="linux"
    )
    assert got == {"pip": Path("/p"), "uv": Path("/u")}
    assert K.default_cache_dirs({}, home=home, platform="darwin")["pip"] == home / "Library/Caches/pip"
    assert K.default_cache_dirs({}, home=home, platform="darwin")["uv"] == home / ".cache/uv"
    win = K.default_cache_dirs({"LOCALAPPDATA": "C:/L"}, home=home, platform="win32")
    assert win == {"pip": Path("C:/L/pip/Cache"), "uv": Path("C:/L/uv/cache")}


def test_variables_pick_the_caches(tmp_path):
    (tmp_path / "p/wheels").mkdir(parents=True)
    report = K.list_cache(
        ["gfx90a"], env={"PIP_CACHE_DIR": str(tmp_path / "p"), "UV_CACHE_DIR": str(tmp_path / "nothing")}
    )
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
    proj, backend = gpu_demo_project(tmp_path)
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
    proj, backend = gpu_demo_project(tmp_path)
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
