"""What ``install`` says after reading back what pip or uv installed: the text table's last lines
(``cli/render.py``) and the same facts in ``install --json``, valid under the shipped schema.
Real pip and uv runs that keep a same-version install: tests/integration/test_trap_matrix.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from rocm_build_backend.cli import render
from rocm_build_backend.wheel.install.result import InstallResult, Row, shim_lines
from helpers import validate_json


def _result(**kw) -> InstallResult:
    row = Row(
        "demo-gpu",
        "1.0",
        Path("demo_gpu-1.0-py3-none-any.whl"),
        "rebuilt",
        ["gfx942"],
        "ok",
        was="gfx90a",
        was_origin="cache",
    )
    return InstallResult([row], ["gfx942"], installed=True, where=["/env/site-packages"], **kw)


def test_a_reinstalled_distribution_is_said_and_read_back():
    result = _result()
    result.rows[0].kept, result.rows[0].installed = "1.0 (gfx90a)", "1.0 (gfx942)"
    lines = render.install(result).splitlines()
    assert "demo-gpu: pip kept the installed 1.0 (gfx90a), which does not load here; installed again" in lines
    assert lines[-3:] == [
        "read back from /env/site-packages:",
        "  demo-gpu 1.0 (gfx942)",
        "installed 1 wheel; what is installed loads here",
    ]
    assert result.exit_code == 0
    doc = validate_json("install", json.dumps(result.to_json()))
    (dist,) = doc["distributions"]
    assert dist["kept"] == "1.0 (gfx90a)" and dist["installed_as"] == "1.0 (gfx942)"
    assert doc["read_back_from"] == ["/env/site-packages"] and doc["unloaded"] == [] and doc["tool"] == "pip"


def test_what_still_does_not_load_is_exit_1_in_text_and_json():
    result = _result(tool="uv", unloaded=["demo-gpu"])
    result.rows[0].installed = "1.0 (gfx90a)"
    lines = render.install(result).splitlines()
    assert lines[-2:] == [
        "  demo-gpu 1.0 (gfx90a): does not load here",
        "installed 1 wheel, but demo-gpu as installed does not load here",
    ]
    doc = validate_json("install", json.dumps(result.to_json()))
    assert doc["exit_code"] == result.exit_code == 1 and doc["unloaded"] == ["demo-gpu"] and doc["tool"] == "uv"


def test_a_failed_rebuild_shows_the_shims_own_lines():
    output = (
        "  ERROR: something\n      rocm-build-backend: error: no AMD GPU found (KFD: no GPU nodes)\n"
        "      rocm-build-backend: hint: set targets, e.g. ROCM_BUILD_BACKEND_TARGETS=gfx942\n"
        "      rocm-build-backend: error: no AMD GPU found (KFD: no GPU nodes)\n"
    )
    found = shim_lines(output)
    assert found == [
        "error: no AMD GPU found (KFD: no GPU nodes)",
        "hint: set targets, e.g. ROCM_BUILD_BACKEND_TARGETS=gfx942",
    ]
    row = Row(
        "demo-gpu",
        "1.0",
        Path("demo_gpu-1.0-py3-none-any.whl"),
        "cache",
        ["gfx90a"],
        "fails",
        reason="k.co has code for gfx90a, not for gfx942; its rebuild failed, the build said:",
        refused=True,
        build_lines=found,
    )
    result = InstallResult([row], ["gfx942"])
    text = render.install(result)
    assert "\n  error: no AMD GPU found (KFD: no GPU nodes)\n  hint: set targets" in text
    assert text.endswith("nothing installed: a wheel was refused") and result.exit_code == 1
    assert validate_json("install", json.dumps(result.to_json()))["distributions"][0]["build_lines"] == found
