"""Real inputs: the pinned sdists of the profiled projects (tests/real_sdists.json).

Each sdist is found through pip's configured index, downloaded once into the test cache (see
tests/realinputs.py) and checked against its sha256; only its pyproject.toml, setup.py, setup.cfg, PKG-INFO and the files
profiles.json cites are kept. No network and no filled cache is a failure that says so, not a
skip; ``-m "not realinputs"`` deselects these tests.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import sys
from pathlib import Path

import pytest

import realinputs
from rocm_build_backend.builder.profiles import TARGET_LISTS, all_profiles, profile_for, select_profile
from rocm_build_backend.builder.configure import PIN, SHIM, configure
from rocm_build_backend.builder.projectname import find_name
from rocm_build_backend.gpu.targets import parse_targets
from helpers import MARKER, ROOT, CorpusError, copy_tree, load_pins, pinned_file, sdist_tree

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PINS = load_pins()
TARGETS = parse_targets("gfx942")


@pytest.fixture(scope="module", params=PINS, ids=[p["name"] for p in PINS])
def real(request):
    return request.param, _tree(request.param)


def _tree(pin: dict) -> Path:
    """The pin's extracted files; a failed download fails the test with its one-line reason."""
    problem = None
    try:
        return sdist_tree(pin)
    except CorpusError as exc:
        problem = str(exc)
    pytest.fail(problem, pytrace=False)


def _toml(folder: Path) -> dict:
    file = folder / "pyproject.toml"
    return tomllib.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}


def _others(data: dict) -> dict:
    out = {k: v for k, v in data.items() if k != "build-system"}
    tool = {k: v for k, v in (out.pop("tool", None) or {}).items() if k != "rocm-build-backend"}
    return {**out, "tool": tool}


@pytest.mark.realinputs
def test_each_project_gets_its_profile(real):
    pin, tree = real
    name, where = find_name(tree, _toml(tree))
    assert name is not None, pin["name"]
    assert select_profile("auto", name).name == pin["profile"], (name, where)
    if "project" not in _toml(tree) or "name" not in _toml(tree)["project"]:
        assert where == "PKG-INFO"  # a setup.py project: the sdist's metadata names it


@pytest.mark.realinputs
def test_configure_changes_only_build_system_and_our_table(real, tmp_path):
    pin, tree = real
    project = copy_tree(tree, tmp_path / pin["name"])
    before = _toml(project)
    result = configure(project)
    assert result.changed
    after = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    assert _others(after) == _others(before)
    assert after["build-system"]["build-backend"] == SHIM
    old_requires = (before.get("build-system") or {}).get("requires", [])
    assert after["build-system"]["requires"][: len(old_requires)] == old_requires
    # the exact pin of this version, then what setup.py imports that requires lacks (torch)
    assert after["build-system"]["requires"][-len(result.added) :] == list(result.added)
    assert result.added[0] == PIN and set(result.added[1:]) <= {"torch"}
    assert after["tool"]["rocm-build-backend"]["backend"] == pin["backend"]
    assert configure(project).changed is False


def _plan(project: Path, env: dict, targets: str = "gfx942") -> dict:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "plan",
            str(project),
            "--json",
            "-C",
            f"rocm-build-backend.targets={targets}",
            "-C",
            "rocm-build-backend.compiler-check=false",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.realinputs
def test_plan_names_the_backend_profile_and_knobs(real, tmp_path, build_env):
    pin, tree = real
    project = copy_tree(tree, tmp_path / pin["name"])
    configure(project)
    build_env["PYTHONPATH"] = str(ROOT)
    data = _plan(project, build_env)
    assert data["profile"] == pin["profile"]
    assert data["backend"] == pin["backend"]
    profile = profile_for(pin["name"]) or select_profile("auto", pin["name"])
    for var, value in profile.env(TARGETS).items():
        assert data["env"][var] == value, var
    for var, value in profile.cmake_defines(TARGETS).items():
        if pin["backend"].startswith("scikit_build_core"):
            assert data["config_settings"][f"cmake.define.{var}"] == value
        else:
            assert f"-D{var}={value}" in data["env"]["CMAKE_ARGS"]


@pytest.mark.realinputs
def test_an_nvidia_plan_gets_the_same_profile_with_its_nvidia_knobs(real, tmp_path, build_env):
    """One profile per project: an NVIDIA build gets the vendor-neutral switches too."""
    pin, tree = real
    project = copy_tree(tree, tmp_path / pin["name"])
    configure(project)
    build_env["PYTHONPATH"] = str(ROOT)
    data = _plan(project, build_env, "sm_90")
    profile = profile_for(pin["name"]) or select_profile("auto", pin["name"])
    sm90 = parse_targets("sm_90")
    sets_something = profile.env(sm90) or profile.cmake_defines(sm90)
    # a project without a profile: the target lists known projects read are AMD's only
    assert data["profile"] == (pin["profile"] if profile.name != TARGET_LISTS or sets_something else None)
    assert data["vendor"] == "nvidia"
    for var, value in profile.env(sm90).items():
        assert data["env"][var] == value, var
    for var, value in profile.cmake_defines(sm90).items():
        if pin["backend"].startswith("scikit_build_core"):
            assert data["config_settings"][f"cmake.define.{var}"] == value
        else:
            assert f"-D{var}={value}" in data["env"]["CMAKE_ARGS"]
    assert not {v.name for v in profile.variables if v.vendor == "amd"} - {
        v.name for v in profile.variables if v.vendor != "amd"
    } & set(data["env"])


@pytest.mark.realinputs
def test_plan_of_the_unconfigured_sdist_names_the_profile(real, tmp_path, build_env):
    pin, tree = real
    build_env["PYTHONPATH"] = str(ROOT)
    assert _plan(copy_tree(tree, tmp_path / pin["name"]), build_env)["profile"] == pin["profile"]


_CITE = re.compile(r"^(?P<path>[\w./-]+) L(?P<line>\d+)")


def _cited_sdist(profile) -> dict | None:
    return next((p for p in PINS if profile.source.startswith(f"{p['name']} {p['version']} sdist")), None)


def _citations():
    for profile in all_profiles():
        if _cited_sdist(profile) is None:
            continue
        for item in (*profile.variables, *profile.conflicts):
            yield pytest.param(profile.name, item.name, item.source, id=f"{profile.name}-{item.name}")


@pytest.mark.realinputs
@pytest.mark.parametrize(("profile_name", "name", "source"), list(_citations()))
def test_each_citation_names_its_variable_on_that_line(profile_name, name, source):
    pin = _cited_sdist(next(p for p in all_profiles() if p.name == profile_name))
    tree = _tree(pin)
    m = _CITE.match(source)
    assert m, f"{profile_name} {name}: source {source!r} does not start with 'FILE LNNN'"
    lines = (tree / m["path"]).read_text(encoding="utf-8", errors="replace").splitlines()
    line = lines[int(m["line"]) - 1]
    assert name in line, f"{pin['filename']} {m['path']} L{m['line']}: {line.strip()!r} does not name {name}"


# --------------------------------------------------------- the fetcher itself, on local indexes


@pytest.fixture
def pip_index(tmp_path, monkeypatch):
    """Make pip's configured index a local PEP 503 folder (no configuration file, no find-links);
    returns a function that lists a file there: ``add(path, name, listed_sha256)``."""
    simple = tmp_path / "simple"
    for var in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", simple.as_uri())
    realinputs.pip_sources.cache_clear()

    def add(path: Path, name: str, sha256: str | None) -> None:
        page = simple / name
        page.mkdir(parents=True, exist_ok=True)
        fragment = f"#sha256={sha256}" if sha256 else ""
        (page / "index.html").write_text(
            f'<!DOCTYPE html><html><body>\n<a href="{path.as_uri()}{fragment}">{path.name}</a>\n</body></html>\n'
        )

    yield add
    realinputs.pip_sources.cache_clear()


def _sdist(tmp_path: Path, files: dict[str, bytes]) -> tuple[Path, dict]:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    blob = gzip.compress(raw.getvalue())
    path = tmp_path / "files" / "demo-1.0.tar.gz"
    path.parent.mkdir()
    path.write_bytes(blob)
    pin = {
        "name": "Demo_Project",
        "version": "1.0",
        "filename": path.name,
        "size": len(blob),
        "sha256": hashlib.sha256(blob).hexdigest(),
        "cited": ["src/knobs.py"],
    }
    return path, pin


FILES = {
    "demo-1.0/PKG-INFO": b"Name: demo\n",
    "demo-1.0/setup.py": b"setup()\n",
    "demo-1.0/src/knobs.py": b"GPU_ARCHS\n",
    "demo-1.0/src/big.bin": b"x" * 5000,
    "demo-1.0/sub/setup.py": b"not top level\n",
}


def test_fetch_keeps_only_the_wanted_members_and_caches(tmp_path, pip_index):
    path, pin = _sdist(tmp_path, FILES)
    pip_index(path, "demo-project", pin["sha256"])  # found under the normalised name
    tree = sdist_tree(pin, cache=tmp_path / "cache")
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file() and not p.name.startswith(".")) == [
        "PKG-INFO",
        "setup.py",
        "src/knobs.py",
    ]
    path.unlink()  # the second call is served from the cache
    assert sdist_tree(pin, cache=tmp_path / "cache") == tree


def test_fetch_with_another_hash_is_an_error(tmp_path, pip_index):
    path, pin = _sdist(tmp_path, FILES)
    pip_index(path, "demo-project", None)  # the index lists no hash: the download is checked
    pin["sha256"] = "0" * 64
    with pytest.raises(CorpusError, match="sha256"):
        sdist_tree(pin, cache=tmp_path / "cache")
    assert [p.name for p in (tmp_path / "cache").iterdir()] == []


def test_an_index_listing_another_hash_is_an_error(tmp_path, pip_index):
    path, pin = _sdist(tmp_path, FILES)
    pip_index(path, "demo-project", "1" * 64)
    with pytest.raises(CorpusError, match="lists sha256 1111"):
        sdist_tree(pin, cache=tmp_path / "cache")


def test_fetch_without_a_cited_member_is_an_error(tmp_path, pip_index):
    path, pin = _sdist(tmp_path, {k: v for k, v in FILES.items() if "knobs" not in k})
    pip_index(path, "demo-project", pin["sha256"])
    with pytest.raises(CorpusError, match="src/knobs.py"):
        sdist_tree(pin, cache=tmp_path / "cache")


def test_fetch_that_cannot_download_says_how_to_run_without_network(tmp_path, pip_index):
    path, pin = _sdist(tmp_path, FILES)
    pip_index(path, "demo-project", pin["sha256"])
    path.unlink()
    with pytest.raises(CorpusError, match="cannot download .*RBB_TEST_CACHE"):
        sdist_tree(pin, cache=tmp_path / "cache")


def test_a_file_no_index_lists_says_where_it_looked(tmp_path, pip_index):
    path, pin = _sdist(tmp_path, FILES)
    pip_index(path, "other", pin["sha256"])
    with pytest.raises(CorpusError, match=r"cannot locate demo-1\.0\.tar\.gz .*simple .*RBB_TEST_CACHE"):
        sdist_tree(pin, cache=tmp_path / "cache")


def test_the_json_page_of_an_http_index_is_read(tmp_path, monkeypatch):
    """An index served over HTTP answers PEP 691 JSON (a relative file URL, the sha256 in
    ``hashes``); the file is fetched from there, whole, and checked."""
    import http.server
    import threading

    path, pin = _sdist(tmp_path, FILES)
    root = tmp_path / "www"
    (root / "simple" / "demo-project").mkdir(parents=True)
    shutil.copy(path, root / path.name)
    page = {
        "meta": {"api-version": "1.1"},
        "name": "demo-project",
        "files": [{"filename": path.name, "url": f"../../{path.name}", "hashes": {"sha256": pin["sha256"]}}],
    }
    (root / "simple" / "demo-project" / "index.json").write_text(json.dumps(page))
    accepts = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def do_GET(self):
            if self.path.endswith("/"):
                accepts.append(self.headers.get("Accept", ""))
                body = (root / self.path.lstrip("/") / "index.json").read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            super().do_GET()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for var in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX", "http_proxy", "HTTP_PROXY"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
        monkeypatch.setenv("PIP_INDEX_URL", f"http://user:secret@127.0.0.1:{server.server_address[1]}/simple")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        realinputs.pip_sources.cache_clear()
        got = pinned_file(pin, tmp_path / "got")
    finally:
        server.shutdown()
        server.server_close()
        realinputs.pip_sources.cache_clear()
    assert got.read_bytes() == path.read_bytes()
    assert accepts and accepts[0].startswith("application/vnd.pypi.simple.v1+json")


def test_pins_are_complete():
    for pin in PINS + json.loads((ROOT / "tests" / "real_wheels.json").read_text())["wheels"]:
        assert set(pin) >= {"name", "version", "filename", "size", "sha256"}, pin
        assert "url" not in pin, pin["name"]  # found through pip's configured index instead
        assert re.fullmatch(r"[0-9a-f]{64}", pin["sha256"]), pin["name"]
        assert pin["size"] > 0 and pin["version"] in pin["filename"]


def test_no_tracked_file_names_a_registry_host():
    """Real inputs are pinned by name, version, file name and sha256, never by a registry's URL."""
    hosts = ["pypi" + ".org", "python" + "hosted", "pypi" + ".python" + ".org"]
    proc = subprocess.run(
        ["git", "grep", "-n", "-I", "-i", "-F", *(f"-e{h}" for h in hosts)], cwd=ROOT, capture_output=True, text=True
    )
    if proc.returncode not in (0, 1):
        pytest.skip("not a git checkout")
    assert proc.stdout == ""


@pytest.mark.realinputs
def test_a_pin_is_found_through_pips_configured_index(tmp_path):
    """One fresh resolution, in an empty cache, through whatever index pip is set up to use."""
    pin = next(p for p in PINS if p["name"] == "torchvision")  # 11 KB
    tree = _tree_in(pin, tmp_path / "cache")
    marker = json.loads((tree / MARKER).read_text())
    assert marker["sha256"] == pin["sha256"] and marker["url"].endswith("/" + pin["filename"])
    assert (tree / "setup.py").is_file()


def _tree_in(pin: dict, cache: Path) -> Path:
    try:
        return sdist_tree(pin, cache=cache)
    except CorpusError as exc:
        pytest.fail(str(exc), pytrace=False)
