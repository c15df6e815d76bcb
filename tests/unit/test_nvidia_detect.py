"""NVIDIA detection: nvidia-smi text recorded on the H200, NVML through a fake library,
CUDA_VISIBLE_DEVICES, and the capped runner."""

from __future__ import annotations

import json
import sys

import pytest

from rocm_build_backend.errors import ConfigError, FormatError, NoGpuDetectedError
from rocm_build_backend.gpu.nvidia.detect import detect_nvidia, visible
from rocm_build_backend.gpu.nvidia.nvml import NvmlUnavailable, nvml_gpus
from rocm_build_backend.gpu.nvidia.smi import NvidiaGpu, parse_list, parse_query_csv
from rocm_build_backend.gpu.programs import run_text
from helpers import FakeNvml, TESTS

DATA = TESTS / "data" / "nvidia" / "h200"
H200_UUID = "GPU-2f8b5540-5bd3-4a9b-dae8-9ebde4e48005"
MIG_LISTING = """GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-aaaa1111-0000-0000-0000-000000000000)
  MIG 3g.20gb     Device  0: (UUID: MIG-bbbb2222-0000-0000-0000-000000000000)
  MIG 3g.20gb     Device  1: (UUID: MIG-cccc3333-0000-0000-0000-000000000000)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-dddd4444-0000-0000-0000-000000000000)
"""
TWO = [
    NvidiaGpu(0, "NVIDIA A100-SXM4-40GB", 8, 0, "GPU-aaaa1111-0000-0000-0000-000000000000"),
    NvidiaGpu(1, "NVIDIA H100 80GB HBM3", 9, 0, "GPU-dddd4444-0000-0000-0000-000000000000"),
]


def text(name):
    return (DATA / name).read_text()


def test_h200_query_csv():
    (gpu,) = parse_query_csv(text("nvidia-smi-query.csv"))
    assert (gpu.index, gpu.name, gpu.cc, str(gpu.target), gpu.uuid) == (0, "NVIDIA H200", "9.0", "sm_90", H200_UUID)


def test_h200_query_csv_with_header_and_without_uuid():
    assert parse_query_csv(text("nvidia-smi-query-header.csv"))[0].uuid == H200_UUID
    assert str(parse_query_csv("0, NVIDIA H200, 9.0\n")[0].target) == "sm_90"


def test_old_driver_without_compute_cap():
    with pytest.raises(FormatError) as exc:
        parse_query_csv(text("nvidia-smi-bad-field.txt"))
    assert "510" in exc.value.hint


@pytest.mark.parametrize(
    "bad", ["x, NVIDIA H200, 9.0\n", "0, NVIDIA H200, [N/A]\n", "0, NVIDIA H200, 9.0\n0, H200, 9.0\n"]
)
def test_bad_query_lines(bad):
    with pytest.raises(FormatError):
        parse_query_csv(bad)


def test_too_much_text_is_refused():
    with pytest.raises(FormatError, match="more than"):
        parse_query_csv("0, NVIDIA H200, 9.0\n" * 70000)


def test_h200_list_and_mig_listing():
    assert parse_list(text("nvidia-smi-L.txt")) == {H200_UUID: (0, H200_UUID)}
    got = parse_list(MIG_LISTING)
    assert got["MIG-cccc3333-0000-0000-0000-000000000000"] == (0, TWO[0].uuid)
    with pytest.raises(FormatError):
        parse_list("GPU zero\n")


def test_detect_from_recorded_output():
    found = detect_nvidia({}, smi_output=text("nvidia-smi-query.csv"))
    assert [str(t) for t in found.targets()] == ["sm_90"]
    assert found.to_json()["gpus"][0]["uuid"] == H200_UUID


@pytest.mark.parametrize(
    "value, indices",
    [
        ("1", [1]),
        ("1,0", [1, 0]),
        ("GPU-dddd", [1]),
        ("0,-1,1", [0]),
        ("1,1", [1]),
        ("MIG-GPU-aaaa1111-0000-0000-0000-000000000000/1/0", [0]),
        ("MIG-cccc3333", [0]),
    ],
)
def test_cuda_visible_devices(value, indices):
    gpus = [
        TWO[0].__class__(
            *(getattr(TWO[0], f) for f in ("index", "name", "major", "minor", "uuid")),
            mig=("MIG-bbbb2222-0000-0000-0000-000000000000", "MIG-cccc3333-0000-0000-0000-000000000000"),
        ),
        TWO[1],
    ]
    shown, _ = visible(gpus, value, "PCI_BUS_ID")
    assert [g.index for g in shown] == indices


@pytest.mark.parametrize(
    "value, error, words",
    [
        ("", NoGpuDetectedError, "hides every GPU"),
        ("-1", NoGpuDetectedError, "hides every GPU"),
        ("2", ConfigError, "no GPU 2"),
        ("GPU-ffff", ConfigError, "no GPU has the UUID"),
        ("GPU-", ConfigError, "start of 2"),
        ("MIG-bbbb", ConfigError, "no MIG device was found"),
        ("banana", ConfigError, "neither"),
    ],
)
def test_cuda_visible_devices_never_falls_back(value, error, words):
    with pytest.raises(error, match=words):
        visible(TWO, value, "PCI_BUS_ID")


def test_indices_over_different_gpus_need_pci_order():
    with pytest.raises(ConfigError) as exc:
        visible(TWO, "0", None)
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in exc.value.hint
    assert [g.index for g in visible(TWO, "GPU-aaaa", None)[0]] == [0]


def test_recorded_live_answers_on_the_h200():
    """What detect_nvidia said on the H200 itself (NVML in process), per CUDA_VISIBLE_DEVICES."""
    live = json.loads((DATA / "detect_live.json").read_text())
    assert live["unset"]["ok"]["source"] == "NVML (libnvidia-ml.so.1)"
    assert live["uuid prefix"]["ok"]["targets"] == ["sm_90"]
    assert "no GPU 1" in live["1"]["error"] and "hides every GPU" in live["empty"]["error"]


def test_nvml_answers_like_the_h200():
    recorded = json.loads((DATA / "nvml.json").read_text())
    gpus = nvml_gpus(lambda name: FakeNvml(recorded))
    assert [g.to_json() for g in gpus] == recorded


def test_nvml_failures_are_named():
    with pytest.raises(NvmlUnavailable, match="nvmlInit_v2 failed: Driver Not Loaded"):
        nvml_gpus(lambda name: FakeNvml([], fail={"nvmlInit_v2": 9}))

    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    with pytest.raises(NvmlUnavailable, match="cannot be loaded"):
        nvml_gpus(missing)


def test_falls_back_to_nvidia_smi_and_says_so():
    def no_nvml(name):
        raise OSError("not found")

    calls = []

    def run(argv):
        calls.append(argv)
        return 0, text("nvidia-smi-L.txt") if argv[1] == "-L" else text("nvidia-smi-query.csv")

    found = detect_nvidia({}, load=no_nvml, run=run)
    assert found.source == "nvidia-smi" and [str(t) for t in found.targets()] == ["sm_90"]
    assert any("NVML" in n and "cannot be loaded" in n for n in found.notes)
    assert calls[0][1:] == ["--query-gpu=index,name,compute_cap,uuid", "--format=csv,noheader"]


def test_no_probe_works():
    def no_nvml(name):
        raise OSError("not found")

    def run(argv):
        raise FileNotFoundError(2, "No such file or directory", argv[0])

    with pytest.raises(NoGpuDetectedError) as exc:
        detect_nvidia({}, load=no_nvml, run=run)
    assert "NVML" in exc.value.message and "nvidia-smi" in exc.value.message


def test_nvidia_smi_failing_is_reported():
    def no_nvml(name):
        raise OSError("not found")

    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    with pytest.raises(NoGpuDetectedError, match="couldn't communicate"):
        detect_nvidia({}, load=no_nvml, run=lambda argv: (9, msg))


def test_run_text():
    assert run_text([sys.executable, "-c", "print('hello')"], timeout=20) == (0, "hello\n")
    with pytest.raises(FormatError, match="more than"):
        run_text([sys.executable, "-c", "print('x' * 5000)"], timeout=20, limit=1000)
    with pytest.raises(TimeoutError):
        run_text([sys.executable, "-c", "import time; time.sleep(10)"], timeout=0.5)


def test_live_path_end_to_end_through_a_real_process(tmp_path):
    """nvidia-smi as a real program (the pinned script for sm_90), NVML unavailable."""
    from rocm_build_backend.gpu.nvidia.pinned import write_nvidia_smi

    smi = write_nvidia_smi(tmp_path / "bin", ["sm_90"])

    def no_nvml(name):
        raise OSError("not found")

    found = detect_nvidia({"PATH": str(tmp_path / "bin")}, load=no_nvml, smi=str(smi))
    assert [str(t) for t in found.targets()] == ["sm_90"] and found.source == str(smi)
    import shutil

    if shutil.which("nvidia-smi") is None:  # no real nvidia-smi behind the pinned one: -L fails, and says so
        assert any("-L: exit status 127" in n for n in found.notes)
