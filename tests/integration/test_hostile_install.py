"""Hostile programs and arguments for ``install``: a ``--python`` that floods, hangs or names its
wheels with legacy versions, a run stopped by SIGTERM or out of memory, pip options that would
send the wheels elsewhere, a second ``--``, ``-rFILE``, and a dry run that would run a project's
own build code. Every run is a child process with a memory limit and a private TMPDIR."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT, one_error
from helpers import hostile as G

MEMORY = 2 << 30


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def env_for(tmp_path: Path) -> dict:
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TMPDIR": str(tmp),
        "PIP_NO_CACHE_DIR": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "PIP_FIND_LINKS": "",
    }


def install(tmp_path: Path, *args: object, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", "install", "--targets", "gfx942", *map(str, args)],
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
        timeout=timeout,
        preexec_fn=_limit,
        cwd=tmp_path,
    )


def work_folders(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("rocm-build-backend-install-"))


# a --python that answers like Python when asked its version and does ``then`` when asked to run pip
def pretender(folder: Path, then: str) -> Path:
    body = (
        "import os, subprocess, sys\n"
        "if '-m' not in sys.argv:\n"
        "    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n" + then
    )
    return G.program(folder, "python3", body)


@pytest.mark.parametrize("body, said", [(G.FLOOD, "more than"), (G.SLEEP, "did not answer")])
def test_a_python_that_floods_or_hangs_is_stopped(tmp_path, body, said):
    fake = G.program(tmp_path / "bin", "python3", body)
    err = one_error(install(tmp_path, "--dry-run", "--python", fake, "--", "pkg", timeout=60))
    assert said in err
    assert work_folders(tmp_path) == []


def test_pip_output_past_the_limit_stops_the_run_and_leaves_no_folder(tmp_path):
    fake = pretender(tmp_path / "bin", G.FLOOD)
    err = one_error(install(tmp_path, "--python", fake, "--", "pkg", timeout=90))
    assert "more than" in err
    assert work_folders(tmp_path) == []


def test_sigterm_removes_the_work_folder(tmp_path):
    fake = pretender(tmp_path / "bin", G.SLEEP)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "install",
            "--targets",
            "gfx942",
            "--python",
            str(fake),
            "--",
            "pkg",
        ],
        env=env_for(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while (
        not (
            list((tmp_path / "tmp").glob("rocm-build-backend-install-*/collected"))
            or list((tmp_path / "tmp").glob("rocm-build-backend-install-*"))
        )
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    time.sleep(2)  # pip (the pretender) is running now
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert work_folders(tmp_path) == []


def test_a_killed_runs_work_folder_is_removed_by_the_next_run(tmp_path):
    env_for(tmp_path)
    dead = int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    )
    left = tmp_path / "tmp" / f"rocm-build-backend-install-{dead}-abc123"
    (left / "collected").mkdir(parents=True)
    (left / "collected" / "half.whl").write_bytes(b"half")
    os.utime(left, (1_000_000_000, 1_000_000_000))
    mine = tmp_path / "tmp" / "rocm-build-backend-install-notes"
    mine.mkdir()
    os.utime(mine, (1_000_000_000, 1_000_000_000))
    install(tmp_path, "--dry-run", "--", "--no-index", "--find-links", tmp_path / "links", "pkg")
    assert not left.exists() and mine.exists()


@pytest.mark.parametrize("args", [["-w", "DIR"], ["-wDIR"], ["--wheel-dir", "DIR"], ["--wheel-dir=DIR"]])
def test_a_wheel_dir_option_is_refused(tmp_path, args):
    err = one_error(install(tmp_path, "--", *args, "pkg"))
    assert "wheel-dir" in err
    assert not (tmp_path / "DIR").exists()


def test_a_second_double_dash_is_refused(tmp_path):
    err = one_error(install(tmp_path, "--dry-run", "--", "--no-index", "--", "pkg"))
    assert "--" in err


def test_a_requirements_file_attached_to_r_is_read_as_pip_reads_it(tmp_path):
    whl = G.fat_wheel(tmp_path / "links")
    (tmp_path / "reqs.txt").write_text(f"{whl}\n")
    proc = install(tmp_path, "--dry-run", "--", "-rreqs.txt", "--no-index")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pkg 1.0" in proc.stdout and "yes" in proc.stdout


def test_a_legacy_version_in_a_collected_wheel_is_one_clear_error(tmp_path):
    then = (
        "args = sys.argv\n"
        "out = args[args.index('--wheel-dir') + 1]\n"
        "os.makedirs(out, exist_ok=True)\n"
        "open(os.path.join(out, 'pkg-1.0.legacy-py3-none-any.whl'), 'wb').write(b'PK')\n"
    )
    fake = pretender(tmp_path / "bin", then)
    err = one_error(install(tmp_path, "--dry-run", "--python", fake, "--", "pkg"))
    assert "1.0.legacy" in err


SETUP = (
    "import pathlib\n"
    "pathlib.Path({canary!r}).write_text('ran')\n"
    "from setuptools import setup\nsetup(name='proj', version='1.0')\n"
)


@pytest.mark.parametrize("how", ["folder", "sdist", "requirements"])
def test_a_dry_run_builds_nothing_and_says_so(tmp_path, how):
    canary = tmp_path / "canary"
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "setup.py").write_text(SETUP.format(canary=str(canary)))
    if how == "sdist":
        links = tmp_path / "links"
        links.mkdir()
        import tarfile

        with tarfile.open(links / "proj-1.0.tar.gz", "w:gz") as tar:
            (proj / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: proj\nVersion: 1.0\n")
            tar.add(proj, arcname="proj-1.0")
        args = ["--no-index", "--find-links", str(links), "--no-build-isolation", "proj"]
    elif how == "folder":
        args = ["--no-index", "--no-build-isolation", str(proj)]
    else:
        (tmp_path / "reqs.txt").write_text("./proj\n")
        args = ["--no-index", "--no-build-isolation", "-r", "reqs.txt"]
    err = one_error(install(tmp_path, "--dry-run", "--", *args), 3)
    assert "dry run builds nothing" in err
    assert not canary.exists()
