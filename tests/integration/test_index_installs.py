"""Installing from the per-target static index with real pip and uv.

The client tests install from the index three ways per target: pip over ``file://``, pip over
HTTP from a server started here on 127.0.0.1 (one plain ``http.server`` serving HTML, one that
negotiates PEP 691 JSON), and uv over ``file://`` and HTTP. Three targets, fat and
single-target wheels, two versions, pure wheels, and local-version wheels side by side.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from rocm_build_backend.wheel.index import run as I
from helpers import index_fleet, INDEX_TARGETS, TESTS

BIN = TESTS / "data" / "index"


def requested(want: set[str]) -> list[str]:
    return sorted({w.split("-")[0].replace("_", "-") for w in want})


def clean_env(**extra) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "UV_")) and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    env.update(
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        UV_NO_CONFIG="1",
        UV_PYTHON_DOWNLOADS="never",
    )
    env.update(extra)
    return env


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout}\n{proc.stderr}"
    return proc


def installed(site: Path) -> set[str]:
    return {p.name[: -len(".dist-info")] for p in site.glob("*.dist-info")}


class Negotiating(SimpleHTTPRequestHandler):
    """Serves index.json as PEP 691 JSON when the client ranks that type first."""

    json_hits = 0

    def send_head(self):
        accept = self.headers.get("Accept", "")
        if self.path.split("?")[0].endswith("/") and accept.startswith("application/vnd.pypi.simple.v1+json"):
            page = Path(self.translate_path(self.path)) / "index.json"
            if page.is_file():
                data = page.read_bytes()
                type(self).json_hits += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                import io

                return io.BytesIO(data)
        return super().send_head()

    def log_message(self, *args):
        pass


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("served")
    want = index_fleet(base / "wheels")
    result = I.build_index(base / "wheels", base / "out")
    assert set(INDEX_TARGETS) <= set(result.indexes)
    servers = {}
    for kind, handler in (("html", Quiet), ("json", Negotiating)):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(base / "out")))
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers[kind] = f"http://127.0.0.1:{srv.server_address[1]}"
        servers[kind + "_srv"] = srv
    yield base, want, servers
    for kind in ("html", "json"):
        servers[kind + "_srv"].shutdown()
        servers[kind + "_srv"].server_close()


def pip_install(index_url: str, dest: Path, names: list[str]) -> set[str]:
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--isolated",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--no-input",
            "--target",
            str(dest),
            "--index-url",
            index_url,
            *names,
        ],
        env=clean_env(),
    )
    return installed(dest)


def uv_install(index_url: str, venv: Path, cache: Path, names: list[str]) -> set[str]:
    uv = shutil.which("uv")
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    run(
        [
            uv,
            "pip",
            "install",
            "--no-config",
            "--cache-dir",
            str(cache),
            "--python",
            str(py),
            "--index-url",
            index_url,
            *names,
        ],
        env=clean_env(),
    )
    sites = list(venv.glob("lib/python*/site-packages")) + list(venv.glob("Lib/site-packages"))
    return installed(sites[0])


@pytest.mark.parametrize("target", INDEX_TARGETS)
def test_pip_file_url(served, tmp_path, target):
    base, want, _ = served
    url = (base / "out" / target / "simple").as_uri()
    assert pip_install(url, tmp_path / "t", requested(want[target])) == want[target]


@pytest.mark.parametrize("target", INDEX_TARGETS)
def test_pip_http(served, tmp_path, target):
    base, want, servers = served
    url = f"{servers['html']}/{target}/simple/"
    assert pip_install(url, tmp_path / "t", requested(want[target])) == want[target]


def test_pip_http_json(served, tmp_path):
    base, want, servers = served
    before = Negotiating.json_hits
    for target in INDEX_TARGETS:
        url = f"{servers['json']}/{target}/simple/"
        assert pip_install(url, tmp_path / target, requested(want[target])) == want[target]
    assert Negotiating.json_hits > before  # pip read the PEP 691 pages


@pytest.mark.parametrize("target", INDEX_TARGETS)
def test_uv(served, tmp_path, target):
    base, want, servers = served
    url = (base / "out" / target / "simple").as_uri()
    assert uv_install(url, tmp_path / "v1", tmp_path / "c1", requested(want[target])) == want[target]
    url = f"{servers['json']}/{target}/simple/"
    assert uv_install(url, tmp_path / "v2", tmp_path / "c2", requested(want[target])) == want[target]
