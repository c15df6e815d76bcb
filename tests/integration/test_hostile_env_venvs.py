"""Hostile environments for ``check --env`` in real venvs: planted ``RECORD``, ``METADATA`` and
``pyvenv.cfg`` files (a FIFO, a link to ``/dev/zero``), and ``.pth`` code that querying the
interpreter must not run (the others: ``tests/unit/test_hostile_env.py``). Every run here is a
child process with a memory limit, so a defect shows as a failure, not as a machine that swaps."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import capped_cli as cli, one_error
from helpers import hostile as G


def venv(folder: Path, *, system: bool = False) -> tuple[Path, Path]:
    """(its python, its site-packages): a real venv, without pip."""
    args = [sys.executable, "-m", "venv", "--without-pip", *(["--system-site-packages"] if system else []), str(folder)]
    subprocess.run(args, check=True, capture_output=True)
    (site,) = (folder / "lib").glob("python3*/site-packages")
    return folder / "bin" / "python", site


def check_env(python: Path | str, *more: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return cli("check", "--env", python, "--targets", "gfx90a", "--json", "--no-cache", *more, cwd=cwd)


# --------------------------------------------------------------------------- planted files


@pytest.mark.parametrize("how", ["zero", "fifo"])
@pytest.mark.parametrize("member", ["RECORD", "METADATA"])
def test_planted_metadata_files_are_not_read(tmp_path, member, how):
    python, site = venv(tmp_path / "venv")
    G.site_with_dist(site, "good")
    dist_info = G.site_with_dist(site, "planted")
    G.plant(dist_info / member, how)
    proc = check_env(python)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    names = [d["name"] for d in doc["distributions"]]
    assert "good" in names, doc
    if member == "RECORD":
        assert "planted" not in names and any("planted" in n for n in doc["notes"]), doc


@pytest.mark.parametrize("how", ["zero", "fifo"])
def test_a_planted_pyvenv_cfg_is_one_clear_error(tmp_path, how):
    python, site = venv(tmp_path / "venv")
    G.site_with_dist(site, "good")
    G.plant(tmp_path / "venv" / "pyvenv.cfg", how)
    err = one_error(check_env(python))
    assert "pyvenv.cfg" in err


def test_querying_an_interpreter_runs_nothing_of_its_environment(tmp_path):
    python, site = venv(tmp_path / "venv", system=True)  # not read from its layout: asked
    canary = tmp_path / "canary"
    (site / "zz_canary.pth").write_text(f"import pathlib; pathlib.Path({str(canary)!r}).write_text('ran')\n")
    (site / "sitecustomize.py").write_text(f"import pathlib; pathlib.Path({str(canary)!r} + '2').write_text('ran')\n")
    G.site_with_dist(site, "good")
    proc = check_env(python)
    assert proc.returncode in (0, 1), proc.stderr
    assert not canary.exists() and not Path(str(canary) + "2").exists()
    doc = json.loads(proc.stdout)
    assert str(site) in doc["site_packages"], doc["site_packages"]
    assert "good" in [d["name"] for d in doc["distributions"]]
