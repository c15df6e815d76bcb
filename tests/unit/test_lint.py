"""ruff's lint and formatter, as pyproject.toml configures them, find nothing in the package, the
tests, the benchmarks and the tools; and they would find a planted unused import and a planted
unformatted line."""

from __future__ import annotations

import shutil
import subprocess
import sys

from helpers import ROOT


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ruff_finds_nothing():
    proc = _ruff("rocm_build_backend", "tests", "bench", "tools")
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]


def test_ruff_format_leaves_everything_as_it_is():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "format",
            "--check",
            "--no-cache",
            "rocm_build_backend",
            "tests",
            "bench",
            "tools",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]


def test_ruff_format_would_find_an_unformatted_line(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "planted.py").write_text("x = {'a':1}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "planted.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and "planted.py" in proc.stdout


def test_ruff_would_find_an_unused_import(tmp_path):
    tree = tmp_path / "tree"
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    tree.mkdir()
    (tree / "planted.py").write_text("import os\n")
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", str(tree)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and "F401" in proc.stdout
