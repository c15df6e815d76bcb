"""With enforcement on, "exactly the targets" is checked: which targets found in a file the plan chose
(feature variants included), which files are explained (left whole by the record, prebuilt copies
of source files older than the build), and the stamp's record of it, checked against the schema."""

from __future__ import annotations

import os
import time
import zipfile

import pytest

from helpers import valid_stamp
from rocm_build_backend.binary.report import AuditReport, FileReport
from rocm_build_backend.builder.exact import Beyond, beyond, chosen, prebuilt_members, to_stamp
from rocm_build_backend.gpu.targets import parse_target
from rocm_build_backend.wheel.stamp import make_stamp


def _plan(*names: str):
    return [parse_target(n) for n in names]


@pytest.mark.parametrize(
    "found, plan, ok",
    [
        ("gfx90a", ["gfx90a"], True),
        ("gfx90a:xnack-", ["gfx90a"], True),  # a feature variant of what the plan chose
        ("gfx90a:sramecc+:xnack+", ["gfx90a"], True),
        ("gfx90a:xnack+", ["gfx90a:xnack-"], False),  # the plan chose the other mode
        ("gfx908", ["gfx90a"], False),
        ("gfx9-4-generic", ["gfx942"], False),
        ("sm_90", ["sm_90"], True),
        ("sm_90a", ["sm_90"], False),  # sm_90a only when the plan chose it
        ("sm_90a", ["sm_90a"], True),
        ("compute_90", ["sm_90"], False),  # PTX only when the plan has it (the ptx setting)
        ("compute_90", ["sm_90", "compute_90"], True),
        ("sm_80", ["sm_90"], False),
        ("nonsense", ["sm_90"], False),
    ],
)
def test_which_targets_the_plan_chose(found, plan, ok):
    assert chosen(found, _plan(*plan)) is ok


def _report(**files: list[str]) -> AuditReport:
    return AuditReport(files=[FileReport(path=p.replace("__", "/"), targets=t) for p, t in files.items()])


def test_files_beyond_the_plan_and_why():
    report = _report(
        pkg__a_so=["sm_90"], pkg__b_so=["sm_80", "sm_90"], pkg__c_so=["sm_86"], pkg__d_fatbin=["sm_75", "sm_90"]
    )
    found = beyond(report, _plan("sm_90"), whole={"sm_86", "compute_86"}, prebuilt={"pkg/d_fatbin"})
    assert found == [
        Beyond("pkg/b_so", ["sm_80"], ""),
        Beyond("pkg/c_so", ["sm_86"], "left whole"),
        Beyond("pkg/d_fatbin", ["sm_75"], "prebuilt"),
    ]
    assert found[0].line("sm_90") == "pkg/b_so holds sm_80 beyond the targets sm_90"
    assert "(allowed)" in found[1].line("sm_90") and "prebuilt" in found[2].line("sm_90")
    stamp = to_stamp(found)
    assert stamp["ok"] is False and stamp["files"]["pkg/b_so"] == {"extra": ["sm_80"], "why": "unexplained"}
    assert to_stamp(found[1:])["ok"] is True and to_stamp([]) == {"ok": True, "files": {}}


def test_the_stamp_records_the_counts_beside_the_check():
    enforced = {
        "how": ["enforce: ..."],
        "compiles": 3,
        "rewritten": 1,
        "kept": 1,
        "added": 0,
        "dropped": ["sm_80"],
        "left_whole": [{"sources": ["a.cu"], "targets": ["sm_86"]}],
        "left_whole_count": 1,
        "refused": 0,
        "exact": to_stamp([Beyond("pkg/c.so", ["sm_86"], "left whole")]),
    }
    stamp = valid_stamp(
        make_stamp(
            requested=["sm_90"],
            source="settings",
            audit_files={"pkg/c.so": {"targets": ["sm_86"]}},
            host_gpus=[],
            toolchain={},
            version="1",
            enforced=enforced,
        )
    )
    assert stamp["enforced"]["exact"] == {"ok": True, "files": {"pkg/c.so": {"extra": ["sm_86"], "why": "left whole"}}}
    assert (stamp["enforced"]["left_whole_count"], stamp["enforced"]["refused"]) == (1, 0)


def test_prebuilt_means_a_source_file_older_than_the_build(tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "build").mkdir()
    shipped, made = b"\x7fELF shipped as it is", b"\x7fELF made by the build!"
    (src / "pkg" / "lib_shipped.so").write_bytes(shipped)
    old = time.time() - 3600
    os.utime(src / "pkg" / "lib_shipped.so", (old, old))
    since = time.time() - 60
    (src / "pkg" / "lib_made.so").write_bytes(made)  # written during the build: not prebuilt
    (src / "build" / "lib_old.so").write_bytes(made)  # a build folder: never a source
    os.utime(src / "build" / "lib_old.so", (old, old))
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("pkg/lib_shipped.so", shipped)
        zf.writestr("pkg/lib_made.so", made)
    assert prebuilt_members(wheel, ["pkg/lib_shipped.so", "pkg/lib_made.so"], src, since) == {"pkg/lib_shipped.so"}
    assert prebuilt_members(tmp_path / "missing.whl", ["x"], src, since) == set()
