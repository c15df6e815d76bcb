"""Hostile environments for ``check --env`` that need no venv: interpreters that flood or answer
nonsense, RECORD entries that leave site-packages, one library under many spellings, a
venv-looking working folder, control characters in METADATA (planted files in a real venv:
``tests/integration/test_hostile_env_venvs.py``). Every run here is a child process with a memory
limit, so a defect shows as a failure, not as a machine that swaps."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from rocm_build_backend.cli import render
from rocm_build_backend.wheel.check.environment import check_environment

from helpers import capped_cli as cli, one_error
from helpers import hostile as G


def check_env(python: Path | str, *more: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return cli("check", "--env", python, "--targets", "gfx90a", "--json", "--no-cache", *more, cwd=cwd)


@pytest.mark.parametrize(
    "body, said",
    [
        (G.FLOOD, "more than"),
        (G.answers("{}"), "python"),
        (G.answers("[1]"), "python"),
        (G.answers('{"python": 1, "dirs": "x"}'), "python"),
    ],
)
def test_an_interpreter_that_answers_nonsense_is_one_clear_error(tmp_path, body, said):
    fake = G.program(tmp_path / "bin", "python3", body)
    err = one_error(check_env(fake))
    assert said in err


def test_a_command_name_is_found_on_path_not_in_the_working_folder(tmp_path):
    here = tmp_path / "looks-like-a-venv"
    site = here / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (here / "pyvenv.cfg").write_text("home = /nowhere\ninclude-system-site-packages = false\n")
    G.site_with_dist(site, "decoy")
    proc = check_env("python3", cwd=here)
    assert proc.returncode in (0, 1, 3) and "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert not any(str(here) in p or not os.path.isabs(p) for p in doc["site_packages"]), doc["site_packages"]
    assert doc["python"] != "python3" and os.path.isabs(doc["python"])
    assert "decoy" not in [d["name"] for d in doc["distributions"]]


def test_record_entries_outside_site_packages_are_not_opened(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    lib = (G.DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes()
    (outside / "lib.so").write_bytes(lib)
    site = tmp_path / "site"
    rows = [
        G.record_line(str(outside / "lib.so"), lib),
        G.record_line("../outside/lib.so", lib),
        G.record_line("pkg/../../outside/lib.so", lib),
    ]
    G.site_with_dist(site, "escapes", files={"escapes/__init__.py": b""}, record_rows=rows)
    report = check_environment(None, ["gfx942"], locations=[site])
    assert report.dists == [], [d.to_dict() for d in report.dists]
    assert report.scanned["opened"] == 0 and report.scanned["audited"] == 0, report.scanned


def test_one_library_under_many_spellings_is_read_once(tmp_path):
    site = tmp_path / "site"
    G.spellings(site, 3000)
    report = check_environment(None, ["gfx942"], locations=[site])
    assert report.scanned["audited"] == 1 and report.scanned["opened"] == 1, report.scanned
    (dist,) = report.dists
    assert list(dist.files) == ["spelled/_hip.so"]


def test_name_and_version_from_metadata_are_escaped(tmp_path):
    site = tmp_path / "site"
    dist_info = G.site_with_dist(site, "evil")
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: evil\x1b[2J\x1b[1AFAKE: all good\nVersion: 1\x1b[0m\n\n"
    )
    text = render.environment(check_environment(None, ["gfx90a"], locations=[site]))
    assert "\x1b" not in text
    assert "evil\\x1b[2J\\x1b[1AFAKE" in text and "1\\x1b[0m" in text
