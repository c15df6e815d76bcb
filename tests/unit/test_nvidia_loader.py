"""The driver's rules for NVIDIA code, against NVIDIA's documentation and the H200 launches."""

from __future__ import annotations

import json

import pytest

from rocm_build_backend.gpu.nvidia import loader
from helpers import TESTS

DATA = TESTS / "data" / "nvidia" / "h200"


def _h200_rows():
    data = json.loads((DATA / "matrix.json").read_text())
    return [(row["code"], row["audit"], row["real"], data["device"]) for row in data["rows"]]


@pytest.mark.parametrize("code, audit, real, device", _h200_rows())
def test_rules_predict_every_h200_launch(code, audit, real, device):
    """Each binary's targets as our audit read them; 'real' is what the launch on the H200 did."""
    assert ("runs" if loader.runs(audit, device) else "error 209") == real


@pytest.mark.parametrize(
    "code, device, loads",
    [
        ("sm_80", "sm_86", True),  # same major, newer minor (Programming Guide, Binary Compatibility)
        ("sm_86", "sm_80", False),
        ("sm_80", "sm_90", False),  # never across majors
        ("sm_90a", "sm_90", True),
        ("sm_100a", "sm_103", False),  # 'a': the exact compute capability only
        ("sm_100f", "sm_103", True),  # 'f': the family (10.0, 10.3)
        ("sm_100f", "sm_120", False),
        ("compute_80", "sm_120", True),  # PTX: any newer device
        ("compute_100", "sm_90", False),
        ("compute_90a", "sm_90", True),
        ("compute_90a", "sm_100", False),  # PTX with 'a' is not forward compatible
        ("compute_100f", "sm_103", True),
        ("compute_100f", "sm_120", False),  # PTX with 'f' stays in its family
        ("compute_120f", "sm_121", True),
    ],
)
def test_documented_rules(code, device, loads):
    assert loader.loads_on(code, device) is loads
    if not loads:
        assert code in loader.why_not(code, device)


def test_a_device_is_a_plain_compute_capability():
    with pytest.raises(ValueError):
        loader.why_not("sm_90", "sm_90a")


def test_driver_prefers_sass_over_ptx():
    assert str(loader.chosen(["compute_80", "sm_80", "sm_86"], "sm_86")) == "sm_86"
    assert str(loader.chosen(["compute_80", "sm_80"], "sm_90")) == "compute_80"
    assert loader.chosen(["sm_80"], "sm_90") is None


def test_reasons_read_like_the_rest_of_the_package():
    assert loader.why_not("sm_80", "sm_90") == "sm_80 loads on sm_8x devices from sm_80 on"
    assert loader.why_not("sm_90a", "sm_100") == "sm_90a runs only on sm_90 devices"
    assert (
        loader.why_not("compute_100", "sm_90") == "PTX compute_100 needs a device of compute capability 10.0 or newer"
    )
