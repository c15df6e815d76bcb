"""The package is typed: `mypy --strict` passes on all of it (house rule; CI runs this test)."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT


def test_mypy_strict_passes_on_the_package(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), "rocm_build_backend"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
