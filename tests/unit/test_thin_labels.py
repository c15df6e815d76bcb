"""``thin`` and ``split`` name what their outputs hold: the local version label after the
operation, never an output under its input's name in the input's folder, files readable by
others under the usual umask, and the README's exit codes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.wheel.label import label_targets, relabel
from helpers import fat_wheel, make_wheel, run_main as run, zip_members


@pytest.mark.parametrize(
    "version, targets, expected",
    [
        ("1.0+gfx908.gfx90a", ["gfx908"], "1.0+gfx908"),
        ("1.0", ["gfx90a", "gfx908"], "1.0+gfx908.gfx90a"),
        ("2.5+rocm6.2.gfx90a.xnackoff.gfx942", ["gfx942"], "2.5+rocm6.2.gfx942"),
        ("1.0+cu121", ["sm_90"], "1.0+cu121.sm90"),
        ("1.0+gfx942", [], "1.0"),
    ],
)
def test_relabel_replaces_the_target_segments(version, targets, expected):
    assert relabel(version, targets) == expected


def test_label_targets_reads_the_label_back():
    assert label_targets("1.0+rocm6.2.gfx90a.xnackoff.gfx942") == ["gfx90a.xnackoff", "gfx942"]
    assert label_targets("1.0+gfx90a.rocm.xnackoff") == ["gfx90a"]  # a feature after a non-target is not one
    assert label_targets("1.0+cu121") == label_targets("1.0") == []


def relabelled_fat(folder: Path) -> Path:
    """The fat wheel with a label that names its targets (METADATA and .dist-info agree)."""
    src = fat_wheel(folder / "plain")
    files = {
        k.replace("pkg-1.0.dist-info", "pkg-1.0+gfx90a.gfx942.dist-info"): v
        for k, v in zip_members(src).items()
        if not k.endswith("RECORD") and k.startswith("pkg/")
    }
    return make_wheel(folder, "pkg", "1.0+gfx90a.gfx942", members=files, stamp=False, dist="pkg")


def test_thin_relabels_a_labelled_wheel_with_what_it_keeps(tmp_path, capsys):
    src = relabelled_fat(tmp_path / "in")
    code, out, err = run(capsys, "thin", src, "--targets", "gfx942", "--outdir", src.parent)
    assert code == 0, err
    dst = src.parent / "pkg-1.0+gfx942-py3-none-any.whl"
    assert dst.is_file() and src.is_file()
    with zipfile.ZipFile(dst) as zf:
        assert b"Version: 1.0+gfx942" in zf.read("pkg-1.0+gfx942.dist-info/METADATA")


def test_thin_names_the_device_it_kept_not_the_one_asked(tmp_path, capsys):
    # gfx90a:xnack- asked: the wheel keeps gfx90a code, labelled as the device it is for
    src = relabelled_fat(tmp_path / "in")
    code, _out, err = run(capsys, "thin", src, "--targets", "gfx90a:xnack+", "--outdir", tmp_path / "out")
    assert code == 0, err
    assert [p.name for p in (tmp_path / "out").glob("*.whl")] == ["pkg-1.0+gfx90a-py3-none-any.whl"]


def test_thin_refuses_to_take_its_inputs_place(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")  # no label: the output keeps the name
    before = src.read_bytes()
    code, _out, err = run(capsys, "thin", src, "--targets", "gfx942", "--outdir", src.parent)
    assert code == 2 and "would replace its source" in err, err
    assert src.read_bytes() == before and sorted(p.name for p in src.parent.iterdir()) == [src.name]


def test_split_replaces_the_label_and_never_reuses_the_inputs_name(tmp_path, capsys):
    src = relabelled_fat(tmp_path / "in")
    code, _out, err = run(capsys, "split", src, "--outdir", src.parent)
    assert code == 0, err
    assert sorted(p.name for p in src.parent.glob("*.whl")) == [
        "pkg-1.0+gfx90a-py3-none-any.whl",
        "pkg-1.0+gfx90a.gfx942-py3-none-any.whl",
        "pkg-1.0+gfx942-py3-none-any.whl",
    ]
    # a wheel that is already one unit: its split would have its name in its folder
    one = src.parent / "pkg-1.0+gfx942-py3-none-any.whl"
    code, _out, err = run(capsys, "split", one, "--outdir", one.parent)
    assert code == 2 and "would replace its source" in err, err


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_outputs_follow_the_umask(tmp_path, umask, mode):
    src = fat_wheel(tmp_path / "in")
    code = (
        "import os, sys\nos.umask(int(sys.argv[1], 8))\nfrom rocm_build_backend.cli import main\n"
        "sys.exit(main(sys.argv[2:]))\n"
    )
    for verb, extra in (("thin", ["--targets", "gfx942"]), ("split", [])):
        out = tmp_path / f"{verb}-{umask:o}"
        proc = subprocess.run(
            [sys.executable, "-c", code, f"{umask:o}", verb, str(src), *extra, "--outdir", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        wheels = list(out.glob("*.whl"))
        assert wheels and {stat.S_IMODE(os.stat(w).st_mode) for w in wheels} == {mode}


def test_an_outdir_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    src = fat_wheel(tmp_path / "in")
    (tmp_path / "file").write_text("x")
    for verb, extra in (("thin", ["--targets", "gfx942"]), ("split", [])):
        code, _out, err = run(capsys, verb, src, *extra, "--outdir", tmp_path / "file")
        assert code == 2 and err.startswith("error:") and "not a folder" in err, err
