"""Host GPU detection: captured real outputs against the answer key, fake KFD sysfs trees.

Fixtures and the key live in tests/data/detect/ (SOURCES.md gives each fixture's source).
Programs on PATH are covered in test_detect_programs.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from rocm_build_backend.cli import render
from rocm_build_backend.gpu import detect as D
from rocm_build_backend.gpu.amd.amdsmi import parse_amd_smi
from rocm_build_backend.gpu.amd.kfd import read_kfd
from rocm_build_backend.gpu.amd.names import kfd_to_processor
from rocm_build_backend.gpu.amd.overrides import parse_override
from rocm_build_backend.gpu.amd.rocminfo import parse_rocminfo
from rocm_build_backend.gpu.amd.tools import smi_gfx, parse_amdgpu_arch, parse_enumerator, parse_rocm_smi
from rocm_build_backend.errors import NoGpuDetectedError
from rocm_build_backend.gpu.targets import GpuTarget
from helpers import ROOT, TESTS

DATA = TESTS / "data" / "detect"
KEY = json.loads((DATA / "detect-expected.json").read_text())["fixtures"]
REPO = ROOT

TOOL_PROBE = {
    "rocminfo": "rocminfo",
    "rocm_agent_enumerator": "rocm_agent_enumerator",
    "amdgpu-arch": "amdgpu-arch",
    "aomp offload-arch -v": "amdgpu-arch",
    "rocm-smi --showproductname --json": "rocm-smi",
    "rocm-smi --showproductname --csv": "rocm-smi",
    "amd-smi static": "amd-smi",
    "amd-smi static --json": "amd-smi",
    "amd-smi list": "amd-smi",
}
PARSER = {
    "rocminfo": parse_rocminfo,
    "rocm_agent_enumerator": parse_enumerator,
    "amdgpu-arch": parse_amdgpu_arch,
    "rocm-smi": parse_rocm_smi,
    "amd-smi": parse_amd_smi,
}


# --------------------------------------------------------------------------- fake sysfs


def fixture(name: str) -> str:
    return (DATA / name).read_text()


CPU = fixture("cpu_node0.kfd-properties.txt")
MI300X = fixture("mi300x_gfx942.kfd-properties.txt")
W7500 = fixture("radeon_pro_w7500_gfx1102.kfd-properties.txt")
NAVI23 = fixture("navi23_0x73ef_gfx1032.kfd-properties.txt")
VII = fixture("radeon_vii_gfx906.kfd-properties.txt")


def props(base: str, **changes) -> str:
    """A properties file from a real one, with some lines changed (or added)."""
    lines = dict(line.split(" ", 1) for line in base.splitlines())
    for key, value in changes.items():
        lines[key] = str(value)
    return "".join(f"{k} {v}\n" for k, v in lines.items())


def igpu(version: int, cus: int = 2) -> str:
    """An iGPU node made from a real dGPU node: new target, tiny CU count, no unique id."""
    return props(NAVI23, gfx_target_version=version, simd_count=cus * 2, simd_per_cu=2, device_id=0x164E, unique_id=0)


def tree(tmp_path: Path, nodes: dict[int, str | bytes | None], *, virtual: bool = False) -> Path:
    """A fake root whose KFD topology has these nodes (None: a node without properties)."""
    rel = "sys/devices/virtual/kfd/kfd/topology/nodes" if virtual else "sys/class/kfd/kfd/topology/nodes"
    base = tmp_path / "root" / rel
    base.mkdir(parents=True)
    for node, text in nodes.items():
        d = base / str(node)
        d.mkdir()
        if isinstance(text, bytes):
            (d / "properties").write_bytes(text)
        elif text is not None:
            (d / "properties").write_text(text)
    return tmp_path / "root"


def eight_gpus(tmp_path: Path) -> Path:
    nodes = {0: CPU, 1: CPU}
    for i in range(8):
        nodes[2 + i] = props(MI300X, unique_id=0x1000 + i, location_id=1000 + i)
    return tree(tmp_path, nodes)


def no_run(*args, **kwargs):
    raise AssertionError(f"a program was run: {args}")


def kfd(root: Path, env: dict | None = None, **kw) -> D.Detection:
    """Detection from the sysfs tree alone: recorded={} means no program may run."""
    return D.detect(root=root, env=env or {}, recorded={}, run=no_run, **kw)


# --------------------------------------------------------------------------- the answer key


def test_every_fixture_is_in_the_key():
    files = {p.name for p in DATA.iterdir() if p.name not in ("SOURCES.md", "detect-expected.json")}
    assert files == set(KEY)
    assert len(KEY) == 27


def summarize(devices):
    """The key's 'gpus' shape: distinct (arch, kind) with counts, in agent order."""
    out: dict[tuple, dict] = {}
    for d in devices:
        kind = "igpu" if d.kind == "apu" else d.kind
        feats = {f: getattr(d.target, f) for f in ("sramecc", "xnack") if getattr(d.target, f)}
        key = (d.target.processor, kind)
        if key not in out:
            out[key] = {"arch": d.target.processor, "count": 0, "features": feats, "kind": kind}
        out[key]["count"] += 1
    return list(out.values())


@pytest.mark.parametrize("name", sorted(k for k in KEY if KEY[k]["tool"] != "kfd-properties"))
def test_tool_output_against_key(name):
    want = KEY[name]
    probe = TOOL_PROBE[want["tool"]]
    text = fixture(name)
    result = PARSER[probe](text)
    assert summarize(result.devices) == want["gpus"]
    assert result.error == want.get("error")
    got = D.detect(recorded={probe: text}, env={}, run=no_run)
    assert sorted(map(str, got.targets)) == sorted(want["build_targets"])
    assert got.source == (probe if want["gpus"] else None)
    # the devices left out are exactly the iGPUs beside a dGPU
    left_out = {d.target.processor for d in got.devices if not d.included}
    assert left_out == {g["arch"] for g in want["gpus"]} - set(want["build_targets"])


@pytest.mark.parametrize("name", sorted(k for k in KEY if KEY[k]["tool"] == "kfd-properties"))
def test_kfd_properties_against_key(name, tmp_path):
    want = KEY[name]
    nodes = {0: CPU} if name.startswith("cpu_") else {0: CPU, 1: fixture(name)}
    got = kfd(tree(tmp_path, nodes))
    assert summarize(got.devices) == want["gpus"]
    expected_processor = kfd_to_processor(want["gfx_target_version"])
    if want["gpus"]:
        assert expected_processor == want["gpus"][0]["arch"]
        assert [str(t) for t in got.targets] == [expected_processor]
        assert got.devices[0].device_id == want["device_id"]
        assert got.devices[0].node == 1 and got.source == "kfd"
    else:
        assert expected_processor is None and got.targets == [] and got.source is None
        assert got.seen["kfd"] == "no GPU nodes (1 CPU node)"


def test_override_trap_reports_the_physical_gpu():
    got = D.detect(recorded={"rocminfo": fixture("rx6700xt_hsa_override_10.3.0.rocminfo.txt")}, env={})
    (dev,) = got.devices
    assert str(dev.target) == "gfx1030" and str(dev.physical) == "gfx1031"
    assert dev.device_id == "0x73df" and dev.name == "AMD Radeon RX 6700 XT"
    assert any("HSA_OVERRIDE_GFX_VERSION" in w and "gfx1031" in w for w in got.warnings)


def test_no_false_override_flag_on_plain_outputs():
    for name, want in KEY.items():
        if want["tool"] == "rocminfo" and "override" not in name:
            result = parse_rocminfo(fixture(name))
            assert all(d.physical is None for d in result.devices), name
            assert not any("OVERRIDE" in w for w in result.warnings), name


def test_igpu_evidence_without_memory_properties_line():
    # the older output has no 'Memory Properties: APU'; the table and the CU count still tell
    result = parse_rocminfo(fixture("mi100_plus_apu_gfx1036.rocminfo.txt"))
    apu = [d for d in result.devices if d.kind == "apu"]
    assert [d.processor for d in apu] == ["gfx1036"]
    assert "Memory Properties" not in apu[0].evidence and "2 compute units" in apu[0].evidence


def test_rocminfo_fields_kept():
    result = parse_rocminfo(fixture("mi300x_8gpu_xeon.rocminfo.txt"))
    assert [d.node for d in result.devices] == list(range(2, 10))
    assert result.devices[0].uuid == "GPU-07386a321fa45d1e"
    assert result.devices[0].compute_units == 304
    assert {d.name for d in result.devices} == {"AMD Instinct MI300X"}


def test_keep_features():
    text = fixture("mi300x_4gpu.rocminfo.txt")
    assert [str(t) for t in D.detect(recorded={"rocminfo": text}, env={}).targets] == ["gfx942"]
    full = D.detect(recorded={"rocminfo": text}, env={}, keep_features=True)
    assert [str(t) for t in full.targets] == ["gfx942:sramecc+:xnack-"]


# --------------------------------------------------------------------------- rocminfo variants


def test_rocminfo_grep_excerpt():
    text = "  Name:                    gfx1030\n      Name:                    amdgcn-amd-amdhsa--gfx1030\n"
    result = parse_rocminfo(text)
    assert [str(d.target) for d in result.devices] == ["gfx1030"]


def test_rocminfo_isa_lines_only():
    lines = [ln for ln in fixture("apu_gfx1036_plus_rx7900xtx.rocminfo.txt").splitlines() if "amdgcn" in ln]
    assert len(lines) == 4  # two GPUs, each with a generic ISA
    result = parse_rocminfo("\n".join(lines))
    assert [d.processor for d in result.devices] == ["gfx1100", "gfx1036"]
    got = D.detect(recorded={"rocminfo": "\n".join(lines)}, env={})
    assert [str(t) for t in got.targets] == ["gfx1100"]


def test_rocminfo_grep_names_and_marketing():
    text = "\n".join(
        ln
        for ln in fixture("rx5700xt_gfx1010_plus_apu_gfx1036.rocminfo.txt").splitlines()
        if "Name:" in ln and "Vendor" not in ln
    )
    result = parse_rocminfo(text)
    assert [str(d.target) for d in result.devices] == ["gfx1010:xnack-", "gfx1036"]
    assert result.devices[0].name == "AMD Radeon RX 5700 XT"


def test_rocminfo_real_escape_codes():
    line = "ROCk module is loaded"
    text = fixture("rx6900xt_gfx1030.rocminfo.txt").replace(line, f"\x1b[37m{line}\x1b[0m")
    assert [d.processor for d in parse_rocminfo(text).devices] == ["gfx1030"]


def agent(n, name, dtype, *, isa=None, marketing=None, cus=None, memory=""):
    lines = [
        "*******",
        f"Agent {n}",
        "*******",
        f"  Name:                    {name}",
        f"  Marketing Name:          {marketing or name}",
        f"  Node:                    {n - 1}",
        f"  Device Type:             {dtype}",
    ]
    if cus is not None:
        lines.append(f"  Compute Unit:            {cus}")
    lines.append(f"  Memory Properties:       {memory}")
    lines.append("  ISA Info:")
    for i, target in enumerate(isa or []):
        lines += [f"    ISA {i + 1}", f"      Name:                    amdgcn-amd-amdhsa--{target}"]
    return "\n".join(lines)


def test_rocminfo_skips_npu_and_generic():
    text = "\n".join(
        [
            "ROCk module version 6.12.12 is loaded",
            agent(1, "AMD RYZEN AI MAX+ 395 w/ Radeon 8060S", "CPU", cus=32),
            agent(
                2,
                "gfx1151",
                "GPU",
                isa=["gfx1151", "gfx11-generic"],
                marketing="AMD Radeon Graphics",
                cus=40,
                memory="APU",
            ),
            agent(3, "aie2", "DSP", isa=["aie2"], cus=0),
        ]
    )
    result = parse_rocminfo(text)
    assert [str(d.target) for d in result.devices] == ["gfx1151"]
    assert "1 other" in result.summary
    got = D.detect(recorded={"rocminfo": text}, env={})
    assert [str(t) for t in got.targets] == ["gfx1151"]
    assert got.devices[0].included and "only kind" in got.devices[0].reason


def test_rocminfo_gpu_named_like_the_cpu_is_an_igpu():
    cpu = "AMD Ryzen 7 5700G with Radeon Graphics"
    text = "\n".join(
        [
            agent(1, cpu, "CPU"),
            agent(2, "gfx1030", "GPU", isa=["gfx1030"], marketing=cpu, cus=8),
            agent(3, "gfx1100", "GPU", isa=["gfx1100"], marketing="Radeon RX 7900 XTX", cus=96),
        ]
    )
    got = D.detect(recorded={"rocminfo": text}, env={})
    assert [str(t) for t in got.targets] == ["gfx1100"]
    igpu_dev = got.devices[0]
    assert igpu_dev.kind == "apu" and "CPU's" in igpu_dev.evidence and not igpu_dev.included


def test_rocminfo_gfx000_from_empty_override():
    text = "\n".join([agent(1, "cpu", "CPU"), agent(2, "gfx000", "GPU", isa=["gfx000"], cus=40)])
    result = parse_rocminfo(text)
    assert result.devices == []
    assert any("gfx000" in w and "HSA_OVERRIDE_GFX_VERSION" in w for w in result.warnings)


def test_rocminfo_failure_texts():
    assert parse_rocminfo("").summary == "empty output"
    junk = parse_rocminfo("something went wrong\n")
    assert junk.error == "tool_failed" and "something went wrong" in junk.summary
    ooo = parse_rocminfo("hsa api call failure at: rocminfo.cc:1\nCall returned HSA_STATUS_ERROR_OUT_OF_RESOURCES\n")
    assert ooo.error == "out_of_resources"


# --------------------------------------------------------------------------- line tools


def test_enumerator_old_format_with_gfx000():
    result = parse_enumerator("gfx000\ngfx90a\ngfx90a\n")
    assert [d.processor for d in result.devices] == ["gfx90a", "gfx90a"]
    assert [d.node for d in result.devices] == [0, 1]
    assert "gfx000" in result.summary


def test_enumerator_first_line_is_a_gpu_now():
    # new format: no gfx000, so a "skip the first line" parser would lose GPU 0
    result = parse_enumerator(fixture("mi300x_8gpu.rocm_agent_enumerator.txt"))
    assert len(result.devices) == 8


def test_enumerator_only_placeholder_and_name_format():
    assert parse_enumerator("gfx000\n").devices == []
    named = parse_enumerator("gfx942:sramecc+:xnack-\n")
    assert str(named.devices[0].target) == "gfx942:sramecc+:xnack-"


def test_amdgpu_arch_formats():
    (dev,) = parse_amdgpu_arch("gfx906   sramecc- xnack-\n").devices
    assert str(dev.target) == "gfx906:sramecc-:xnack-"
    assert [d.processor for d in parse_amdgpu_arch("gfx1250-strict\n").devices] == ["gfx1250"]
    devs = parse_amdgpu_arch(fixture("vega20_plus_vega10.offload-arch-v.txt")).devices
    assert [(d.processor, d.device_id) for d in devs] == [("gfx906", "0x66af"), ("gfx900", "0x687f")]
    assert parse_amdgpu_arch("").error is None


def test_igpu_by_table_in_line_tools():
    got = D.detect(recorded={"rocm_agent_enumerator": "gfx1100\ngfx1036\n"}, env={})
    assert [str(t) for t in got.targets] == ["gfx1100"]
    only = D.detect(recorded={"amdgpu-arch": "gfx1103\n"}, env={})
    assert [str(t) for t in only.targets] == ["gfx1103"]


def test_rocm_smi_decimal_gfx_version():
    assert smi_gfx("gfx9010") == "gfx90a"
    assert smi_gfx("gfx942") == "gfx942"
    assert smi_gfx("gfx9012") == "gfx90c"
    assert smi_gfx("gfx12345") is None


def test_recorded_probe_order_and_disagreement():
    got = D.detect(
        env={},
        recorded={
            "rocm_agent_enumerator": "gfx1030\n",
            "rocminfo": fixture("rx6900xt_gfx1030.rocminfo.txt"),
            "amdgpu-arch": "gfx1031\n",
        },
    )
    assert got.source == "rocminfo"
    assert set(got.seen) == {"rocminfo", "rocm_agent_enumerator", "amdgpu-arch"}
    assert any(w.startswith("amdgpu-arch saw gfx1031") for w in got.warnings)


def test_recorded_without_root_reads_no_sysfs(tmp_path):
    got = D.detect(recorded={"rocminfo": fixture("err_rock_not_loaded_secureboot.rocminfo.txt")}, env={})
    assert "kfd" not in got.seen
    with_root = D.detect(
        root=eight_gpus(tmp_path),
        env={},
        run=no_run,
        recorded={"rocminfo": fixture("err_rock_not_loaded_secureboot.rocminfo.txt")},
    )
    assert with_root.source == "kfd" and len(with_root.devices) == 8


def test_unknown_recorded_probe_is_a_warning():
    got = D.detect(recorded={"lspci": "x"}, env={})
    assert any("lspci" in w for w in got.warnings)


# --------------------------------------------------------------------------- KFD trees


def test_eight_gpus_sysfs(tmp_path):
    got = kfd(eight_gpus(tmp_path))
    assert [str(t) for t in got.targets] == ["gfx942"]
    assert [d.node for d in got.devices] == list(range(2, 10))
    assert all(d.included and d.kind == "dgpu" and d.source == "kfd" for d in got.devices)
    assert got.devices[0].uuid == "GPU-0000000000001000"
    assert got.devices[0].compute_units == 304
    assert got.seen == {"kfd": "8 GPU nodes (gfx942 x8), 2 CPU nodes"}
    assert got.warnings == []


def test_live_detect_on_sysfs_runs_no_program(tmp_path):
    got = D.detect(root=eight_gpus(tmp_path), env={"PATH": "/nonexistent"}, run=no_run)
    # NVIDIA's probe is listed as not installed (no driver library, no nvidia-smi); nothing ran
    assert got.source == "kfd" and set(got.seen) == {"kfd", "nvidia"} and got.absent == ("nvidia",)


# counts the processes started through subprocess (the only way the package starts one)
SPAWNS = (
    "import subprocess\n"
    "spawned = []\n"
    "class _Counting(subprocess.Popen):\n"
    "    def __init__(self, *a, **k):\n"
    "        spawned.append(a)\n"
    "        super().__init__(*a, **k)\n"
    "subprocess.Popen = _Counting\n"
)


def test_sysfs_path_spawns_no_process(tmp_path):
    root = eight_gpus(tmp_path)
    code = SPAWNS + (
        "from rocm_build_backend.gpu.detect import detect\n"
        f"d = detect(root={str(root)!r}, env={{}})\n"
        "print(d.source, len(d.devices), len(spawned))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["kfd", "8", "0"]


def test_virtual_devices_path(tmp_path):
    got = kfd(tree(tmp_path, {0: CPU, 1: VII}, virtual=True))
    assert [str(t) for t in got.targets] == ["gfx906"]


def test_mixed_dgpu_and_igpu(tmp_path):
    got = kfd(tree(tmp_path, {0: CPU, 1: W7500, 2: igpu(100306)}))
    assert [str(t) for t in got.targets] == ["gfx1102"]
    dgpu, apu = got.devices
    assert dgpu.included and dgpu.reason == "discrete GPU"
    assert apu.kind == "apu" and not apu.included
    assert "gfx1036 is an APU" in apu.reason and "a discrete GPU is present" in apu.reason


def test_apu_only(tmp_path):
    got = kfd(tree(tmp_path, {0: CPU, 1: igpu(110003, cus=12)}))
    assert [str(t) for t in got.targets] == ["gfx1103"]
    assert got.devices[0].included and got.devices[0].kind == "apu"


def test_tiny_cu_count_marks_an_igpu_even_when_table_says_dgpu(tmp_path):
    # e.g. an iGPU whose target the table does not call an APU
    got = kfd(tree(tmp_path, {0: CPU, 1: W7500, 2: igpu(100300, cus=2)}))
    assert [str(t) for t in got.targets] == ["gfx1102"]
    assert got.devices[1].evidence == "2 compute units"


def test_cpu_cores_on_gpu_node_marks_an_apu(tmp_path):
    merged = props(VII, cpu_cores_count=4)
    got = kfd(tree(tmp_path, {0: W7500, 1: merged}))
    assert [str(t) for t in got.targets] == ["gfx1102"]
    assert "CPU cores" in got.devices[1].evidence


def test_global_override(tmp_path):
    root = tree(tmp_path, {0: CPU, 1: NAVI23, 2: igpu(100306)})
    got = kfd(root, {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"})
    assert [str(t) for t in got.targets] == ["gfx1030"]
    dgpu, apu = got.devices
    assert (str(dgpu.target), str(dgpu.physical)) == ("gfx1030", "gfx1032")
    # the override reaches the iGPU too, which stays an iGPU by its physical target
    assert (str(apu.target), str(apu.physical), apu.kind, apu.included) == ("gfx1030", "gfx1036", "apu", False)
    assert any("loads gfx1030 code on gfx1032" in w for w in got.warnings)


def test_per_node_override_wins(tmp_path):
    root = tree(tmp_path, {0: CPU, 1: props(W7500, gfx_target_version=120000), 2: NAVI23})
    got = kfd(root, {"HSA_OVERRIDE_GFX_VERSION_2": "10.3.0"})
    assert [str(t) for t in got.targets] == ["gfx1030", "gfx1200"]
    assert got.devices[0].physical is None
    assert str(got.devices[1].physical) == "gfx1032"
    both = kfd(root, {"HSA_OVERRIDE_GFX_VERSION": "11.0.0", "HSA_OVERRIDE_GFX_VERSION_2": "10.3.0"})
    assert [str(d.target) for d in both.devices] == ["gfx1100", "gfx1030"]


def test_override_decimal_stepping(tmp_path):
    root = tree(tmp_path, {0: CPU, 1: props(MI300X, gfx_target_version=90008)})
    got = kfd(root, {"HSA_OVERRIDE_GFX_VERSION": "9.0.10"})
    assert [str(t) for t in got.targets] == ["gfx90a"]


@pytest.mark.parametrize(
    "value, words",
    [
        ("", ["set but empty", "gfx1032"]),
        ("   ", ["set but empty"]),
        ("gfx1030", ["not major.minor.stepping"]),
        ("10.3", ["not major.minor.stepping"]),
        ("10.3.0.1", ["not major.minor.stepping"]),
    ],
)
def test_bad_override_builds_the_physical_gpu(tmp_path, value, words):
    got = kfd(tree(tmp_path, {0: CPU, 1: NAVI23}), {"HSA_OVERRIDE_GFX_VERSION": value})
    assert [str(t) for t in got.targets] == ["gfx1032"]
    assert got.devices[0].physical is None
    assert any(all(w in msg for w in words) for msg in got.warnings), got.warnings


def test_empty_per_node_override(tmp_path):
    env = {"HSA_OVERRIDE_GFX_VERSION_1": "", "HSA_OVERRIDE_GFX_VERSION": "10.3.0"}
    got = kfd(tree(tmp_path, {0: CPU, 1: NAVI23}), env)
    assert [str(t) for t in got.targets] == ["gfx1032"]
    assert any("HSA_OVERRIDE_GFX_VERSION_1 is set but empty" in w for w in got.warnings)


def test_cross_generation_override_warns(tmp_path):
    got = kfd(tree(tmp_path, {0: CPU, 1: igpu(110501, cus=40)}), {"HSA_OVERRIDE_GFX_VERSION": "12.0.1"})
    assert [str(t) for t in got.targets] == ["gfx1201"]
    assert any("another GPU generation" in w for w in got.warnings)


def test_per_node_override_on_a_cpu_node_warns(tmp_path):
    got = kfd(tree(tmp_path, {0: CPU, 1: NAVI23}), {"HSA_OVERRIDE_GFX_VERSION_0": "10.3.0"})
    assert [str(t) for t in got.targets] == ["gfx1032"]
    assert any("HSA_OVERRIDE_GFX_VERSION_0 names no GPU" in w and "GPU nodes here: 1" in w for w in got.warnings)


def test_unreadable_and_garbage_nodes(tmp_path):
    root = tree(
        tmp_path,
        {
            0: CPU,
            1: None,  # no properties file
            2: b"\xff\xfe\x00garbage\nsimd_count lots\n",
            3: props(NAVI23, gfx_target_version="abc"),
            4: props(NAVI23, gfx_target_version=99999),  # minor 99 does not decode
            5: "",
            6: W7500,
            7: "gfx_target_version 100302 extra\nsimd_count 64\n",  # odd line shape
        },
    )
    (root / "sys/class/kfd/kfd/topology/nodes/8/properties").mkdir(parents=True)  # unreadable: a directory
    (root / "sys/class/kfd/kfd/topology/nodes/notanode").mkdir()
    got = kfd(root)
    assert [str(t) for t in got.targets] == ["gfx1102"]
    assert [d.node for d in got.devices] == [6]
    text = "\n".join(got.warnings)
    for node in (1, 2, 3, 4, 5, 7, 8):
        assert f"KFD node {node}:" in text
    assert "99999 does not decode" in text
    assert "7 skipped" in got.seen["kfd"]


def test_unreadable_node_is_a_warning(tmp_path):
    """A properties file that cannot be read (here a dangling link; EPERM under cgroups) is skipped."""
    root = tree(tmp_path, {0: CPU, 1: W7500, 2: NAVI23})
    path = root / "sys/class/kfd/kfd/topology/nodes/2/properties"
    path.unlink()
    path.symlink_to(tmp_path / "gone")
    got = kfd(root)
    assert [str(t) for t in got.targets] == ["gfx1102"]
    assert any("KFD node 2: cannot read properties" in w for w in got.warnings)


def test_processor_missing_from_table(tmp_path):
    got = kfd(tree(tmp_path, {0: CPU, 1: props(W7500, gfx_target_version=140000)}))
    assert [str(t) for t in got.targets] == ["gfx1400"]
    assert any("gfx1400 is not in the target table" in w for w in got.warnings)


def test_no_topology(tmp_path):
    (tmp_path / "sys").mkdir()
    got = kfd(tmp_path)
    assert got.targets == [] and got.seen["kfd"].startswith("no KFD topology")


# --------------------------------------------------------------------------- visible devices


def test_rocr_visible_devices(tmp_path):
    got = kfd(eight_gpus(tmp_path), {"ROCR_VISIBLE_DEVICES": "3,1"})
    assert [d.node for d in got.devices if d.included] == [3, 5]
    hidden = [d for d in got.devices if not d.included]
    assert len(hidden) == 6 and hidden[0].reason == "hidden by ROCR_VISIBLE_DEVICES=3,1"


def test_hip_visible_devices_indexes_into_rocr_list(tmp_path):
    got = kfd(eight_gpus(tmp_path), {"ROCR_VISIBLE_DEVICES": "4,5,6", "HIP_VISIBLE_DEVICES": "2"})
    assert [d.node for d in got.devices if d.included] == [8]


def test_visible_devices_by_uuid_and_bad_entry(tmp_path):
    got = kfd(eight_gpus(tmp_path), {"ROCR_VISIBLE_DEVICES": "GPU-0000000000001007,zz,0"})
    assert [d.node for d in got.devices if d.included] == [9]
    assert any("'zz' matches no GPU" in w for w in got.warnings)


def test_hiding_the_dgpu_builds_the_igpu(tmp_path):
    got = kfd(tree(tmp_path, {0: CPU, 1: W7500, 2: igpu(100306)}), {"HIP_VISIBLE_DEVICES": "1"})
    assert [str(t) for t in got.targets] == ["gfx1036"]


def test_empty_visible_devices_is_ignored(tmp_path):
    got = kfd(eight_gpus(tmp_path), {"ROCR_VISIBLE_DEVICES": ""})
    assert len([d for d in got.devices if d.included]) == 8
    assert any("set but empty" in w for w in got.warnings)


def test_rocminfo_is_not_filtered_twice_by_rocr_visible_devices():
    # rocminfo runs inside the runtime, which already applied ROCR_VISIBLE_DEVICES
    text = fixture("mi250x_1gcd_lumi.rocminfo.txt")
    got = D.detect(recorded={"rocminfo": text}, env={"ROCR_VISIBLE_DEVICES": "3"})
    assert [str(t) for t in got.targets] == ["gfx90a"]
    hip = D.detect(recorded={"rocminfo": text}, env={"HIP_VISIBLE_DEVICES": "3"})
    assert hip.targets == []


# --------------------------------------------------------------------------- errors


def test_require_targets_returns_the_list(tmp_path):
    assert [str(t) for t in D.require_targets(kfd(eight_gpus(tmp_path)))] == ["gfx942"]


def test_no_gpu_message_names_each_probe(tmp_path):
    root = tree(tmp_path, {0: CPU})
    got = D.detect(root=root, env={}, recorded={"rocminfo": fixture("err_rock_not_loaded_secureboot.rocminfo.txt")})
    with pytest.raises(NoGpuDetectedError) as info:
        D.require_targets(got)
    err = info.value
    assert err.message == (
        "no GPU found (KFD: no GPU nodes (1 CPU node); rocminfo: 'ROCk module is NOT loaded, possibly no GPU devices')"
    )
    assert "Secure Boot" in err.hint and err.hint.endswith(
        "set targets, e.g. ROCM_BUILD_BACKEND_TARGETS=gfx942 or ROCM_BUILD_BACKEND_TARGETS=sm_90 (or TORCH_CUDA_ARCH_LIST=9.0)"
    )
    assert err.exit_code == 3 and str(err).splitlines()[1].startswith("hint: ")


def test_permission_hint():
    got = D.detect(recorded={"rocminfo": fixture("err_kfd_permission_denied_render_group.rocminfo.txt")}, env={})
    with pytest.raises(NoGpuDetectedError) as info:
        D.require_targets(got)
    assert "render and video groups" in info.value.hint
    assert "Permission denied" in info.value.message


def test_wsl_hint(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "version").write_text("Linux version 5.15.153.1-microsoft-standard-WSL2\n")
    got = D.detect(root=tmp_path, env={}, recorded={"rocminfo": fixture("err_rock_not_loaded_wsl2.rocminfo.txt")})
    assert got.causes[0] == "wsl"
    with pytest.raises(NoGpuDetectedError) as info:
        D.require_targets(got)
    assert info.value.hint.startswith("this is WSL") and "ROCM_BUILD_BACKEND_TARGETS" in info.value.hint


def test_driver_missing_with_amd_gpu_on_pci(tmp_path):
    dev = tmp_path / "sys/bus/pci/devices/0000:03:00.0"
    dev.mkdir(parents=True)
    (dev / "vendor").write_text("0x1002\n")
    (dev / "class").write_text("0x030000\n")
    got = kfd(tmp_path)
    with pytest.raises(NoGpuDetectedError) as info:
        D.require_targets(got)
    assert "AMD GPU is on the PCI bus" in info.value.hint
    assert info.value.message == "no GPU found (KFD: no KFD topology (amdgpu driver not loaded))"


def test_no_specific_hint_without_evidence():
    got = D.detect(recorded={}, env={})
    with pytest.raises(NoGpuDetectedError) as info:
        D.require_targets(got)
    assert (
        info.value.hint
        == "set targets, e.g. ROCM_BUILD_BACKEND_TARGETS=gfx942 or ROCM_BUILD_BACKEND_TARGETS=sm_90 (or TORCH_CUDA_ARCH_LIST=9.0)"
    )
    assert info.value.message == "no GPU found (no probe ran)"


def test_all_hidden_error(tmp_path):
    got = kfd(tree(tmp_path, {0: CPU, 1: W7500}), {"ROCR_VISIBLE_DEVICES": "5"})
    assert got.targets == [] and got.source == "kfd"
    with pytest.raises(NoGpuDetectedError) as info:
        D.require_targets(got)
    assert "hidden by ROCR_VISIBLE_DEVICES=5" in info.value.message
    assert "hide every GPU" in info.value.hint


# --------------------------------------------------------------------------- report


def test_to_json_and_text(tmp_path):
    root = tree(tmp_path, {0: CPU, 1: NAVI23, 2: igpu(100306)})
    got = kfd(root, {"HSA_OVERRIDE_GFX_VERSION_1": "10.3.0"})
    data = json.loads(json.dumps(got.to_json()))
    assert data["targets"] == ["gfx1030"] and data["source"] == "kfd"
    first = data["devices"][0]
    assert {k: first[k] for k in ("target", "processor", "physical", "kind", "included")} == {
        "target": "gfx1030",
        "processor": "gfx1030",
        "physical": "gfx1032",
        "kind": "dgpu",
        "included": True,
    }
    assert data["devices"][1]["included"] is False and data["devices"][1]["reason"]
    assert data["warnings"] == got.warnings
    text = render.detection(got)
    assert "build targets: gfx1030  (decided by kfd)" in text
    assert "gfx1032" in text and "a discrete GPU is present" in text
    row = next(line for line in text.splitlines() if "gfx1036" in line)
    assert " no " in row and "apu" in row


def test_text_when_nothing_found():
    text = render.detection(
        D.detect(recorded={"rocminfo": fixture("err_rock_not_loaded_secureboot.rocminfo.txt")}, env={})
    )
    assert text.splitlines()[0] == "no AMD GPU found"
    assert "build targets: (none)" in text and "rocminfo: 'ROCk module is NOT loaded" in text


def test_device_target_is_a_gpu_target(tmp_path):
    dev = kfd(eight_gpus(tmp_path)).devices[0]
    assert isinstance(dev.target, GpuTarget) and dev.processor == "gfx942"


# --------------------------------------------------------------------------- robustness


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400))
def test_parsers_never_raise(text):
    for parser in PARSER.values():
        result = parser(text)
        assert isinstance(result.summary, str)
        for d in result.devices:
            assert d.target.processor.startswith("gfx")


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=300))
def test_kfd_reader_never_raises(tmp_path_factory, blob):
    root = tree(tmp_path_factory.mktemp("k"), {0: CPU, 1: blob, 2: W7500})
    got = read_kfd(root, {})
    assert "gfx1102" in [d.processor for d in got.devices]


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="0123456789.gfx -", max_size=12))
def test_override_values_never_raise(value):
    got = parse_override(value)
    assert got is None or got.startswith("gfx")


# --------------------------------------------------------------------------- hostile sysfs


def nodes_dir(root: Path) -> Path:
    return root / "sys/class/kfd/kfd/topology/nodes"


def test_properties_that_is_a_fifo_is_skipped_not_waited_on(tmp_path):
    import os
    import threading

    root = tree(tmp_path, {0: CPU, 1: VII, 2: None})
    os.mkfifo(nodes_dir(root) / "2" / "properties")  # opening it for reading would block
    result: list = []
    worker = threading.Thread(target=lambda: result.append(kfd(root)), daemon=True)
    worker.start()
    worker.join(20)
    if not result:  # unblock the reader so the test run can end
        fd = os.open(nodes_dir(root) / "2" / "properties", os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        worker.join(5)
        pytest.fail("read_kfd blocked on a FIFO")
    (got,) = result
    assert [str(t) for t in got.targets] == ["gfx906"]
    assert "KFD node 2: cannot read properties (not a regular file); skipped" in got.warnings


def test_properties_linked_to_dev_zero_is_skipped(tmp_path):
    if not Path("/dev/zero").exists():
        pytest.skip("needs /dev/zero")
    root = tree(tmp_path, {0: CPU, 1: VII, 2: None})
    (nodes_dir(root) / "2" / "properties").symlink_to("/dev/zero")
    got = kfd(root)
    assert [str(t) for t in got.targets] == ["gfx906"]
    assert "KFD node 2: cannot read properties (not a regular file); skipped" in got.warnings


def test_properties_too_large_is_skipped(tmp_path):
    big = VII + "".join(f"padding_{i} {i}\n" for i in range(20000))  # ~400 KB; real files are ~1.5 KB
    got = kfd(tree(tmp_path, {0: CPU, 1: VII, 2: big}))
    assert [str(t) for t in got.targets] == ["gfx906"]
    assert any(w.startswith("KFD node 2: cannot read properties (larger than") for w in got.warnings)


@pytest.mark.parametrize("name", ["\u0663", "\u00b2", "\uff11"])  # Arabic-Indic 3, superscript 2, fullwidth 1
def test_node_folder_with_a_non_ascii_digit_is_ignored(tmp_path, name):
    root = tree(tmp_path, {0: CPU, 1: VII})
    (nodes_dir(root) / name).mkdir()
    (nodes_dir(root) / name / "properties").write_text(MI300X)
    got = kfd(root)
    assert [str(t) for t in got.targets] == ["gfx906"] and len(got.devices) == 1


@pytest.mark.parametrize("value", ["\u00b2", "\u0661"])
def test_visible_devices_with_a_non_ascii_digit_is_no_traceback(tmp_path, value):
    root = tree(tmp_path, {0: CPU, 1: VII, 2: VII})
    got = kfd(root, env={"HIP_VISIBLE_DEVICES": value})
    assert got.targets == []
    assert any("matches no GPU" in w for w in got.warnings)


@pytest.mark.parametrize(
    "parse, text",
    [
        (parse_enumerator, "gfx90a\n" * 2000),
        (parse_rocminfo, "  Name: gfx90a\n" * 2000),
        (parse_rocminfo, "Agent 1\n  Name: gfx90a\n  Device Type: GPU\n" * 2000),
        (parse_rocm_smi, "{" + ",".join(f'"card{i}": {{"GFX Version": "gfx90a"}}' for i in range(2000)) + "}"),
    ],
)
def test_more_gpus_than_any_machine_has_is_not_believed(parse, text):
    got = parse(text)
    assert got.devices == [] and got.error == "tool_failed"
    assert "more than 1024" in got.summary and got.summary.endswith("output ignored")


# --------------------------------------------------------------------------- outputs as users paste them


def _grep_colour(text: str) -> str:
    """What ``rocminfo | grep --color=always -e Name -e gfx`` style colouring does to each match."""
    import re

    return re.sub(r"Name|gfx[0-9a-f]+", lambda m: f"\x1b[01;31m\x1b[K{m.group(0)}\x1b[m\x1b[K", text)


PASTES = {
    "newlines_to_spaces": lambda t: " ".join(t.splitlines()),
    "newlines_dropped": lambda t: "".join(t.splitlines()),
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "lone_cr": lambda t: t.replace("\n", "\r"),
    "tabs": lambda t: "\n".join(ln.replace("    ", "\t").replace(":  ", ":\t") for ln in t.splitlines()),
    "ansi": _grep_colour,
    "ansi_crlf_one_line": lambda t: " ".join(_grep_colour(t).splitlines()) + "\r\n",
}


def _pasted_cases():
    for name in sorted(KEY):
        want = KEY[name]
        if want["tool"] == "kfd-properties" or not want["gpus"] or want["tool"].startswith("rocm-smi"):
            continue
        for paste in PASTES:
            if want["tool"] != "rocminfo" and paste == "newlines_dropped":
                continue  # one target per line with nothing between: "gfx942gfx942" is not a paste users make
            if want["tool"] == "amd-smi static" and paste.startswith(("newlines", "ansi_crlf_one")):
                continue  # amd-smi's text is read line by line; its JSON survives any of these
            yield name, paste


@pytest.mark.parametrize("name, paste", list(_pasted_cases()))
def test_pasted_output_gives_the_same_targets(name, paste):
    want = KEY[name]
    probe = TOOL_PROBE[want["tool"]]
    text = PASTES[paste](fixture(name))
    result = PARSER[probe](text)
    assert summarize(result.devices) == want["gpus"]
    got = D.detect(recorded={probe: text}, env={}, run=no_run)
    assert sorted(map(str, got.targets)) == sorted(want["build_targets"])


# --------------------------------------------------------------------------- amd-smi


def test_amd_smi_static_text_gives_name_cus_and_device_id():
    (dev,) = parse_amd_smi(fixture("w7500_gfx1102.amd-smi-static-asic.txt")).devices
    assert (str(dev.target), dev.name, dev.compute_units, dev.device_id, dev.node) == (
        "gfx1102",
        "Navi 33 [Radeon Pro W7500]",
        28,
        "0x7489",
        2,
    )


def test_amd_smi_static_json_both_shapes_and_warning_lines():
    text = fixture("mi210_gfx90a.amd-smi-static.json")
    data = json.loads(text)
    # amd-smi 24.x printed the list itself; later versions wrap it in {"gpu_data": [...]}
    old_shape = json.dumps(data["gpu_data"], indent=4)
    # Python warnings amd-smi printed before its JSON, as a user pasted them (nathaninline/ajean#39)
    warned = (
        "/usr/lib/python3.14/site-packages/amdsmi/amdsmi_interface.py:3569: SyntaxWarning: "
        "'return' in a 'finally' block\n  return return_dictionary\n" + text
    )
    for variant in (text, old_shape, warned):
        (dev,) = parse_amd_smi(variant).devices
        assert (str(dev.target), dev.name, dev.compute_units, dev.device_id) == (
            "gfx90a",
            "AMD Instinct MI210",
            104,
            "0x740f",
        )


def test_amd_smi_list_names_gpus_but_no_targets():
    got = parse_amd_smi(fixture("mi210_plus_nic.amd-smi-list.txt"))
    assert got.devices == [] and got.error == "no_target_info"
    assert got.summary.startswith("lists 1 GPU but not their targets")
    detection = D.detect(recorded={"amd-smi": fixture("mi210_plus_nic.amd-smi-list.txt")}, env={}, run=no_run)
    with pytest.raises(NoGpuDetectedError) as info:
        D.require_targets(detection)
    assert "amd-smi static --asic" in info.value.hint


def test_amd_smi_unknown_target_is_skipped_with_a_warning():
    text = fixture("w7500_gfx1102.amd-smi-static-asic.txt").replace("gfx1102", "gfx1999")
    got = parse_amd_smi(text)
    assert got.devices == [] and "gfx1999" in got.warnings[0]


def test_nvidia_smi_on_path_is_not_run_without_an_nvidia_driver(tmp_path):
    # a machine with NVIDIA's tools installed but no NVIDIA driver (no /proc/driver/nvidia,
    # /dev/nvidiactl or /dev/dxg under root, no libnvidia-ml) spawns nothing for NVIDIA
    root = eight_gpus(tmp_path / "root")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "ran"
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ntouch {marker}\nexit 9\n")
    smi.chmod(0o755)
    code = SPAWNS + (
        "from rocm_build_backend.gpu.detect import detect\n"
        f"d = detect(root={str(root)!r}, env={{'PATH': {str(bin_dir)!r}}})\n"
        "print(d.source, [str(t) for t in d.targets], len(spawned))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["kfd", "['gfx942']", "0"]
    assert not marker.exists()
