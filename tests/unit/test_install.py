"""`install`: every wheel checked against this machine's GPUs before pip installs it. Here: pip's
arguments sorted and where a wheel came from; real pip and uv runs, the cache trap included, are
in tests/integration/test_install_pip.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.wheel.install import origin as O
from rocm_build_backend.wheel.install import run as I
from helpers import make_wheel, run


def test_split_args():
    s = I.split_args(
        [
            "--",
            "-i",
            "https://x/simple",
            "--find-links=links",
            "--target",
            "site",
            "-U",
            "torch>=2",
            "-C",
            "k=v",
            "--no-build-isolation",
            "--cache-dir",
            "c",
            "numpy",
        ]
    )
    assert s.requirements == ["torch>=2", "numpy"]
    assert s.install == ["--target", "site", "-U"]
    assert s.options == [
        "-i",
        "https://x/simple",
        "--find-links=links",
        "-C",
        "k=v",
        "--no-build-isolation",
        "--cache-dir",
        "c",
    ]
    assert s.for_rebuild() == ["-i", "https://x/simple", "--find-links=links", "-C", "k=v", "--no-build-isolation"]
    with pytest.raises(RocmBuildBackendError, match="needs a value"):
        I.split_args(["numpy", "--index-url"])
    with pytest.raises(RocmBuildBackendError, match="--dry-run"):
        I.split_args(["--dry-run", "numpy"])


def test_origin_of(tmp_path, monkeypatch):
    """Where a collected wheel came from: pip's report (which projects pip builds from source),
    its wheel cache as ``pip cache list`` lists it before the collect, and the bytes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_NO_CACHE")}
    wheel = make_wheel(tmp_path / "w", "demo", "1.0", stamp=False)
    cache = tmp_path / "cache"
    (cache / "wheels" / "ab" / "cd").mkdir(parents=True)
    # pip built it: the report builds demo from source, and the cache held no such wheel before
    assert O.origin_of(wheel, "demo", {"demo"}, O.cached_before(sys.executable, cache, env)) == "built"
    (cache / "wheels" / "ab" / "cd" / wheel.name).write_bytes(wheel.read_bytes())
    before = O.cached_before(sys.executable, cache, env)
    assert [p.path for p in before[wheel.name]] == [cache / "wheels" / "ab" / "cd" / wheel.name]
    assert O.origin_of(wheel, "Demo", {"demo"}, before) == "cache"  # the same bytes were in the cache
    monkeypatch.chdir(tmp_path)  # a relative --cache-dir, as the collect's pip reads it
    assert O.cached_before(sys.executable, Path("cache"), env) == before
    # a wheel the report names as a wheel was downloaded: that is the index's, whatever the cache holds
    assert O.origin_of(wheel, "demo", set(), before) == "index"
    # a cached wheel of that name with other bytes is another build
    other = make_wheel(tmp_path / "o", "demo", "1.0", members={"demo/x.py": b"x = 1\n"}, stamp=False)
    assert O.origin_of(other, "demo", {"demo"}, before) == "built"
    assert O.pip_cache_dir(["--no-cache-dir"], env) is None
    assert O.pip_cache_dir(["--cache-dir=c"], env) == O.pip_cache_dir(["--cache-dir", "c"], env) == Path("c")
    assert O.cached_before(sys.executable, None, env) == {} == O.cached_before(sys.executable, tmp_path / "no", env)


def test_nothing_to_install_is_a_usage_error(tmp_path):
    proc = run([sys.executable, "-m", "rocm_build_backend", "install", "--targets", "gfx942", "--", "--no-index"])
    assert proc.returncode == 2 and proc.stderr.startswith("error: nothing to install"), proc.stderr
