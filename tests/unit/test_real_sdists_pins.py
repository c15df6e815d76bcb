"""The pins of the real sdists (tests/real_sdists.json) and their downloader, without the network:
every pin complete, every profile that cites no sdist a known one, and the downloader keeping only
the wanted members and refusing a wrong hash, a missing member and a failed download. The real
sdists themselves are read in ``tests/integration/test_real_sdists.py``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import tarfile
from pathlib import Path

import pytest

from rocm_build_backend.builder.profiles import all_profiles
from helpers import CorpusError, load_pins, sdist_tree

PINS = load_pins()


def _cited_sdist(profile) -> dict | None:
    return next((p for p in PINS if profile.source.startswith(f"{p['name']} {p['version']} sdist")), None)


def test_profiles_citing_no_sdist_are_the_known_ones():
    """bitsandbytes and torchvision have no sdist on PyPI with the code the profile describes
    (bitsandbytes' last sdist, 0.42.0, predates its CMake build; torchvision's last is 0.1.6);
    torch and apex have none at all."""
    assert sorted(p.name for p in all_profiles() if _cited_sdist(p) is None) == [
        "apex", "bitsandbytes", "torch", "torchvision"]

def _sdist(tmp_path: Path, files: dict[str, bytes]) -> tuple[Path, dict]:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    blob = gzip.compress(raw.getvalue())
    path = tmp_path / "demo-1.0.tar.gz"
    path.write_bytes(blob)
    pin = {"name": "demo", "version": "1.0", "filename": path.name, "size": len(blob),
           "sha256": hashlib.sha256(blob).hexdigest(), "url": path.as_uri(), "cited": ["src/knobs.py"]}
    return path, pin


FILES = {"demo-1.0/PKG-INFO": b"Name: demo\n", "demo-1.0/setup.py": b"setup()\n",
         "demo-1.0/src/knobs.py": b"GPU_ARCHS\n", "demo-1.0/src/big.bin": b"x" * 5000,
         "demo-1.0/sub/setup.py": b"not top level\n"}


def test_fetch_keeps_only_the_wanted_members_and_caches(tmp_path):
    _, pin = _sdist(tmp_path, FILES)
    tree = sdist_tree(pin, cache=tmp_path / "cache")
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file() and not p.name.startswith(".")) == [
        "PKG-INFO", "setup.py", "src/knobs.py"]
    (tmp_path / "demo-1.0.tar.gz").unlink()  # the second call is served from the cache
    assert sdist_tree(pin, cache=tmp_path / "cache") == tree


def test_fetch_with_another_hash_is_an_error(tmp_path):
    _, pin = _sdist(tmp_path, FILES)
    pin["sha256"] = "0" * 64
    with pytest.raises(CorpusError, match="sha256"):
        sdist_tree(pin, cache=tmp_path / "cache")
    assert [p.name for p in (tmp_path / "cache").iterdir()] == []


def test_fetch_without_a_cited_member_is_an_error(tmp_path):
    _, pin = _sdist(tmp_path, {k: v for k, v in FILES.items() if "knobs" not in k})
    with pytest.raises(CorpusError, match="src/knobs.py"):
        sdist_tree(pin, cache=tmp_path / "cache")


def test_fetch_that_cannot_download_says_how_to_run_without_network(tmp_path):
    _, pin = _sdist(tmp_path, FILES)
    pin["url"] = (tmp_path / "gone.tar.gz").as_uri()
    with pytest.raises(CorpusError, match="cannot download .*RBB_TEST_CACHE"):
        sdist_tree(pin, cache=tmp_path / "cache")


def test_pins_are_complete():
    for pin in PINS:
        assert re.fullmatch(r"[0-9a-f]{64}", pin["sha256"]), pin["name"]
        assert pin["url"].startswith("https://files.pythonhosted.org/packages/"), pin["name"]
        assert pin["url"].endswith("/" + pin["filename"]) and pin["size"] > 0
        assert pin["version"] in pin["filename"]
