"""Pinned detection tools: the written scripts run, and their output parsed the way real
consumers do (DeepSpeed's grep, PyTorch's pipeline, CMake's filter, rocm_agent_enumerator's own
rocminfo regex). Real builds that detect targets by themselves: tests/integration/test_pinned_projects.py.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from rocm_build_backend.builder.pinned import pinned_env, write_pinned_tools
from rocm_build_backend.gpu.amd.pinned import TOOL_NAMES, render_tools
from rocm_build_backend.gpu.targets import GpuTarget, parse_targets


def run(tool: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(tool), *args], capture_output=True, text=True)


@pytest.fixture
def pinned(tmp_path):
    def make(spec: str) -> Path:
        directory = tmp_path / "pinned"
        write_pinned_tools(directory, parse_targets(spec))
        return directory

    return make


def test_writes_four_executable_sh_scripts(tmp_path):
    paths = write_pinned_tools(tmp_path / "bin", parse_targets("gfx942"))
    assert [p.name for p in paths] == list(TOOL_NAMES)
    for path in paths:
        assert path.read_text().startswith("#!/bin/sh\n")
        assert os.access(path, os.X_OK)
    assert sorted(p.name for p in (tmp_path / "bin").iterdir()) == sorted(TOOL_NAMES)


def test_rewriting_replaces_the_old_answer(pinned):
    pinned("gfx90a")
    directory = pinned("gfx942")
    assert run(directory / "amdgpu-arch").stdout == "gfx942\n"


def test_rocminfo_lists_a_cpu_agent_then_one_gpu_agent_per_target(pinned):
    out = run(pinned("gfx90a:sramecc+:xnack-;gfx942;gfx1100") / "rocminfo")
    assert out.returncode == 0
    text = out.stdout
    assert text.startswith("ROCk module is loaded\n")
    assert text.rstrip().endswith("*** Done ***")
    agents = re.split(r"\*{7}\nAgent \d+\n\*{7}\n", text)[1:]
    assert len(agents) == 4
    assert re.search(r"^  Device Type:\s+CPU$", agents[0], re.M)
    assert "gfx" not in agents[0]
    names = [re.search(r"^  Name:\s+(\S+)$", a, re.M).group(1) for a in agents[1:]]
    assert names == ["gfx90a", "gfx942", "gfx1100"]
    for agent in agents[1:]:
        assert re.search(r"^  Device Type:\s+GPU$", agent, re.M)
        assert re.search(r"^  Marketing Name:\s+\S", agent, re.M)
    isas = re.findall(r"^      Name:\s+amdgcn-amd-amdhsa--(\S+)$", text, re.M)
    assert isas == ["gfx90a:sramecc+:xnack-", "gfx942", "gfx1100"]
    assert not re.search(r"[ \t]$", text, re.M), "no padded values: grep 'gfx.*' must end at the name"


def test_rocminfo_first_gfx_the_deepspeed_way(pinned):
    """op_builder/builder.py: ``rocminfo | grep -o -m 1 'gfx.*'`` and the wavefront-size grep."""
    directory = pinned("gfx1100;gfx90a")  # sorted: gfx90a comes first
    env = {**os.environ, "PATH": f"{directory}{os.pathsep}{os.environ['PATH']}"}

    def sh(cmd):
        return subprocess.run(cmd, shell=True, env=env, capture_output=True, text=True).stdout

    assert sh("rocminfo | grep -o -m 1 'gfx.*'") == "gfx90a\n"
    assert sh("rocminfo | grep -Eo -m1 'Wavefront Size:[[:space:]]+[0-9]+' | grep -Eo '[0-9]+'") == "64\n"
    only_rdna = pinned("gfx1100")
    env["PATH"] = f"{only_rdna}{os.pathsep}{os.environ['PATH']}"
    assert sh("rocminfo | grep -Eo -m1 'Wavefront Size:[[:space:]]+[0-9]+' | grep -Eo '[0-9]+'") == "32\n"


def test_rocminfo_parsed_like_rocm_agent_enumerator_and_bitsandbytes(pinned):
    text = run(pinned("gfx90a:xnack-;gfx942") / "rocminfo").stdout
    # rocm_agent_enumerator's readFromROCMINFO: "\A\s+Name:\s+(gfx\d+)" per line
    agent_lines = [line for line in text.splitlines() if re.match(r"\A\s+Name:\s+(gfx\d+)", line)]
    assert [line.split()[-1] for line in agent_lines] == ["gfx90a", "gfx942"]
    # bitsandbytes cuda_specs.get_rocm_gpu_arch: first r"Name:\s+gfx([a-zA-Z\d]+)"
    assert re.search(r"Name:\s+gfx([a-zA-Z\d]+)", text).group(1) == "90a"


def test_rocm_agent_enumerator_forms(pinned):
    tool = pinned("gfx90a:sramecc+:xnack-;gfx942;gfx942:xnack+") / "rocm_agent_enumerator"
    plain = run(tool)
    assert plain.returncode == 0
    assert plain.stdout.splitlines() == ["gfx90a", "gfx942", "gfx942"]  # one line per device
    assert "gfx000" not in plain.stdout
    assert run(tool, "-t", "GPU").stdout == plain.stdout
    assert run(tool, "-name").stdout.splitlines() == ["gfx90a:sramecc+:xnack-", "gfx942", "gfx942:xnack+"]
    assert run(tool, "-t", "CPU").stdout == ""


def test_rocm_agent_enumerator_as_pytorch_and_cmake_read_it(pinned):
    directory = pinned("gfx942;gfx90a:xnack-")
    env = {**os.environ, "PATH": f"{directory}{os.pathsep}{os.environ['PATH']}"}
    torch_way = subprocess.run(
        "rocm_agent_enumerator | grep -v gfx000 | sort -u | xargs | tr -d '\\n'",
        shell=True,
        env=env,
        capture_output=True,
        text=True,
    ).stdout
    assert torch_way == "gfx90a gfx942"
    # CMakeDetermineHIPCompiler: `-t GPU`, skip gfx000, cut at ':'
    cmake_way = [
        a.split(":")[0] for a in run(directory / "rocm_agent_enumerator", "-t", "GPU").stdout.split() if a != "gfx000"
    ]
    assert cmake_way == ["gfx90a", "gfx942"]


def test_amdgpu_arch_and_offload_arch(pinned):
    directory = pinned("gfx90a:xnack-;gfx1100;sm_90")
    amd = run(directory / "amdgpu-arch")
    assert (amd.returncode, amd.stdout) == (0, "gfx90a\ngfx1100\n")
    assert run(directory / "amdgpu-arch", "--only=nvptx").stdout == "gfx90a\ngfx1100\n"
    both = run(directory / "offload-arch")
    assert (both.returncode, both.stdout) == (0, "gfx90a\ngfx1100\nsm_90\n")
    assert run(directory / "offload-arch", "-v").stdout == both.stdout
    assert run(directory / "offload-arch", "--verbose").stdout == both.stdout
    assert run(directory / "offload-arch", "--only=amdgpu").stdout == "gfx90a\ngfx1100\n"
    assert run(directory / "offload-arch", "--only", "nvptx").stdout == "sm_90\n"
    intel = run(directory / "offload-arch", "--only=intel")
    assert (intel.returncode, intel.stdout) == (1, "")
    assert run(directory / "offload-arch", "--help").stdout.startswith("OVERVIEW:")
    assert run(directory / "offload-arch", "--version").returncode == 0
    bad = run(directory / "amdgpu-arch", "--bogus")
    assert bad.returncode == 1 and "Unknown command line argument" in bad.stderr
    assert run(directory / "offload-arch", "--only=amd").returncode == 1


def test_no_amd_target_answers_like_a_machine_without_an_amd_gpu(pinned):
    directory = pinned("sm_90")
    info = run(directory / "rocminfo")
    assert info.returncode == 1 and "ROCk module is NOT loaded" in info.stdout
    assert "gfx" not in info.stdout
    enum = run(directory / "rocm_agent_enumerator")
    assert (enum.returncode, enum.stdout) == (0, "")
    arch = run(directory / "amdgpu-arch")
    assert (arch.returncode, arch.stdout) == (1, "")
    assert run(directory / "offload-arch").stdout == "sm_90\n"


def test_generic_targets_are_reported_as_given(pinned):
    directory = pinned("gfx11-generic")
    assert run(directory / "amdgpu-arch").stdout == "gfx11-generic\n"
    assert "Wavefront Size:          32(0x20)" in run(directory / "rocminfo").stdout


def test_unprintable_target_is_refused():
    with pytest.raises(ValueError):
        render_tools([GpuTarget("gfx90a'; rm -rf /")])


def test_pinned_env_puts_the_directory_first(tmp_path):
    env = pinned_env(tmp_path, {"PATH": "/usr/bin", "CMAKE_PROGRAM_PATH": "/opt/x"})
    assert env["PATH"] == f"{tmp_path}{os.pathsep}/usr/bin"
    assert env["CMAKE_PROGRAM_PATH"] == f"{tmp_path}{os.pathsep}/opt/x"
    assert pinned_env(tmp_path, {"PATH": "/usr/bin"})["CMAKE_PROGRAM_PATH"] == str(tmp_path)
