"""`install`: every wheel checked against this machine's GPUs before pip installs it. Here: pip's
arguments sorted and where a wheel came from; real pip and uv runs, the cache trap included, are
in tests/integration/test_install_pip.py.
"""

from __future__ import annotations

import sys

import pytest

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.wheel.install import run as I
from helpers import make_wheel, run


def test_split_args():
    s = I.split_args(["--", "-i", "https://x/simple", "--find-links=links", "--target", "site", "-U",
                      "torch>=2", "-C", "k=v", "--no-build-isolation", "--cache-dir", "c", "numpy"])
    assert s.requirements == ["torch>=2", "numpy"]
    assert s.install == ["--target", "site", "-U"]
    assert s.options == ["-i", "https://x/simple", "--find-links=links", "-C", "k=v", "--no-build-isolation",
                         "--cache-dir", "c"]
    assert s.for_rebuild() == ["-i", "https://x/simple", "--find-links=links", "-C", "k=v", "--no-build-isolation"]
    with pytest.raises(RocmBuildBackendError, match="needs a value"):
        I.split_args(["numpy", "--index-url"])
    with pytest.raises(RocmBuildBackendError, match="--dry-run"):
        I.split_args(["--dry-run", "numpy"])


def test_origin_of(tmp_path):
    wheel = make_wheel(tmp_path / "w", "demo", "1.0", stamp=False)
    cache = tmp_path / "cache"
    (cache / "wheels" / "ab" / "cd").mkdir(parents=True)
    assert I.origin_of(wheel, f"Created wheel for demo: filename={wheel.name} size=1", cache) == "built"
    assert I.origin_of(wheel, f"  Using cached {wheel.name}\n", cache) == "index"  # not in the wheel cache
    (cache / "wheels" / "ab" / "cd" / wheel.name).write_bytes(wheel.read_bytes())
    assert I.origin_of(wheel, f"  Using cached {wheel.name}\n", cache) == "cache"
    # an HTTP-cache hit of a download prints its size: that is the index's wheel
    assert I.origin_of(wheel, f"  Using cached {wheel.name} (12 kB)\n", cache) == "index"


def test_nothing_to_install_is_a_usage_error(tmp_path):
    proc = run([sys.executable, "-m", "rocm_build_backend", "install", "--targets", "gfx942", "--", "--no-index"])
    assert proc.returncode == 2 and proc.stderr.startswith("error: nothing to install"), proc.stderr
