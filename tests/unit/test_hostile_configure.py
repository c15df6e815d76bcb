"""Hostile project folders for ``configure`` (and ``plan``, which reads the same file), and
hostile values that reach the terminal through an error: each one clear ``error:`` line, the
file left as it was, nothing forged on the terminal."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, one_error
from helpers import hostile as G

SETUP_PY = "from setuptools import setup\nsetup(name='legacy', version='1.0')\n"


def cli(*args: object, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=timeout,
    )


@pytest.mark.parametrize("kind", ["array", "table"])
@pytest.mark.parametrize("verb", ["configure", "plan"])
def test_deep_nesting_is_one_clear_error(tmp_path, kind, verb):
    text = G.deep_toml(100_000, kind)
    assert len(text) < 1 << 20
    (tmp_path / "pyproject.toml").write_text(text)
    err = one_error(cli(verb, tmp_path))
    assert "pyproject.toml" in err
    assert (tmp_path / "pyproject.toml").read_text() == text


def test_a_folder_named_pyproject_toml_is_refused(tmp_path):
    (tmp_path / "setup.py").write_text(SETUP_PY)
    (tmp_path / "pyproject.toml").mkdir()
    err = one_error(cli("configure", tmp_path))
    assert "folder" in err
    assert (tmp_path / "pyproject.toml").is_dir()


@pytest.mark.parametrize("how", ["zero", "fifo"])
def test_a_special_pyproject_toml_beside_setup_py_is_refused_never_replaced(tmp_path, how):
    (tmp_path / "setup.py").write_text(SETUP_PY)
    G.plant(tmp_path / "pyproject.toml", how)
    one_error(cli("configure", tmp_path))
    planted = tmp_path / "pyproject.toml"
    assert planted.is_symlink() if how == "zero" else stat.S_ISFIFO(os.lstat(planted).st_mode)


def immutable(path: Path) -> None:
    if os.geteuid() != 0 or subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("needs root and chattr +i")


@pytest.mark.parametrize("what", ["file", "folder"])
def test_an_unwritable_pyproject_or_folder_is_one_clear_error(tmp_path, what):
    project = tmp_path / "proj"
    project.mkdir()
    file = project / "pyproject.toml"
    text = '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    file.write_text(text)
    target = file if what == "file" else project
    if what == "folder" and os.geteuid() != 0:
        project.chmod(0o555)
    else:
        immutable(target)
    try:
        err = one_error(cli("configure", project))
    finally:
        subprocess.run(["chattr", "-i", str(target)], capture_output=True)
        project.chmod(0o755)
    assert "pyproject.toml" in err or str(project) in err
    assert file.read_text() == text
    assert sorted(p.name for p in project.iterdir()) == ["pyproject.toml"]


def test_an_edit_made_between_the_read_and_the_write_is_kept(tmp_path, monkeypatch):
    from rocm_build_backend.builder import configure as C
    from rocm_build_backend.errors import RocmBuildBackendError

    file = tmp_path / "pyproject.toml"
    file.write_text('[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n')
    theirs = file.read_text() + "\n[tool.theirs]\nx = 1\n"
    real = C._new_text

    def meanwhile(path, before, *rest):  # someone saves the file while configure works on it
        out = real(path, before, *rest)
        file.write_text(theirs)
        return out

    monkeypatch.setattr(C, "_new_text", meanwhile)
    with pytest.raises(RocmBuildBackendError) as exc:
        C.configure(tmp_path)
    assert "changed" in exc.value.message
    assert file.read_text() == theirs


def test_configure_keeps_the_mode_and_writes_a_new_file_with_the_usual_one(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    (old / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    )
    (old / "pyproject.toml").chmod(0o640)
    assert cli("configure", old).returncode == 0
    assert stat.S_IMODE((old / "pyproject.toml").stat().st_mode) == 0o640
    new = tmp_path / "new"
    new.mkdir()
    (new / "setup.py").write_text(SETUP_PY)
    umask = os.umask(0o022)
    os.umask(umask)
    assert cli("configure", new).returncode == 0
    assert stat.S_IMODE((new / "pyproject.toml").stat().st_mode) == 0o666 & ~umask


FORGED = "\x1b[2J\nFAKE: all good"


def test_the_backend_name_configure_prints_is_escaped(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "evil\\u001b[2J\\nFAKE: all good"\n'
    )
    proc = cli("configure", "--dry-run", tmp_path)
    assert "\x1b" not in proc.stdout + proc.stderr
    assert not any(ln.startswith("FAKE") for ln in (proc.stdout + proc.stderr).splitlines()), proc.stdout


def test_config_setting_names_in_errors_are_escaped(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    )
    proc = cli("plan", tmp_path, "-C", f"rocm-build-backend.bogus{FORGED}=1")
    one_error(proc)
    assert "\x1b" not in proc.stderr and "\\x1b[2J\\nFAKE" in proc.stderr
