"""The switch corpus (tests/switch_corpus.py): what ``plan`` turns on for 19 real GPU projects (20 sdists),
scored against an answer key written from their sources, for an NVIDIA and an AMD target. Goals:
recall at least 0.9 (the switches that turn the GPU build on are turned on), precision 1.0 (no
wrong switch applied, none the key says to leave alone touched). Reads the sdists only; builds nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import MORE_PINS, ROOT, CorpusError, cache_dir, load_pins, sdist_tree
from switch_corpus import KEY

PINS = {(p["name"], p["version"]): p for p in load_pins() + load_pins(MORE_PINS)}


def _trees() -> dict:
    try:
        return {project: sdist_tree(PINS[project]) for project in KEY}
    except CorpusError as exc:
        pytest.fail(str(exc), pytrace=False)
    raise AssertionError  # not reached


@pytest.mark.realinputs
def test_the_key_names_real_lines_of_at_least_16_projects():
    assert len({name for name, _ in KEY}) >= 16 and all(project in PINS for project in KEY)
    trees = _trees()
    for project, key in KEY.items():
        for entries in key["vendors"].values():
            for file, line, name, _ in entries:
                source = (trees[project] / file).read_text(encoding="utf-8", errors="replace").splitlines()
                near = "\n".join(
                    source[max(0, line - 3) : line + 1]
                )  # a loop over names above; a call split over lines
                assert name in near, (project, file, line, name)


@pytest.mark.realinputs
def test_recall_and_precision_on_the_corpus(build_env):
    _trees()  # downloaded here, so that a network failure reads as one
    build_env["PYTHONPATH"] = f"{ROOT}:{ROOT / 'tests'}"
    build_env["RBB_TEST_CACHE"] = str(cache_dir())  # the sdists just fetched, not a second download
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "switch_corpus.py")],
        capture_output=True,
        text=True,
        env=build_env,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    for vendor in ("nvidia", "amd"):
        got = data["totals"][vendor]
        assert got["recall"] >= 0.9, (vendor, got, [(r["project"], r["missed"]) for r in data["rows"] if r["missed"]])
        assert got["precision"] == 1.0 and got["touched"] == 0, [
            (r["project"], r["wrong"], r["touched"]) for r in data["rows"]
        ]
        assert got["applied"] >= 8  # the reader itself turns switches on, not only the profiles
    lightgbm = next(r for r in data["rows"] if r["project"] == "lightgbm 4.6.0")
    assert any(
        "USE_GPU: info: left off: it needs another API: find_package(OpenCL)" in line for line in lightgbm["lines"]
    ), lightgbm["lines"]
