"""A build for the test-only third vendor (``tests/thirdvendor``: "acme"): the wrapped backend
builds, the audit finds none of its code, and the build is refused with one error line, one hint
and exit status 1."""

from __future__ import annotations

import sys

import pytest

from helpers import ACME_ENTRY, ACME_OTHER_KNOBS, copy_sample
from rocm_build_backend.gpu.vendor import registered


@pytest.fixture
def acme():
    with registered(ACME_ENTRY):
        yield


def test_a_build_for_it_is_refused_after_the_audit(acme, tmp_path, monkeypatch, capsys):
    """The wrapped backend builds; the audit then finds no ACME code (there is no reader for it):
    one error line, one hint naming its flag, exit status 1, and no wheel left behind."""
    import rocm_build_backend

    for var in ACME_OTHER_KNOBS | {"ACME_ARCH"}:
        monkeypatch.delenv(var, raising=False)
    project = copy_sample("pure_python", tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "argv", ["hook"])
    with pytest.raises(SystemExit) as stop:
        rocm_build_backend.build_wheel(
            str(out), {"rocm-build-backend.targets": "acme1", "rocm-build-backend.verify": "error"}
        )
    assert stop.value.code == 1
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("rocm-build-backend: ")]
    assert "rocm-build-backend: targets acme1 (from -C rocm-build-backend.targets)" in lines
    assert "rocm-build-backend: compiler: ACME has no compiler to check" in lines
    errors = [ln for ln in lines if ln.startswith(("rocm-build-backend: error:", "rocm-build-backend: hint:"))]
    assert len(errors) == 2, lines
    assert errors[0].endswith("holds no GPU device code at all; acme1 was requested")
    assert "a hard-coded --acme-arch" in errors[1]
    assert list(out.glob("*.whl")) == []
