"""Real sdists for the tests: download once, check size and sha256, keep only the files we read.

The pins live in ``tests/real_sdists.json`` (and ``tests/real_sdists_more.json``: more GPU projects
that only the switch reader's tests read). ``sdist_tree(pin)`` returns a folder holding the
sdist's top-level ``pyproject.toml``, ``setup.py``, ``setup.cfg`` and ``PKG-INFO`` (those it has),
every ``CMakeLists.txt`` and ``*.cmake`` file (at most ``MAX_CMAKE``), and the files its pin lists
under ``cited``, read from the tar as it streams in: the archive itself is never stored. A pin
without a ``url`` is found through pip's configured index (``PIP_INDEX_URL``, ``pip config``,
else pip's default) by its file name, as pip finds it. The folder lives in the cache (``$RBB_TEST_CACHE``, default
``$XDG_CACHE_HOME/rocm-build-backend-tests`` or ``~/.cache/rocm-build-backend-tests``), so CI
and later runs reuse it. A download whose size or sha256 differs from the pin is an error; so is
a failed download (the message says how to run without the network). Nothing third-party is
copied into the repository. (The variable is not named ``ROCM_BUILD_BACKEND_...``: the shim reads
that prefix as its own settings and refuses unknown ones.)
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, BinaryIO

HERE = Path(__file__).resolve().parent
PINS = HERE / "real_sdists.json"
MORE_PINS = HERE / "real_sdists_more.json"
MAX_CMAKE = 400  # CMake files kept of one sdist (the switch reader follows them)
TOP_LEVEL = ("pyproject.toml", "setup.py", "setup.cfg", "PKG-INFO")
MAX_MEMBER = 4 << 20  # a setup.py, README or CMakeLists.txt; anything bigger is not what we want
MARKER = ".rocm-build-backend-tests.json"


class CorpusError(Exception):
    """A real input that could not be had as pinned (network down, wrong hash, member missing)."""


def load_pins(path: Path = PINS) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text(encoding="utf-8"))["sdists"])


def pin_named(name: str) -> dict[str, Any]:
    return next(p for p in load_pins() if p["name"] == name)


def cache_dir() -> Path:
    given = os.environ.get("RBB_TEST_CACHE")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rocm-build-backend-tests"


def wanted_members(pin: dict[str, Any]) -> list[str]:
    return list(TOP_LEVEL) + [m for m in pin.get("cited", []) if m not in TOP_LEVEL]


def _cmake_file(rel: str) -> bool:
    return rel.rsplit("/", 1)[-1] == "CMakeLists.txt" or rel.endswith(".cmake")


def _key(pin: dict[str, Any]) -> str:
    members = hashlib.sha256("\n".join(wanted_members(pin) + ["+cmake"]).encode()).hexdigest()[:8]
    return f"{pin['name']}-{pin['version']}-{pin['sha256'][:12]}-{members}"


class _Hashing(io.RawIOBase):
    """Counts and hashes every byte read through it."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.sha256 = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        self.sha256.update(data)
        self.size += len(data)
        buffer[: len(data)] = data
        return len(data)


def _relative(member: str) -> str | None:
    """``flash_attn-2.8.3/setup.py`` -> ``setup.py``; None for the top folder itself."""
    parts = member.split("/", 1)
    return parts[1] if len(parts) == 2 and parts[1] else None


def _extract(stream: BinaryIO, pin: dict[str, Any], dest: Path) -> list[str]:
    """Read the whole gzip'd tar from STREAM, writing the wanted members under DEST."""
    wanted = set(wanted_members(pin))
    found: list[str] = []
    cmake = 0
    reader = _Hashing(stream)
    buffered = io.BufferedReader(reader, buffer_size=1 << 20)
    with tarfile.open(fileobj=buffered, mode="r|gz") as tar:
        for member in tar:
            rel = _relative(member.name)
            if rel is None or not member.isfile() or rel in found:
                continue
            if rel not in wanted:
                if not _cmake_file(rel) or cmake >= MAX_CMAKE:
                    continue
                cmake += 1
            if member.size > MAX_MEMBER:
                raise CorpusError(f"{pin['filename']}: {rel} is {member.size} bytes, more than {MAX_MEMBER}")
            fh = tar.extractfile(member)
            assert fh is not None
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(fh.read(MAX_MEMBER + 1))
            found.append(rel)
    while buffered.read(1 << 20):  # the tail after the tar's end blocks counts for the hash too
        pass
    if reader.size != pin["size"] or reader.sha256.hexdigest() != pin["sha256"]:
        raise CorpusError(
            f"{pin['filename']}: got {reader.size} bytes with sha256 "
            f"{reader.sha256.hexdigest()}, the pin says {pin['size']} bytes with sha256 {pin['sha256']}")
    missing = [m for m in pin.get("cited", []) if m not in found]
    if missing:
        raise CorpusError(f"{pin['filename']} has no {', '.join(missing)} (listed under 'cited')")
    return found


def _index() -> str:
    """pip's configured index: ``PIP_INDEX_URL``, ``pip config get global.index-url``, pip's default."""
    import subprocess
    import sys

    given = os.environ.get("PIP_INDEX_URL")
    if given:
        return given.rstrip("/")
    proc = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                          capture_output=True, text=True)
    if proc.returncode == 0 and proc.stdout.strip():
        return proc.stdout.strip().rstrip("/")
    from pip._internal.models.index import PyPI

    return str(PyPI.simple_url).rstrip("/")


def pin_url(pin: dict[str, Any]) -> str:
    """The pin's ``url``, else its file's address on pip's index (PEP 691 JSON)."""
    if pin.get("url"):
        return str(pin["url"])
    import urllib.parse

    page = f"{_index()}/{pin['name']}/"
    request = urllib.request.Request(page, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            files = json.loads(response.read(16 << 20))["files"]
    except (urllib.error.URLError, TimeoutError, ConnectionError, ValueError, KeyError) as exc:
        raise CorpusError(f"cannot list {pin['name']} on the index {page}: {exc}") from None
    for entry in files:
        if entry.get("filename") == pin["filename"]:
            return urllib.parse.urljoin(page, entry["url"])
    raise CorpusError(f"the index {page} has no {pin['filename']}")


def _download(pin: dict[str, Any], dest: Path) -> list[str]:
    url = pin_url(pin)
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            return _extract(response, pin, dest)
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise CorpusError(
            f"cannot download {url}: {exc}. The real-input tests download each pinned sdist "
            f"once into {cache_dir()} (set RBB_TEST_CACHE to a filled cache), "
            "or deselect them with -m 'not realinputs'") from None
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise CorpusError(f"{pin['filename']} from {url}: not a readable .tar.gz ({exc})") from None


def sdist_tree(pin: dict[str, Any], *, cache: Path | None = None) -> Path:
    """The folder of PIN's extracted members, downloading and checking it on first use."""
    cache = cache or cache_dir()
    final = cache / _key(pin)
    marker = final / MARKER
    if marker.is_file() and json.loads(marker.read_text()).get("sha256") == pin["sha256"]:
        return final
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{pin['name']}-", dir=cache))
    try:
        found = _download(pin, work)
        (work / MARKER).write_text(json.dumps({"sha256": pin["sha256"], "members": found}))
        try:
            work.rename(final)
        except OSError:  # another run filled it first: theirs is as good as ours
            if not (final / MARKER).is_file():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work)
    return final


def copy_tree(tree: Path, dest: Path) -> Path:
    """A writable copy of an extracted tree (without our marker), for tests that edit it."""
    shutil.copytree(tree, dest, ignore=shutil.ignore_patterns(MARKER))
    return dest


WHEEL_PINS = HERE / "real_wheels.json"


def wheel_pin(name: str) -> dict[str, Any]:
    pins = json.loads(WHEEL_PINS.read_text(encoding="utf-8"))["wheels"]
    return next(p for p in pins if p["name"] == name)


def real_wheel(pin: dict[str, Any], *, cache: Path | None = None) -> Path:
    """A pinned real wheel, whole (``tests/real_wheels.json``), downloaded once into the cache
    and checked against its size and sha256; a failed or different download is an error."""
    cache = cache or cache_dir()
    final = cache / "wheels" / pin["filename"]
    if final.is_file() and final.stat().st_size == pin["size"]:
        return final  # checked when it was written
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{pin['filename']}.", dir=final.parent)
    digest, size = hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(pin["url"], timeout=120) as response:
                    while True:
                        block = response.read(1 << 20)
                        if not block:
                            break
                        digest.update(block)
                        size += len(block)
                        out.write(block)
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                raise CorpusError(
                    f"cannot download {pin['url']}: {exc}. The real-input tests download each pinned wheel "
                    f"once into {cache_dir()} (set RBB_TEST_CACHE to a filled cache), "
                    "or deselect them with -m 'not realinputs'") from None
        if size != pin["size"] or digest.hexdigest() != pin["sha256"]:
            raise CorpusError(f"{pin['filename']} from {pin['url']}: got {size} bytes with sha256 "
                              f"{digest.hexdigest()}, the pin says {pin['size']} bytes with sha256 {pin['sha256']}")
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return final
