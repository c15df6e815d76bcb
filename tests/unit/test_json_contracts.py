"""The --json outputs of check, cache and index: real runs of the CLI, each validated against the
JSON Schema shipped in the package (``rocm_build_backend/data/schemas/<verb>.schema.json``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from rocm_build_backend import data
from helpers import make_wheel, ROOT, TESTS

BIN = TESTS / "data" / "index"


def validate(verb: str, out: str) -> dict:
    doc = json.loads(out)
    schema = json.loads(data.path(f"schemas/{verb}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert next(iter(doc)) == "schema_version" and doc["schema_version"] == 1
    return doc


def cli(*args, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    return subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={**base, "PYTHONPATH": str(ROOT), **(env or {})},
    )


@pytest.fixture
def wheels(tmp_path) -> Path:
    folder = tmp_path / "wheels"
    so = (BIN / "hip_gfx90a_gfx942_cov5.so").read_bytes()
    make_wheel(folder, "real-dev", "1.0", members={"real_dev/_k.so": so}, stamp=False)
    make_wheel(folder, "stamped", "1.0", device={"stamped/_k.so": ["gfx1100"]})
    make_wheel(folder, "pure", "1.0", requires_python=">=3.8")
    (folder / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    return folder


def test_check_json(wheels):
    every = sorted(wheels.glob("*.whl"))
    for args, code in ((["--targets", "gfx90a,gfx942"], 3), (["--targets", "gfx1100"], 1)):
        proc = cli("check", "--json", *args, *every)
        assert proc.returncode == code, proc.stderr
        doc = validate("check", proc.stdout)
        assert doc["exit_code"] == code
        assert {w["status"] for w in doc["wheels"]} >= {"unknown"}
    proc = cli(
        "check",
        "--json",
        "--targets",
        "gfx90a",
        wheels / "real_dev-1.0-py3-none-any.whl",
        wheels / "pure-1.0-py3-none-any.whl",
    )
    doc = validate("check", proc.stdout)
    assert proc.returncode == 0 and doc["wheels"][0]["files"]["real_dev/_k.so"]["complete"] == ["gfx90a", "gfx942"]
    proc = cli("check", "--json", "--root", wheels, wheels / "pure-1.0-py3-none-any.whl")  # no GPU found
    validate("check", proc.stdout)


def test_index_json(wheels, tmp_path):
    out = tmp_path / "out"
    proc = cli("index", "--json", wheels, "-o", out)
    doc = validate("index", proc.stdout)
    assert proc.returncode == 1 and "broken-1.0-py3-none-any.whl" in doc["skipped"]
    assert set(doc["indexes"]) == {"gfx90a", "gfx942", "gfx1100"}
    doc = validate("index", cli("index", "--json", "--family", "--targets", "gfx94X-dcgpu", wheels, "-o", out).stdout)
    assert list(doc["indexes"]) == ["gfx94X-dcgpu", "gfx90a", "gfx942", "gfx1100"]  # the others are kept up to date
    doc = validate(
        "index", cli("index", "--json", "--base-url", "https://cdn.example/w", wheels, "-o", tmp_path / "cdn").stdout
    )
    assert doc["metadata_upload"] == str(tmp_path / "cdn" / "files")


def pip_cache(tmp_path: Path, wheels: Path) -> Path:
    cache = tmp_path / "pip-cache"
    for i, whl in enumerate(sorted(wheels.glob("*.whl"))):
        folder = cache / "wheels" / "ab" / "cd" / "ef" / f"{i:056x}"
        folder.mkdir(parents=True)
        (folder / whl.name).write_bytes(whl.read_bytes())
        (folder / "origin.json").write_text("{}")
    return cache


def uv_cache(tmp_path: Path, wheels: Path) -> Path:
    import zipfile

    cache = tmp_path / "uv-cache"
    archive = cache / "archive-v0" / "k3y5for4rch1ve"
    with zipfile.ZipFile(wheels / "real_dev-1.0-py3-none-any.whl") as zf:
        zf.extractall(archive)
    link = cache / "wheels-v5" / "pypi" / "real-dev" / "real_dev-1.0-py3-none-any"
    link.parent.mkdir(parents=True)
    link.symlink_to(archive)
    return cache


def test_cache_json(wheels, tmp_path):
    pip, uv = pip_cache(tmp_path, wheels), uv_cache(tmp_path, wheels)
    for verb in (["list"], ["purge"], ["purge", "--yes"]):
        proc = cli("cache", *verb, "--json", "--targets", "gfx1100", "--cache-dir", pip, "--cache-dir", uv)
        doc = validate("cache", proc.stdout)
        assert doc["mode"] == {"list": "list", "purge": "purge (dry run)"}.get(" ".join(verb), "purge")
        assert [c["source"] for c in doc["caches"]] == ["--cache-dir", "--cache-dir"]
    assert doc["exit_code"] == 0 and any(e["action"] == "removed" for e in doc["entries"])
    home = tmp_path / "home"
    home.mkdir()
    proc = cli(
        "cache",
        "list",
        "--json",
        "--targets",
        "gfx90a",
        env={"HOME": str(home), "PIP_CACHE_DIR": str(pip)},
        cwd=tmp_path,
    )
    doc = validate("cache", proc.stdout)
    sources = [(c["tool"], c["source"].split(" (")[0]) for c in doc["caches"]]
    assert sources == [("pip", "PIP_CACHE_DIR"), ("uv", "uv's default")]
    assert doc["caches"][0]["source"] == "PIP_CACHE_DIR (pip agrees)"  # pip asked (pip cache dir)
