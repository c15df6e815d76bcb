"""`build SDIST`: an sdist unpacked safely (no member out of its folder, no link out, bounded),
and a bad one refused with one error and a hint (exit 2) before anything builds; `install`'s
reading of pip's installation report. Real builds of real sdists are in
tests/integration/test_sdist_builds.py.
"""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.builder import sdist as S
from rocm_build_backend.wheel.install.args import SplitArgs
from rocm_build_backend.wheel.install.sources import rest, settings, to_build
from helpers import run_main

PYPROJECT = b'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'


def _tar(path: Path, members: list[tuple[str, bytes | None, str | None]]) -> Path:
    """A .tar.gz with (name, data, link target) members: data None and no link is a folder."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            elif data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def _good(path: Path, *extra: tuple[str, bytes | None, str | None]) -> Path:
    return _tar(path, [("demo-1.0/pyproject.toml", PYPROJECT, None), ("demo-1.0/demo/__init__.py", b"", None), *extra])


def _refused(capsys, tmp_path: Path, archive: Path) -> str:
    code, out, err = run_main(capsys, "build", archive, "-o", tmp_path / "out", "--targets", "gfx90a")
    lines = err.splitlines()
    assert code == 2 and out == "", (code, out, err)
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), err
    assert not (tmp_path / "out").exists()
    return err


def test_a_good_sdist_unpacks_with_its_inner_links(tmp_path):
    archive = _good(
        tmp_path / "demo-1.0.tar.gz", ("demo-1.0/docs", None, None), ("demo-1.0/docs/README", None, "../pyproject.toml")
    )
    (tmp_path / "into").mkdir()
    folder = S.unpack(archive, tmp_path / "into")
    assert folder == tmp_path / "into" / "demo-1.0"
    assert (folder / "docs" / "README").read_bytes() == PYPROJECT


@pytest.mark.parametrize(
    "member, link",
    [
        ("../escape.txt", None),
        ("/tmp/absolute.txt", None),
        ("demo-1.0/../../escape.txt", None),
        ("demo-1.0/out", "../../../etc/passwd"),
        ("demo-1.0/abs", "/etc"),
    ],
)
def test_a_member_or_link_out_of_the_folder_is_refused(capsys, tmp_path, member, link):
    archive = _good(tmp_path / "demo-1.0.tar.gz", (member, None if link else b"x", link))
    err = _refused(capsys, tmp_path, archive)
    assert "outside the folder" in err or "out of the folder" in err
    assert not (tmp_path / "escape.txt").exists()


def test_a_write_through_an_inner_link_stays_inside(capsys, tmp_path):
    archive = _good(
        tmp_path / "demo-1.0.tar.gz",
        ("demo-1.0/sub", None, None),
        ("demo-1.0/up", None, "sub"),
        ("demo-1.0/up/x", b"x", None),
    )
    (tmp_path / "into").mkdir()
    folder = S.unpack(archive, tmp_path / "into")
    assert (folder / "sub" / "x").read_bytes() == b"x"
    archive = _good(tmp_path / "demo-1.0.tar.gz", ("demo-1.0/up", None, "../.."), ("demo-1.0/up/x", b"x", None))
    assert "out of the folder" in _refused(capsys, tmp_path, archive)
    assert not (tmp_path / "x").exists()


def _special(path: Path, name: str, kind: bytes, link: str = "") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for member, data in (("demo-1.0/pyproject.toml", PYPROJECT), ("demo-1.0/README", b"read me")):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, link
        tar.addfile(info)
    return path


def test_hard_links_and_special_files(capsys, tmp_path):
    archive = _special(tmp_path / "demo-1.0.tar.gz", "demo-1.0/COPY", tarfile.LNKTYPE, "demo-1.0/README")
    (tmp_path / "into").mkdir()
    assert (S.unpack(archive, tmp_path / "into") / "COPY").read_bytes() == b"read me"
    archive = _special(tmp_path / "demo-1.0.tar.gz", "demo-1.0/COPY", tarfile.LNKTYPE, "../../etc/passwd")
    assert "outside the folder" in _refused(capsys, tmp_path, archive)
    archive = _special(tmp_path / "demo-1.0.tar.gz", "demo-1.0/pipe", tarfile.FIFOTYPE)
    assert "device file or FIFO" in _refused(capsys, tmp_path, archive)


def test_zip_members_out_of_the_folder_are_refused(capsys, tmp_path):
    archive = tmp_path / "demo-1.0.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("demo-1.0/pyproject.toml", PYPROJECT)
        zf.writestr("..\\evil.txt", b"x")
    assert "outside the folder" in _refused(capsys, tmp_path, archive)


def test_not_an_archive_and_not_an_sdist_are_refused(capsys, tmp_path):
    text = tmp_path / "demo-1.0.tar.gz"
    text.write_text("not an archive\n")
    assert "not a tar or zip archive" in _refused(capsys, tmp_path, text)
    empty = _tar(tmp_path / "empty-1.0.tar.gz", [("empty-1.0/README", b"hi", None)])
    assert "holds no pyproject.toml or setup.py" in _refused(capsys, tmp_path, empty)
    damaged = tmp_path / "cut-1.0.tar.gz"
    damaged.write_bytes(_good(tmp_path / "whole.tar.gz").read_bytes()[:60])
    assert "not an sdist" in _refused(capsys, tmp_path, damaged)


def test_too_many_members_are_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(S, "MAX_MEMBERS", 2)
    archive = _good(tmp_path / "demo-1.0.tar.gz", ("demo-1.0/more.py", b"", None))
    assert "more than 2 members" in _refused(capsys, tmp_path, archive)


def test_temporary_folders_are_removed(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    _refused(capsys, tmp_path, _good(tmp_path / "demo-1.0.tar.gz", ("../x", b"x", None)))
    assert os.listdir(tmp_path / "tmp") == []


@pytest.mark.parametrize(
    "text, wanted",
    [
        ("demo==1.0", True),
        ("Demo_X===1.0a1", True),
        ("demo>=1.0", False),
        ("demo==1.*", False),
        ("demo", False),
        ("./demo==1.0", False),
        ("demo-1.0.tar.gz", False),
        ("demo @ https://x/demo.tar.gz", False),
    ],
)
def test_a_requirement_names_one_exact_version(text, wanted):
    assert (S.requirement_of(text) is not None) is wanted


REPORT = {
    "version": "1",
    "install": [
        {
            "download_info": {
                "url": "https://files.example/demo-1.0.tar.gz",
                "archive_info": {"hashes": {"sha256": "ab" * 32}},
            },
            "is_direct": False,
            "metadata": {"name": "demo", "version": "1.0"},
        },
        {
            "download_info": {
                "url": "https://files.example/numpy-2.0-cp311-cp311-linux_x86_64.whl",
                "archive_info": {},
            },
            "is_direct": False,
            "metadata": {"name": "numpy", "version": "2.0"},
        },
        {
            "download_info": {"url": "file:///src/local", "dir_info": {}},
            "is_direct": True,
            "metadata": {"name": "local", "version": "0.1"},
        },
        {
            "download_info": {"url": "file:///src/edit", "dir_info": {"editable": True}},
            "is_direct": True,
            "metadata": {"name": "edit", "version": "0.1"},
        },
        {
            "download_info": {"url": "https://git.example/x.git", "vcs_info": {"vcs": "git", "commit_id": "c0ffee"}},
            "is_direct": True,
            "metadata": {"name": "x", "version": "2"},
        },
    ],
}


def test_what_pip_would_build_is_every_item_that_is_not_a_wheel():
    found = to_build(REPORT)
    assert [(t.name, t.kind, t.direct) for t in found] == [
        ("demo", "archive", False),
        ("local", "dir", True),
        ("x", "vcs", True),
    ]
    assert found[0].sha256 == "ab" * 32 and found[0].local is None
    assert found[1].local == Path("/src/local")
    assert found[2].vcs == "git+https://git.example/x.git@c0ffee"
    assert to_build({}) == [] and to_build({"install": [{"download_info": {}}]}) == []


def test_the_built_wheels_stand_for_what_they_were_built_from(tmp_path):
    from rocm_build_backend.wheel.install.result import Row

    split = SplitArgs(
        ["--no-index", "-C", "rocm-build-backend.verify=warn", "--config-settings=a=b"],
        ["--target", "t"],
        ["demo==1.0", "./local", "other>=2"],
    )
    built = [Row("demo", "1.0", tmp_path / "demo-1.0-py3-none-any.whl", "built")]
    after = rest(split, built)
    assert after.requirements == ["demo==1.0", "other>=2", str(tmp_path / "demo-1.0-py3-none-any.whl")]
    assert after.install == ["--target", "t"]
    assert settings(split) == ["-C", "rocm-build-backend.verify=warn", "-C", "a=b"]


def _built(tmp_path: Path, audit: list[str], requested: list[str]):
    from rocm_build_backend.builder.project import Built

    stamp = {"requested": {"targets": requested}, "audit": {"targets": audit}}
    return Built(tmp_path, tmp_path / "demo-1.0-py3-none-any.whl", stamp)


def test_a_wheel_without_device_code_from_a_project_with_gpu_sources_or_switches_is_a_finding(tmp_path):
    from rocm_build_backend.builder.project import no_device_code

    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    assert no_device_code(tmp_path, _built(tmp_path, [], ["gfx90a"])) is None  # no GPU code anywhere: fine
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "k.hip").write_text("__global__ void k() {}\n")
    found = no_device_code(tmp_path, _built(tmp_path, [], ["gfx90a"]))
    assert found is not None and found.exit_code == 1
    assert "holds no device code" in found.message and "csrc/k.hip" in found.message
    assert no_device_code(tmp_path, _built(tmp_path, ["gfx90a"], ["gfx90a"])) is None  # it has device code
    assert no_device_code(tmp_path, _built(tmp_path, [], [])) is None  # no GPU target was asked
    (tmp_path / "setup.py").write_text(
        'import os\nfrom setuptools import setup\nif os.environ.get("WITH_CUDA", "0") == "1":\n    pass\nsetup()\n'
    )
    found = no_device_code(tmp_path, _built(tmp_path, [], ["sm_90"]))
    assert found is not None and "setup.py L3 WITH_CUDA=1" in found.message
    assert found.hint is not None and found.hint.startswith("turn its GPU build on (WITH_CUDA=1)")
