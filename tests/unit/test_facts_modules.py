"""The per-module verdict (``wheel/facts.py file_verdict``): a file none of whose kernel modules
loads fails; one where only some do loads on NVIDIA GPUs (with a note; not with strict) and
fails on AMD ones; modules that could not be read make it "cannot tell" only when they matter."""

from __future__ import annotations

from rocm_build_backend.wheel.facts import DeviceFile, WheelTargets, file_verdict


def _file(modules, unread=(), complete=()):
    targets = tuple(sorted({t for ts, _ in modules for t in ts} | {t for ts, _ in unread for t in ts}))
    return DeviceFile("lib.so", targets, tuple(complete), (), tuple(modules), tuple(unread))


def test_every_module_loads():
    f = _file([(("sm_80", "sm_90"), 5)], complete=("sm_80", "sm_90"))
    assert file_verdict(f, "sm_90", True) == ("ok", None)


def test_sass_of_two_minors_loads_on_a_newer_minor():
    # sm_80 in one module, sm_86 in the other: both run on sm_89, though no target is in both
    f = _file([(("sm_80",), 1), (("sm_86",), 1)])
    assert file_verdict(f, "sm_89", True)[0] == "ok"
    assert file_verdict(f, "sm_89", True, strict=True)[0] == "ok"


def test_per_gpu_modules_on_nvidia():
    f = _file([(("sm_80", "sm_90"), 3), (("sm_100a",), 2)])
    status, note = file_verdict(f, "sm_90", True)
    assert status == "ok" and note is not None
    assert "3 of 5 kernel modules have code for sm_90; 2 hold only sm_100a" in note
    assert file_verdict(f, "sm_90", True, strict=True)[0] == "fails"
    assert file_verdict(f, "sm_75", True)[0] == "fails"


def test_per_gpu_modules_on_amd_fail():
    f = _file([(("gfx90a", "gfx942"), 3), (("gfx90a",), 1)])
    status, reason = file_verdict(f, "gfx942", True)
    assert status == "fails"
    assert "3 of 4 kernel modules have code for gfx942; 1 hold only gfx90a" in (reason or "")


def test_stub_only_file_has_nothing_to_launch():
    f = DeviceFile("stub.so", ("sm_75",), ("sm_75",), (), (), ())
    status, note = file_verdict(f, "sm_90", True)
    assert status == "ok" and "holds no kernels" in (note or "")


def test_unread_modules_matter_only_when_they_lack_the_device():
    f = _file([(("sm_90",), 2)], unread=[(("sm_90",), 1)])
    assert file_verdict(f, "sm_90", True)[0] == "ok"
    # a zstd-compressed cubin that may be a device-link stub (no zstd decoder): on NVIDIA it is
    # launched nowhere or only where it fits, so the read modules decide; strict cannot tell
    g = _file([(("sm_90",), 2)], unread=[(("sm_75",), 1)])
    assert file_verdict(g, "sm_90", True)[0] == "ok"
    assert file_verdict(g, "sm_90", True, strict=True)[0] == "unknown"
    a = _file([(("gfx942",), 2)], unread=[(("gfx90a",), 1)])
    assert file_verdict(a, "gfx942", True)[0] == "unknown"
    h = _file([], unread=[(("sm_75",), 1)])
    assert file_verdict(h, "sm_90", True)[0] == "unknown"


def test_facts_without_modules_keep_the_complete_rule():
    f = DeviceFile("lib.so", ("sm_80", "sm_90"), ("sm_80",))
    assert file_verdict(f, "sm_90", True)[0] == "fails"
    w = WheelTargets(path=".", files=[f, _file([(("sm_90",), 1), (("sm_80",), 1)])])
    assert w.verdict("sm_90")[0] == "fails"
