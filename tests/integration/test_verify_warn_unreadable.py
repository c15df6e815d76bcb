"""A build with ``verify = "warn"`` whose library the audit cannot read: the stamp says what
could not be read, and every reader of the stamp reports the file as unreadable, never as a
wheel without device code (issue: such wheels were stamped with no targets, silently)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile

from helpers import DATA, assert_valid_stamp, only_wheel, variant_build_env
from rocm_build_backend.wheel.facts import UNKNOWN
from rocm_build_backend.wheel.reader import wheel_targets


def test_an_unreadable_library_is_stamped_as_unreadable_not_as_no_targets(tmp_path):
    proj = tmp_path / "proj"
    (proj / "demo_warn").mkdir(parents=True)
    (proj / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "rocm_build_backend"\n\n'
        '[project]\nname = "demo-warn"\nversion = "1.0"\n\n'
        '[tool.setuptools]\npackages = ["demo_warn"]\npackage-data = {demo_warn = ["*.so"]}\n\n'
        '[tool.rocm-build-backend]\ntargets = "sm_90"\nverify = "warn"\ncompiler-check = false\n'
        "pinned-tools = false\nlocal-version = false\nguard = false\n"
    )
    (proj / "demo_warn" / "__init__.py").write_text("")
    # the shape of the issue: the first entry header of .nv_fatbin cannot be read, so the audit
    # finds no target at all in the file (the fixture's header size is 0; nvlink's was 5,296)
    shutil.copyfile(DATA / "binaries" / "bad_cuda_zero_entry.so", proj / "demo_warn" / "_k.so")
    out = tmp_path / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps", "-w", out, proj],
        env=variant_build_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel = only_wheel(out)
    stamp = assert_valid_stamp(wheel)
    assert stamp is not None
    assert "could not be read completely" in proc.stdout + proc.stderr  # the build's warning
    entry = stamp["audit"]["files"]["demo_warn/_k.so"]
    assert entry["targets"] == [] and stamp["audit"]["targets"] == []
    assert entry["problems"] and any("header size of 0" in p for p in entry["problems"]), entry
    # what install and the index read: the stamp alone
    facts = wheel_targets(wheel, audit=False)
    status, reason = facts.verdict("sm_90")
    assert status == UNKNOWN and "demo_warn/_k.so could not be read completely" in (reason or ""), reason
    check = subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", "check", "--json", "--targets", "sm_90", wheel],
        env=variant_build_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    doc = json.loads(check.stdout)
    assert check.returncode != 0 and "could not be read completely" in json.dumps(doc), check.stdout
    with zipfile.ZipFile(wheel) as zf:
        assert "demo_warn/_k.so" in zf.namelist()
