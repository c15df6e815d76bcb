"""gpu/nvidia/vendor.py plugged into the vendor registry: names, loader rules and detection
through the vendor-neutral layer (gpu.targets, gpu.compat, gpu.detect)."""

from __future__ import annotations

import subprocess

import pytest

from rocm_build_backend.errors import NoGpuDetectedError, UnknownTargetError
from rocm_build_backend.gpu import vendor as registry
from rocm_build_backend.gpu.nvidia.vendor import NVIDIA
from rocm_build_backend.gpu.targets import vendor_name
from helpers import TESTS

H200 = TESTS / "data" / "nvidia" / "h200"
DETECT = TESTS / "data" / "detect"


def _use(monkeypatch, names):
    monkeypatch.setattr(registry, "_REGISTRY", [e for e in registry._REGISTRY if e.name in names])
    registry._forget()
    yield
    registry._forget()


@pytest.fixture
def both(monkeypatch):
    yield from _use(monkeypatch, ("amd", "nvidia"))


@pytest.fixture
def only_nvidia(monkeypatch):
    yield from _use(monkeypatch, ("nvidia",))


def test_names_through_the_registry(both):
    from rocm_build_backend.gpu.targets import parse_targets

    got = parse_targets("sm_90a;compute_80;gfx942;sm_80")
    assert [str(t) for t in got] == ["gfx942", "sm_80", "compute_80", "sm_90a"]
    assert [vendor_name(t) for t in got] == ["amd", "nvidia", "nvidia", "nvidia"]
    with pytest.raises(UnknownTargetError, match="sm_80a"):
        parse_targets("sm_80a")
    with pytest.raises(UnknownTargetError, match="sm_91"):
        parse_targets("sm_91")


@pytest.mark.parametrize(
    "code, device, loads",
    [
        ("compute_90a", "sm_100", False),
        ("compute_100f", "sm_120", False),
        ("sm_90", "sm_90a", True),
        ("sm_80", "sm_90", False),
        ("compute_80", "sm_90", True),
    ],
)
def test_compat_asks_nvidia_rules(both, code, device, loads):
    from rocm_build_backend.gpu import compat

    assert compat.loads_on(code, device) is loads


def test_recorded_h200_through_detect(both):
    from rocm_build_backend.gpu.detect import detect, require_targets

    found = detect(
        recorded={
            "nvidia-smi": (H200 / "nvidia-smi-query.csv").read_text(),
            "nvidia-smi -L": (H200 / "nvidia-smi-L.txt").read_text(),
        },
        env={},
    )
    assert [str(t) for t in require_targets(found)] == ["sm_90"]
    assert found.source == "nvidia-smi"
    assert found.devices[0].name == "NVIDIA H200" and found.devices[0].included


def test_hidden_by_cuda_visible_devices_is_no_silent_fallback(both):
    from rocm_build_backend.gpu.detect import detect, require_targets

    found = detect(
        recorded={"nvidia-smi": (H200 / "nvidia-smi-query.csv").read_text()}, env={"CUDA_VISIBLE_DEVICES": "3"}
    )
    assert found.targets == [] and any("no GPU 3" in w for w in found.warnings)
    with pytest.raises(NoGpuDetectedError) as exc:
        require_targets(found)
    assert "CUDA_VISIBLE_DEVICES" in exc.value.hint


def test_live_with_a_runner(only_nvidia, tmp_path):
    from rocm_build_backend.gpu.detect import detect

    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    calls = []

    def run(argv, **kw):
        calls.append(argv)
        name = "nvidia-smi-L.txt" if argv[1:] == ["-L"] else "nvidia-smi-query.csv"
        return subprocess.CompletedProcess(argv, 0, (H200 / name).read_text(), "")

    found = detect(run=run, env={"PATH": str(tmp_path)})
    assert [str(t) for t in found.targets] == ["sm_90"] and calls[0][0] == str(fake)


def test_live_without_nvidia_tools_spawns_nothing(only_nvidia, tmp_path):
    from rocm_build_backend.gpu.detect import detect

    def run(argv, **kw):
        raise AssertionError(f"ran {argv}")

    found = detect(run=run, env={"PATH": str(tmp_path)})
    # no NVIDIA stack: NVIDIA's probe says so (detect shows it), and it is not looked for in messages
    assert found.targets == [] and list(found.seen) == ["nvidia"] and found.absent == ("nvidia",)
    assert found.seen["nvidia"].startswith("not installed")


def test_nvidia_smi_that_fails_is_reported(only_nvidia, tmp_path):
    from rocm_build_backend.gpu.detect import detect

    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."

    def run(argv, **kw):
        return subprocess.CompletedProcess(argv, 9, msg + "\n", "")

    found = detect(run=run, env={"PATH": str(tmp_path)})
    assert found.targets == [] and "nvidia_not_found" in found.causes
    assert "couldn't communicate" in found.seen["nvidia"] and found.label("nvidia") == "NVML and nvidia-smi"


def test_vendor_surface():
    assert NVIDIA.table_key("sm_90a") == "sm_90" and NVIDIA.owns("compute_100f") and not NVIDIA.owns("gfx90a")
    assert NVIDIA.parse("sm_90:xnack+") == "NVIDIA target 'sm_90:xnack+' takes no ':' features"
    assert NVIDIA.sort_key("sm_90") < NVIDIA.sort_key("compute_90") < NVIDIA.sort_key("sm_100")


def test_cli_detect_replays_nvidia_smi(both, capsys):
    import json

    from rocm_build_backend.cli import main

    assert main(["detect", "--json", "--nvidia-smi-output", str(H200 / "nvidia-smi-query.csv")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["targets"] == ["sm_90"] and out["source"] == "nvidia-smi"
