"""Hostile inputs for check, index and cache: small generated wheels, caches and state files.

Each test builds its input here (a few KB at most) and shows one defect that a wheel or a
folder from someone else could cause: a deletion outside what we made, an unbounded read, a
traceback instead of a verdict, a usage error accepted as success.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.wheel import index as I
from wheelmaker import make_wheel

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocm_build_backend", *map(str, args)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, timeout=120)


# --------------------------------------------------------------------------- index: its state file


@pytest.mark.parametrize("where", ["hosted", "pages"])
def test_index_never_deletes_a_path_its_state_file_names_outside_the_output(tmp_path, where):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"]})
    out = tmp_path / "out"
    I.build_index(wheels, out)
    victim = tmp_path / "victim.txt"
    victim.write_text("not the index's")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "kept.whl").write_text("not the index's either")
    (out / "escape").symlink_to(outside)
    state_path = out / I.STATE_NAME
    state = json.loads(state_path.read_text())
    names = [str(victim), "../victim.txt", "escape/kept.whl"]
    if where == "hosted":
        state["hosted"] += names
    else:
        state["indexes"]["gfx90a"]["pages"] += names
    state_path.write_text(json.dumps(state))
    result = I.build_index(wheels, out)
    assert victim.read_text() == "not the index's"
    assert (outside / "kept.whl").is_file()
    assert result.removed == []
    assert any("state file" in w for w in result.warnings)
    # the state is rebuilt from the folder: the next run is clean and reuses the facts
    again = I.build_index(wheels, out)
    assert again.warnings == [] and again.reused == 1


def test_index_state_file_naming_a_file_it_does_not_make_is_damaged(tmp_path):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"]})
    out = tmp_path / "out"
    I.build_index(wheels, out)
    mine = out / "README.txt"  # the user's own file, inside the output folder
    mine.write_text("index of our wheels")
    state_path = out / I.STATE_NAME
    state = json.loads(state_path.read_text())
    state["hosted"].append("README.txt")
    state_path.write_text(json.dumps(state))
    I.build_index(wheels, out)
    assert mine.read_text() == "index of our wheels"
