"""The command line's contracts across verbs: the exit code of every verb for each cause, as the
README's table gives them (0 yes, 1 a definite no, 2 a usage or input error, 3 cannot tell); the
``--json`` documents of ``configure``, ``thin``, ``split`` and ``index`` against their schemas;
and ``-o/--outdir`` as the one spelling of the output folder. Real inputs: device code from
tests/data, wheels made around it.
``build`` and ``install`` (which build and run pip) are in tests/integration/test_build_command.py.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from helpers import DATA, make_wheel, run_main, validate_json

BIN = DATA / "binaries"
SO_90A_942 = "hip_gfx90a_gfx942_cov5.so"  # one offload bundle: gfx90a and gfx942
RDC_OBJECT = "hip_newdriver_rdc_gfx90a_gfx942.o"  # relocatable AMD device code: kept whole for an NVIDIA target
CUDA_SO = "cuda_sm75_80_90_ptx90.so"


def wheel_with(folder: Path, name: str, members: dict[str, str | bytes], **kw) -> Path:
    """A wheel whose members are files of tests/data/binaries (by name) or bytes."""
    data = {m: (BIN / v).read_bytes() if isinstance(v, str) else v for m, v in members.items()}
    return make_wheel(folder, name, "1.0", members=data, stamp=kw.pop("stamp", False), **kw)


def project(tmp: Path, pyproject: str | None = None, setup_py: bool = False) -> Path:
    proj = tmp / "proj"
    (proj / "demo_pkg").mkdir(parents=True)
    (proj / "demo_pkg" / "__init__.py").write_text("")
    if pyproject is not None:
        (proj / "pyproject.toml").write_text(pyproject)
    if setup_py:
        (proj / "setup.py").write_text("from setuptools import setup\nsetup(name='demo-pkg', version='1.0')\n")
    return proj


PYPROJECT = (
    '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n\n'
    '[project]\nname = "demo-pkg"\nversion = "1.0"\n'
)


def pip_cache_with(tmp: Path, wheel: Path) -> Path:
    """A pip cache folder holding ``wheel`` where pip keeps built wheels."""
    cache = tmp / "pip-cache"
    folder = cache / "wheels" / "ab" / "cd" / "ef" / ("0" * 56)
    folder.mkdir(parents=True)
    (folder / wheel.name).write_bytes(wheel.read_bytes())
    (folder / "origin.json").write_text("{}")
    return cache


# ------------------------------------------------------------------------ exit codes per verb


def cases(tmp: Path) -> dict[str, tuple[list, int]]:
    """verb and cause -> (arguments, the exit code the README's table gives)."""
    wheels = tmp / "wheels"
    fat = wheel_with(wheels, "fat", {"fat/_k.so": SO_90A_942})
    odd = wheel_with(tmp / "odd", "odd", {"odd/_cuda.so": CUDA_SO, "odd/_rdc.o": RDC_OBJECT})
    pure = make_wheel(tmp / "pure", "pure", "1.0")
    damaged = wheel_with(tmp / "damaged", "damaged", {"damaged/_k.so": "bad_hip_bundle_count.so"})
    not_zip = tmp / "broken" / "broken-1.0-py3-none-any.whl"
    not_zip.parent.mkdir()
    not_zip.write_bytes(b"not a zip")
    skipped = tmp / "skipped"
    wheel_with(skipped, "fat", {"fat/_k.so": SO_90A_942})
    (skipped / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    empty_root = tmp / "empty-root"
    empty_root.mkdir()
    (tmp / "no-project").mkdir()
    editable = project(tmp / "c0", setup_py=True)
    foreign = project(
        tmp / "c2", "[build-system]\nrequires = []\nbuild-backend = 'x'\n[tool.rocm-build-backend]\nbackend = 'y'\n"
    )
    plan_ok = project(tmp / "p0", PYPROJECT)
    no_check = ["-C", "rocm-build-backend.compiler-check=false"]
    return {
        "targets": (["targets"], 0),
        "targets, bad option": (["targets", "--no-such-option"], 2),
        "detect, a GPU": (["detect", "--rocminfo-output", DATA / "detect" / "mi300x_4gpu.rocminfo.txt"], 0),
        "detect, no GPU": (["detect", "--root", empty_root], 3),
        "detect, missing file": (["detect", "--rocminfo-output", tmp / "missing.txt"], 2),
        "plan": (["plan", plan_ok, "--targets", "gfx90a", *no_check], 0),
        "plan, unknown target": (["plan", plan_ok, "--targets", "gfx9422", *no_check], 2),
        "plan, not a project": (["plan", tmp / "no-project"], 2),
        "configure": (["configure", editable], 0),
        "configure, refused": (["configure", foreign], 2),
        "configure, not a project": (["configure", tmp / "no-project"], 2),
        "audit": (["audit", BIN / SO_90A_942], 0),
        "audit, damaged": (["audit", BIN / "trunc_hip_gfx90a_gfx940_cov4.so"], 3),
        "audit, missing": (["audit", tmp / "missing.so"], 2),
        "check, loads": (["check", "--targets", "gfx942", fat], 0),
        "check, does not load": (["check", "--targets", "gfx1100", fat], 1),
        "check, cannot read": (["check", "--targets", "gfx942", not_zip], 3),
        "check, missing": (["check", "--targets", "gfx942", tmp / "missing-1.0-py3-none-any.whl"], 2),
        "cache, no misfit": (
            ["cache", "list", "--targets", "gfx942", "--cache-dir", pip_cache_with(tmp / "k0", fat)],
            0,
        ),
        "cache, a misfit": (
            ["cache", "list", "--targets", "gfx1100", "--cache-dir", pip_cache_with(tmp / "k1", fat)],
            1,
        ),
        "cache, unknown target": (["cache", "list", "--targets", "gfx9422", "--cache-dir", tmp / "k1"], 2),
        "install, nothing to install": (["install", "--targets", "gfx942", "--", "--no-index"], 2),
        "index": (["index", wheels, "-o", tmp / "i0"], 0),
        "index, a wheel skipped": (["index", skipped, "-o", tmp / "i1"], 1),
        "index, no output folder": (["index", wheels], 2),
        "index, missing folder": (["index", tmp / "missing", "-o", tmp / "i2"], 2),
        "thin": (["thin", fat, "--targets", "gfx942", "-o", tmp / "t0"], 0),
        "thin, a file kept whole": (["thin", odd, "--targets", "sm_90", "-o", tmp / "t1"], 1),
        "thin, a target without code": (["thin", fat, "--targets", "gfx942,gfx1100", "-o", tmp / "t2"], 1),
        "thin, no code for the targets": (["thin", fat, "--targets", "gfx1100", "-o", tmp / "t3"], 1),
        "thin, no device code": (["thin", pure, "--targets", "gfx942", "-o", tmp / "t4"], 2),
        "thin, unknown target": (["thin", fat, "--targets", "gfx9422", "-o", tmp / "t5"], 2),
        "thin, damaged": (["thin", damaged, "--targets", "gfx942", "-o", tmp / "t6"], 3),
        "split": (["split", fat, "-o", tmp / "s0"], 0),
        "split, a file kept whole": (["split", odd, "-o", tmp / "s1"], 1),
        "split, no device code": (["split", pure, "-o", tmp / "s2"], 2),
        "split, damaged": (["split", not_zip, "-o", tmp / "s3"], 3),
    }


CAUSES = [  # the keys of cases(), in order (test_the_cause_table_is_the_list_of_causes)
    "targets",
    "targets, bad option",
    "detect, a GPU",
    "detect, no GPU",
    "detect, missing file",
    "plan",
    "plan, unknown target",
    "plan, not a project",
    "configure",
    "configure, refused",
    "configure, not a project",
    "audit",
    "audit, damaged",
    "audit, missing",
    "check, loads",
    "check, does not load",
    "check, cannot read",
    "check, missing",
    "cache, no misfit",
    "cache, a misfit",
    "cache, unknown target",
    "install, nothing to install",
    "index",
    "index, a wheel skipped",
    "index, no output folder",
    "index, missing folder",
    "thin",
    "thin, a file kept whole",
    "thin, a target without code",
    "thin, no code for the targets",
    "thin, no device code",
    "thin, unknown target",
    "thin, damaged",
    "split",
    "split, a file kept whole",
    "split, no device code",
    "split, damaged",
]


@pytest.mark.parametrize("cause", CAUSES)
def test_each_verb_exits_with_the_documented_code_for_each_cause(cause, tmp_path, capsys):
    args, want = cases(tmp_path)[cause]
    code, out, err = run_main(capsys, *args)
    assert code == want, (cause, out, err)
    assert "Traceback" not in err
    if want in (2, 3) and not out:  # an error, not a report: one error line, then its hint
        lines = err.splitlines()
        assert lines[0].startswith(("error: ", "usage: ")), err


def test_the_cause_table_is_the_list_of_causes(tmp_path):
    assert list(cases(tmp_path)) == CAUSES


def test_the_causes_cover_every_verb():
    verbs = {c.split(",")[0] for c in CAUSES} | {"build"}  # build: tests/integration/test_build_command.py
    from rocm_build_backend.cli import parser

    sub = next(a for a in parser()._actions if a.dest == "command")
    assert verbs == set(sub.choices)


# --------------------------------------------------------------------- thin and split, in detail


def test_thin_says_which_target_has_no_code(tmp_path, capsys):
    fat = wheel_with(tmp_path / "in", "fat", {"fat/_k.so": SO_90A_942})
    code, out, _ = run_main(capsys, "thin", fat, "--targets", "gfx942,gfx1100", "-o", tmp_path / "out")
    assert code == 1
    assert "no code for gfx1100: the new wheel does not load there" in out.splitlines()
    code, out, _ = run_main(capsys, "thin", fat, "--targets", "gfx942,gfx1100", "--outdir", tmp_path / "out2", "--json")
    doc = validate_json("thin", out)
    assert (code, doc["exit_code"], doc["missing_targets"]) == (1, 1, ["gfx1100"])
    assert (tmp_path / "out2" / fat.name).is_file()  # written all the same


def test_thin_and_split_json_carry_the_exit_code(tmp_path, capsys):
    fat = wheel_with(tmp_path / "in", "fat", {"fat/_k.so": SO_90A_942})
    code, out, _ = run_main(capsys, "thin", fat, "--targets", "gfx942", "-o", tmp_path / "t", "--json")
    doc = validate_json("thin", out)
    assert (code, doc["exit_code"], doc["missing_targets"]) == (0, 0, [])
    code, out, _ = run_main(capsys, "split", fat, "-o", tmp_path / "s", "--json")
    doc = validate_json("split", out)
    assert (code, doc["exit_code"]) == (0, 0)
    assert [w["unit"] for w in doc["wheels"]] == ["gfx90a", "gfx942"]
    odd = wheel_with(tmp_path / "odd", "odd", {"odd/_cuda.so": CUDA_SO, "odd/_rdc.o": RDC_OBJECT})
    code, out, _ = run_main(capsys, "split", odd, "-o", tmp_path / "s2", "--json")
    doc = validate_json("split", out)
    assert (code, doc["exit_code"]) == (1, 1)
    kept_whole = {w["unit"]: w["kept_whole"] for w in doc["wheels"]}
    assert kept_whole["sm_90"] == ["odd/_rdc.o"] and kept_whole["gfx942"] == []


# -------------------------------------------------------------------------- the output folder


def test_index_takes_its_output_folder_as_o_only(tmp_path, capsys):
    wheels = tmp_path / "wheels"
    wheel_with(wheels, "fat", {"fat/_k.so": SO_90A_942})
    code, out, err = run_main(capsys, "index", wheels, "-o", tmp_path / "new", "--json")
    assert code == 0 and err == ""
    new = validate_json("index", out)
    assert new["out_dir"] == str(tmp_path / "new") and set(new["indexes"]) == {"gfx90a", "gfx942"}
    code, out, err = run_main(capsys, "index", wheels, tmp_path / "old", "--json")  # the old positional spelling
    assert code == 2 and "give the output folder" in err and not (tmp_path / "old").exists()
    code, out, err = run_main(capsys, "index", wheels, tmp_path / "a", "-o", tmp_path / "b")
    assert code == 2 and err.startswith("error: index takes one WHEEL_DIR, not 2 paths")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize("verb", ["build", "index", "thin", "split"])
def test_every_verb_that_writes_files_spells_its_folder_o_and_outdir(verb):
    from rocm_build_backend.cli import parser

    sub = next(a for a in parser()._actions if a.dest == "command").choices[verb]
    (option,) = [a for a in sub._actions if a.dest == "outdir"]
    assert option.option_strings == ["-o", "--outdir"]


@pytest.mark.parametrize(
    "verb",
    ["targets", "detect", "plan", "build", "configure", "audit", "check", "cache", "install", "index", "thin", "split"],
)
def test_every_verb_that_reports_takes_json(verb):
    from rocm_build_backend.cli import parser

    sub = next(a for a in parser()._actions if a.dest == "command").choices[verb]
    assert any(a.option_strings == ["--json"] for a in sub._actions)


# ---------------------------------------------------------------------------------- configure


def test_configure_json(tmp_path, capsys):
    proj = project(tmp_path, PYPROJECT)
    before = (proj / "pyproject.toml").read_text()
    code, out, _ = run_main(capsys, "configure", proj, "--dry-run", "--json")
    doc = validate_json("configure", out)
    assert code == 0 and (proj / "pyproject.toml").read_text() == before
    assert (doc["changed"], doc["written"], doc["wrapped"]) == (True, False, "setuptools.build_meta")
    assert doc["diff"].startswith("--- a/pyproject.toml\n+++ b/pyproject.toml\n")
    code, out, _ = run_main(capsys, "configure", proj, "--json")
    doc = validate_json("configure", out)
    assert code == 0 and (doc["changed"], doc["written"]) == (True, True)
    assert 'build-backend = "rocm_build_backend"' in (proj / "pyproject.toml").read_text()
    code, out, _ = run_main(capsys, "configure", proj, "--json")
    doc = validate_json("configure", out)
    assert (doc["changed"], doc["written"], doc["wrapped"], doc["diff"]) == (False, False, None, "")
    legacy = project(tmp_path / "legacy", setup_py=True)
    doc = validate_json("configure", run_main(capsys, "configure", legacy, "--diff", "--json")[1])
    assert doc["wrapped"] == "setuptools.build_meta:__legacy__" and doc["diff"].startswith("--- /dev/null\n")
    assert not (legacy / "pyproject.toml").exists()


def test_configure_text_is_unchanged_by_json_support(tmp_path, capsys):
    proj = project(tmp_path, PYPROJECT)
    code, out, _ = run_main(capsys, "configure", proj, "--dry-run")
    assert code == 0
    assert (
        out == f"would update {proj / 'pyproject.toml'}: builds through rocm-build-backend, wrapping "
        "setuptools.build_meta\n"
    )


def test_results_to_json_return_plain_data(tmp_path):
    """Every result's to_json is a dict that json.dumps takes as it is (the Python API)."""
    from rocm_build_backend.api import audit_paths, build_index, check_wheels, list_cache, thin_wheel
    from rocm_build_backend.gpu.targets import parse_targets

    fat = wheel_with(tmp_path / "w", "fat", {"fat/_k.so": SO_90A_942})
    results = [
        audit_paths([fat]),
        check_wheels([fat], ["gfx942"]),
        list_cache(["gfx942"], cache_dirs=[pip_cache_with(tmp_path, fat)]),
        build_index(tmp_path / "w", tmp_path / "idx"),
        thin_wheel(fat, parse_targets("gfx942"), tmp_path / "thin"),
    ]
    for result in results:
        data = result.to_json()
        assert isinstance(data, dict) and data["schema_version"] == 1
        assert json.loads(json.dumps(data)) == data
        assert not hasattr(result, "to_text")
    with zipfile.ZipFile(tmp_path / "thin" / fat.name) as zf:
        assert "fat-1.0.dist-info/rocm_build.json" in zf.namelist()
