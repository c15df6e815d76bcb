"""Real inputs for the tests: pinned sdists and wheels, located through pip's configured index,
downloaded once, checked against size and sha256.

A pin (``tests/real_sdists.json``, ``tests/real_wheels.json``) is a name, a version, a file name,
a size and a sha256; it holds no URL. ``locate(pin)`` asks the indexes pip is configured to use
(its index URL, then its extra index URLs, as ``pip download`` reads them from pip's
configuration files and ``PIP_*`` variables), each for the project's page (PEP 691 JSON, else
PEP 503 HTML), and takes the file of that name; a local ``find-links`` folder that holds the file
is used as pip would. A listed sha256 that differs from the pin is an error, and so is a
download whose size or sha256 differs: nothing unchecked is used.

``sdist_tree(pin)`` returns a folder holding the sdist's top-level ``pyproject.toml``,
``setup.py``, ``setup.cfg`` and ``PKG-INFO`` (those it has), every ``CMakeLists.txt`` and
``*.cmake`` file (at most ``MAX_CMAKE``: the switch reader follows them) and the files its pin
lists under ``cited``, read from the tar as it streams in: the archive itself is never stored.
``tests/real_sdists_more.json`` (``MORE_PINS``) pins more GPU projects that only the switch
reader's tests read.
``pinned_file(pin, folder)`` keeps a whole file (``real_wheel`` for the pinned wheels; the
benchmarks use it too). Both live in the cache (``$RBB_TEST_CACHE``, default
``$XDG_CACHE_HOME/rocm-build-backend-tests`` or ``~/.cache/rocm-build-backend-tests``), so CI
and later runs reuse them; a failed download is an error whose message says how to run without
the network. Nothing third-party is copied into the repository. (The variable is not named
``ROCM_BUILD_BACKEND_...``: the shim reads that prefix as its own settings and refuses unknown
ones.)
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html.parser
import io
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO, Iterator

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


# ------------------------------------------------------------------ where a pinned file is

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.1, text/html;q=0.01"


_PIP_SOURCES = """
import json
from pip._internal.commands import create_command
options, _ = create_command("download").parse_args([])
indexes = [] if options.no_index else [options.index_url, *options.extra_index_urls]
print(json.dumps([indexes, list(options.find_links or ()), options.cert]))
"""


@lru_cache(maxsize=None)
def pip_sources() -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """(index URLs, find-links, CA bundle) as ``pip download`` would use them here: pip reads its
    own configuration files and ``PIP_*`` variables (its default index included). Asked in a
    child process: importing pip's internals here would load the deprecated ``distutils`` into
    the test process, which setuptools' own distutils shim then refuses."""
    out = subprocess.run(
        [sys.executable, "-c", _PIP_SOURCES], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    indexes, links, cert = json.loads(out)
    return tuple(indexes), tuple(links), cert


def _split_auth(url: str) -> tuple[str, dict[str, str]]:
    """``https://user:pw@host/simple`` -> the URL without them and a Basic auth header."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, {}
    userinfo, host = parts.netloc.rsplit("@", 1)
    token = base64.b64encode(urllib.parse.unquote(userinfo).encode()).decode()
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), {"Authorization": f"Basic {token}"}


def _open(url: str, headers: dict[str, str] | None = None, timeout: float = 120) -> Any:
    """urlopen with pip's CA bundle and the credentials written into the URL, if any."""
    url, auth = _split_auth(url)
    request = urllib.request.Request(url, headers={**auth, **(headers or {})})
    context = None
    if url.startswith("https:"):
        context = ssl.create_default_context(cafile=pip_sources()[2] or None)
    return urllib.request.urlopen(request, timeout=timeout, context=context)


class _Anchors(html.parser.HTMLParser):
    """The file anchors of a PEP 503 project page: (text, href)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self.links.append((data.strip(), self._href))
            self._href = None


def _project_files(index: str, name: str) -> dict[str, tuple[str, str | None]]:
    """file name -> (absolute URL, sha256 the index lists or None), from one project page."""
    canonical = re.sub(r"[-_.]+", "-", name).lower()
    page = index.rstrip("/") + f"/{canonical}/"
    if page.startswith("file:"):
        page += "index.html"
    with _open(page, {"Accept": ACCEPT}, timeout=60) as response:
        kind = (response.headers.get("Content-Type") or "").split(";")[0].strip()
        body = response.read(64 << 20)
        page = response.geturl()
    files: dict[str, tuple[str, str | None]] = {}
    if kind == JSON_TYPE:
        for entry in json.loads(body)["files"]:
            files[entry["filename"]] = (urllib.parse.urljoin(page, entry["url"]), entry.get("hashes", {}).get("sha256"))
        return files
    anchors = _Anchors()
    anchors.feed(body.decode("utf-8", "replace"))
    for text, href in anchors.links:
        url, _, fragment = urllib.parse.urljoin(page, href).partition("#")
        digest = fragment[len("sha256=") :] if fragment.startswith("sha256=") else None
        files[text or url.rsplit("/", 1)[-1]] = (url, digest)
    return files


def locate(pin: dict[str, Any]) -> str:
    """The URL of the pinned file, from pip's configured indexes (or a local find-links folder)."""
    indexes, find_links, _ = pip_sources()
    for folder in find_links:
        local = Path(folder.removeprefix("file://")) / pin["filename"]
        if "://" not in folder.removeprefix("file://") and local.is_file():
            return local.as_uri()
    tried = []
    for index in indexes:
        try:
            files = _project_files(index, pin["name"])
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError, ValueError, KeyError) as exc:
            tried.append(f"{_split_auth(index)[0]} ({exc})")
            continue
        if pin["filename"] not in files:
            tried.append(f"{_split_auth(index)[0]} (not listed)")
            continue
        url, digest = files[pin["filename"]]
        if digest is not None and digest != pin["sha256"]:
            raise CorpusError(
                f"{pin['filename']}: {_split_auth(index)[0]} lists sha256 {digest}, the pin says {pin['sha256']}"
            )
        return url
    raise CorpusError(
        f"cannot locate {pin['filename']} ({pin['name']} {pin['version']}) on pip's configured indexes: "
        f"{'; '.join(tried) or 'none (--no-index)'}. The real-input tests download each pinned file once "
        f"into {cache_dir()} (set RBB_TEST_CACHE to a filled cache), or deselect them with -m 'not realinputs'"
    )


@contextlib.contextmanager
def open_pinned(pin: dict[str, Any]) -> Iterator[tuple[str, BinaryIO]]:
    """(URL, stream) of the pinned file, located through pip's configured indexes."""
    url = locate(pin)
    try:
        response = _open(url)
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
        raise CorpusError(
            f"cannot download {pin['filename']} from {_split_auth(url)[0]}: {exc}. The real-input tests download "
            f"each pinned file once into {cache_dir()} (set RBB_TEST_CACHE to a filled cache), "
            "or deselect them with -m 'not realinputs'"
        ) from None
    with response:
        yield _split_auth(url)[0], response


def _check(pin: dict[str, Any], url: str, size: int, digest: str) -> None:
    if (pin.get("size") is not None and size != pin["size"]) or digest != pin["sha256"]:
        raise CorpusError(
            f"{pin['filename']} from {url}: got {size} bytes with sha256 {digest}, "
            f"the pin says {pin.get('size', 'any number of')} bytes with sha256 {pin['sha256']}"
        )


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


def _extract(stream: BinaryIO, pin: dict[str, Any], dest: Path, url: str) -> list[str]:
    """Read the whole gzip'd tar from STREAM, writing the wanted members (and the CMake files)
    under DEST."""
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
    _check(pin, url, reader.size, reader.sha256.hexdigest())
    missing = [m for m in pin.get("cited", []) if m not in found]
    if missing:
        raise CorpusError(f"{pin['filename']} has no {', '.join(missing)} (listed under 'cited')")
    return found


def _download(pin: dict[str, Any], dest: Path) -> tuple[str, list[str]]:
    with open_pinned(pin) as (url, stream):
        try:
            return url, _extract(stream, pin, dest, url)
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
        url, found = _download(pin, work)
        (work / MARKER).write_text(json.dumps({"sha256": pin["sha256"], "url": url, "members": found}))
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


def pinned_file(pin: dict[str, Any], folder: Path) -> Path:
    """``folder/<file name>``: the pinned file, downloaded once and checked against its size (when
    the pin has one) and sha256; a failed or different download is an error."""
    final = folder / pin["filename"]
    if final.is_file() and (final.stat().st_size == pin["size"] if pin.get("size") is not None else True):
        return final  # checked when it was written
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{pin['filename']}.", dir=folder)
    digest, size = hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as out, open_pinned(pin) as (url, stream):
            try:
                while block := stream.read(1 << 20):
                    digest.update(block)
                    size += len(block)
                    out.write(block)
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                raise CorpusError(f"{pin['filename']} from {url}: the download broke off ({exc})") from None
        _check(pin, url, size, digest.hexdigest())
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return final


def real_wheel(pin: dict[str, Any], *, cache: Path | None = None) -> Path:
    """A pinned real wheel, whole (``tests/real_wheels.json``), in the cache's ``wheels`` folder."""
    return pinned_file(pin, (cache or cache_dir()) / "wheels")
