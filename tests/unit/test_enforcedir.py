"""Enforcement's folder fails closed: an unusable usual folder gives the per-user fallback (absolute,
0700, the same every build), none usable stops the build with one error, and a folder found in
place is used only when it is the user's alone and holds exactly what its name says (else it is
replaced atomically). Real folders in a temporary tree; AMD's programs (no compiler needed)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from rocm_build_backend.builder import enforcedir
from rocm_build_backend.builder.enforce import install
from rocm_build_backend.errors import EnforcementError

OTHER_UID = 54321  # a user who is not us (the tests may run as root, so chown works)


def _env(tmp_path: Path, **over: str) -> dict[str, str]:
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {"HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path / "tmp"), "PATH": os.defpath}
    env.update(over)
    return {k: v for k, v in env.items() if v != "-"}


def _folder(variables: dict[str, str]) -> Path:
    return Path(variables["CMAKE_HIP_COMPILER_LAUNCHER"].split(";")[0]).parent


def _install(env: dict[str, str], tmp_path: Path) -> tuple[Path, list[str]]:
    notes: list[str] = []
    return _folder(install("amd", ["gfx90a"], env, tmp_path / "record", notes)), notes


def test_the_usual_folder_when_it_can_be_used(tmp_path):
    folder, notes = _install(_env(tmp_path), tmp_path)
    assert folder.parent == tmp_path / "home" / ".cache" / "rocm-build-backend" / "enforce" and notes == []
    assert stat.S_IMODE(folder.parent.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("case", ["XDG_CACHE_HOME is a file", "HOME is a file", "no HOME, no passwd entry"])
def test_an_unusable_usual_folder_falls_back_to_the_same_per_user_folder(tmp_path, monkeypatch, case):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    over = {
        "XDG_CACHE_HOME is a file": {"XDG_CACHE_HOME": str(a_file)},
        "HOME is a file": {"HOME": str(a_file)},
        "no HOME, no passwd entry": {"HOME": "-"},
    }[case]
    monkeypatch.setattr(enforcedir, "_passwd_home", lambda uid: "")
    monkeypatch.chdir(tmp_path)
    env = _env(tmp_path, **over)
    folder, notes = _install(env, tmp_path)
    top = tmp_path / "tmp" / f"rocm-build-backend-{os.getuid()}"
    assert folder.parent == top / "enforce" and folder.is_absolute()
    assert stat.S_IMODE(top.stat().st_mode) == 0o700 and top.stat().st_uid == os.getuid()
    assert len(notes) == 1 and f"pinned compilers in {top / 'enforce'}" in notes[0]
    assert not (tmp_path / "~").exists()  # never a relative ~/.cache in the working folder
    assert _install(env, tmp_path)[0] == folder  # stable: cached compiler paths keep working


def test_no_usable_folder_stops_the_build_with_one_error(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    env = _env(tmp_path, XDG_CACHE_HOME=str(a_file), TMPDIR=str(a_file))
    with pytest.raises(EnforcementError) as exc:
        _install(env, tmp_path)
    lines = exc.value.lines()
    assert len(lines) == 2 and lines[0].startswith("error: no folder for the pinned compilers can be used: ")
    assert "enforce = false" in lines[1]


def test_a_shared_cache_others_can_write_is_passed_over(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone could swap our folder
    folder, notes = _install(_env(tmp_path, XDG_CACHE_HOME=str(shared)), tmp_path)
    assert folder.parent == tmp_path / "tmp" / f"rocm-build-backend-{os.getuid()}" / "enforce"
    assert "can be written by others" in notes[0]


@pytest.mark.skipif(os.getuid() != 0, reason="planting another user's folder needs chown")
def test_a_fallback_top_folder_of_another_user_is_refused(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    top = tmp_path / "tmp" / f"rocm-build-backend-{os.getuid()}"
    (top / "enforce").mkdir(parents=True)
    os.chown(top, OTHER_UID, OTHER_UID)
    with pytest.raises(EnforcementError, match="belongs to user 54321"):
        _install(_env(tmp_path, XDG_CACHE_HOME=str(a_file)), tmp_path)


def test_a_damaged_folder_is_replaced(tmp_path):
    env = _env(tmp_path)
    folder, _ = _install(env, tmp_path)
    launcher = folder / "hip-launcher"
    good = launcher.read_bytes()
    launcher.unlink()  # a launcher file removed: before, every later build with these targets failed
    again, notes = _install(env, tmp_path)
    assert again == folder and launcher.read_bytes() == good
    assert notes == [f"enforce: replaced {folder} (its contents are not what its name says)"]
    (folder / "hip_launcher.py").write_text("import os; os.system('echo PWNED')\n")  # edited in place
    assert "not what its name says" in _install(env, tmp_path)[1][0]
    assert "PWNED" not in (folder / "hip_launcher.py").read_text()
    assert _install(env, tmp_path)[1] == []  # intact now: reused as it is


@pytest.mark.skipif(os.getuid() != 0, reason="planting another user's folder needs chown")
def test_a_foreign_folder_planted_under_the_name_is_never_run(tmp_path):
    env = _env(tmp_path)
    folder, _ = _install(env, tmp_path)
    launcher = folder / "hip-launcher"
    launcher.write_text("#!/bin/sh\necho PWNED\n")  # the planter's launcher, mode 0777, their folder
    for path in (folder, *folder.iterdir()):
        os.chown(path, OTHER_UID, OTHER_UID)
        path.chmod(0o777)
    again, notes = _install(env, tmp_path)
    assert again == folder and "PWNED" not in launcher.read_text()
    assert folder.stat().st_uid == os.getuid() and stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert notes == [f"enforce: replaced {folder} (it belongs to user {OTHER_UID})"]
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".tmp-")]  # nothing left aside


def test_others_write_permission_inside_our_folder_gets_it_replaced(tmp_path):
    env = _env(tmp_path)
    folder, _ = _install(env, tmp_path)
    (folder / "hip-launcher").chmod(0o777)
    assert "writable by others" in _install(env, tmp_path)[1][0]
    assert stat.S_IMODE((folder / "hip-launcher").stat().st_mode) & 0o022 == 0


def test_a_loose_umask_still_gives_a_folder_that_passes_its_own_check(tmp_path):
    env = _env(tmp_path)
    old = os.umask(0o000)
    try:
        folder, _ = _install(env, tmp_path)
        assert _install(env, tmp_path)[1] == []
    finally:
        os.umask(old)
    assert all(p.is_symlink() or stat.S_IMODE(p.lstat().st_mode) & 0o022 == 0 for p in [folder, *folder.rglob("*")])


def test_a_link_planted_under_the_name_is_replaced_not_followed(tmp_path):
    env = _env(tmp_path)
    folder, _ = _install(env, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "hip-launcher").write_text("#!/bin/sh\necho PWNED\n")
    shutil.rmtree(folder)
    folder.symlink_to(elsewhere)
    again, notes = _install(env, tmp_path)
    assert again == folder and not folder.is_symlink() and "PWNED" not in (folder / "hip-launcher").read_text()
    assert notes == [f"enforce: replaced {folder} (not a folder)"] and (elsewhere / "hip-launcher").exists()


def test_an_intact_folder_is_read_and_used_with_nothing_written(tmp_path, monkeypatch):
    env = _env(tmp_path)
    folder, _ = _install(env, tmp_path)
    before = {p: p.lstat().st_ino for p in [folder, *folder.rglob("*")]}

    def no_write(*args: object) -> None:
        raise AssertionError("written again")

    monkeypatch.setattr(enforcedir, "write", no_write)
    monkeypatch.setattr(enforcedir.tempfile, "mkdtemp", no_write)
    again, notes = _install(env, tmp_path)
    assert again == folder and notes == []
    assert {p: p.lstat().st_ino for p in [folder, *folder.rglob("*")]} == before


@pytest.mark.parametrize("change", ["a file added", "a link turned", "a program's executable bit taken off"])
def test_anything_beyond_what_the_name_says_gets_it_replaced(tmp_path, change):
    env = _env(tmp_path)
    folder, _ = _install(env, tmp_path)
    good = {p.relative_to(folder) for p in folder.rglob("*")}
    if change == "a file added":
        (folder / "extra").write_text("")
    elif change == "a link turned":
        (folder / "targets.json").unlink()
        (folder / "targets.json").symlink_to(tmp_path / "elsewhere.json")
    else:
        (folder / "hip-launcher").chmod(0o644)
    again, notes = _install(env, tmp_path)
    assert again == folder and notes == [f"enforce: replaced {folder} (its contents are not what its name says)"]
    assert {p.relative_to(folder) for p in folder.rglob("*")} == good and not (folder / "targets.json").is_symlink()
    assert os.access(folder / "hip-launcher", os.X_OK)
