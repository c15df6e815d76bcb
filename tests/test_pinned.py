"""Pinned detection tools: their output, and real builds that detect targets by themselves.

Unit tests run the written scripts and parse their output the way real consumers do
(DeepSpeed's grep, PyTorch's pipeline, CMake's filter, rocm_agent_enumerator's own rocminfo
regex). Integration tests build the projects in ``tests/projects/`` with ``pip wheel`` and read
the GPU targets of the device code in the wheel.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.builder.pinned import pinned_env, write_pinned_tools
from rocm_build_backend.gpu.amd.pinned import TOOL_NAMES, render_tools
from rocm_build_backend.builder.profiles import profile_for
from rocm_build_backend.gpu.targets import GpuTarget, join_targets, parse_targets

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

PROJECTS = Path(__file__).resolve().parent / "projects"


def run(tool: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(tool), *args], capture_output=True, text=True)


@pytest.fixture
def pinned(tmp_path):
    def make(spec: str) -> Path:
        directory = tmp_path / "pinned"
        write_pinned_tools(directory, parse_targets(spec))
        return directory

    return make


# --- the scripts themselves ------------------------------------------------------------------


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
        shell=True, env=env, capture_output=True, text=True,
    ).stdout
    assert torch_way == "gfx90a gfx942"
    # CMakeDetermineHIPCompiler: `-t GPU`, skip gfx000, cut at ':'
    cmake_way = [a.split(":")[0] for a in run(directory / "rocm_agent_enumerator", "-t", "GPU").stdout.split()
                 if a != "gfx000"]
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


# --- real builds (direct, with the project's own backend) --------------------------------------

# Variables that name GPU targets or steer hipcc/CMake; cleared so the outer environment cannot leak in.
TARGET_VARIABLES = (
    "PYTORCH_ROCM_ARCH", "GPU_TARGETS", "AMDGPU_TARGETS", "HCC_AMDGPU_TARGET",
    "HIPCC_COMPILE_FLAGS_APPEND", "HIP_PLATFORM", "CMAKE_ARGS", "HIPCC", "GPU_ARCHS",
    "HIP_ARCHITECTURES", "CMAKE_PROGRAM_PATH", "HIPCXX", "HIPFLAGS", "CMAKE_PREFIX_PATH",
)
HIPCC_TARGETS = "gfx90a;gfx940"  # what hipcc builds from HIP 5.2 on
CLANG_TARGETS = "gfx90a;gfx942;gfx1100"  # what clang-19 -nogpuinc -nogpulib builds


def use_real_backend(project: Path) -> None:
    """Point ``build-backend`` at the real backend named in ``[tool.rocm-build-backend]``.

    The only thing that makes these builds direct rather than through the shim.
    """
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    backend = tomllib.loads(text)["tool"]["rocm-build-backend"]["backend"]
    text, count = re.subn(r'(?m)^build-backend = "rocm_build_backend"$', f'build-backend = "{backend}"', text)
    assert count == 1, f"{project.name}: no build-backend line to rewrite"
    pyproject.write_text(text)


def copy_project(name: str, tmp_path: Path) -> Path:
    project = tmp_path / name
    shutil.copytree(PROJECTS / name, project, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info"))
    use_real_backend(project)
    return project


def generic_env(targets: list[GpuTarget]) -> dict[str, str]:
    """The knobs the plan sets for every build."""
    semi = join_targets(targets, ";")
    return {
        "HIP_PLATFORM": "amd",
        "PYTORCH_ROCM_ARCH": semi,
        "GPU_TARGETS": semi,
        "AMDGPU_TARGETS": semi,
        "HCC_AMDGPU_TARGET": join_targets(targets, ","),
        "HIPCC_COMPILE_FLAGS_APPEND": " ".join(f"--offload-arch={t}" for t in targets),
        "CMAKE_ARGS": f"-DCMAKE_HIP_ARCHITECTURES={semi} -DGPU_TARGETS={semi} -DAMDGPU_TARGETS={semi}",
        "MAX_JOBS": "2",
    }


def decoy_tools(directory: Path) -> Path:
    """Tools that answer like a machine with an iGPU (gfx1036) listed first, as the real ones would."""
    directory.mkdir(parents=True, exist_ok=True)
    scripts = {
        "rocminfo": "echo 'ROCk module is loaded'\necho '  Name:                    gfx1036'\n"
                    "echo '  Device Type:             GPU'\n",
        "rocm_agent_enumerator": "echo gfx000\necho gfx1036\n",
        "amdgpu-arch": "echo gfx1036\n",
        "offload-arch": "echo gfx1036\n",
    }
    for name, body in scripts.items():
        path = directory / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    return directory


def build_env(tmp_path: Path, targets: list[GpuTarget], extra: dict[str, str], *, pinned: bool = True) -> dict[str, str]:
    """os.environ without target knobs, the pinned tools first on PATH (before decoys), plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if k not in TARGET_VARIABLES and not k.startswith("ROCM_BUILD_BACKEND_")}
    env["PATH"] = f"{decoy_tools(tmp_path / 'decoys')}{os.pathsep}{env.get('PATH', os.defpath)}"
    if pinned:
        tools = tmp_path / "pinned"
        write_pinned_tools(tools, targets)
        env.update(pinned_env(tools, env))
    env.update(extra)
    return env


def pip_wheel(project: Path, env: dict[str, str]) -> Path:
    outdir = project.parent / f"{project.name}-dist"
    command = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
               "--no-cache-dir", "--disable-pip-version-check", "-v", "-w", str(outdir), str(project)]
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    wheels = sorted(outdir.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def device_targets(wheel: Path, workdir: Path) -> dict[str, set[str]]:
    """Member name -> GPU targets of its device code, for every shared library in the wheel."""
    try:
        from rocm_build_backend.binary.audit import audit_file
    except ImportError:
        audit_file = None
    found = {}
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            if not member.endswith(".so"):
                continue
            path = workdir / Path(member).name
            path.write_bytes(zf.read(member))
            if audit_file is not None:
                found[member] = {str(t) for t in audit_file(path).targets}
                continue
            fatbin = workdir / (path.name + ".hip_fatbin")
            subprocess.run(["llvm-objcopy-19", f"--dump-section=.hip_fatbin={fatbin}", str(path), os.devnull],
                           check=True, capture_output=True)
            listing = subprocess.run(["clang-offload-bundler-19", "--list", "--type=o", f"--input={fatbin}"],
                                     check=True, capture_output=True, text=True).stdout
            found[member] = {
                line.split("amdgcn-amd-amdhsa-", 1)[1].lstrip("-")
                for line in listing.split() if "amdgcn-amd-amdhsa-" in line
            }
    assert found, f"no shared library in {wheel.name}"
    return found


def built_for(project_name: str, tmp_path: Path, env: dict[str, str]) -> set[str]:
    project = copy_project(project_name, tmp_path)
    wheel = pip_wheel(project, env)
    per_file = device_targets(wheel, tmp_path)
    return set().union(*per_file.values())


@pytest.mark.integration
@pytest.mark.parametrize("with_generic_env", [False, True], ids=["pinned-only", "pinned+generic"])
def test_rocminfo_first_gfx_project(tmp_path, with_generic_env):
    targets = parse_targets(HIPCC_TARGETS)
    extra = generic_env(targets) if with_generic_env else {"HIP_PLATFORM": "amd"}
    got = built_for("rocminfo_first_gfx", tmp_path, build_env(tmp_path, targets, extra))
    if with_generic_env:
        # hipcc adds HIPCC_COMPILE_FLAGS_APPEND to the project's own --offload-arch
        assert got == {"gfx90a", "gfx940"}
    else:
        # the project takes only the first gfx rocminfo prints: the first chosen target, not the decoy iGPU
        assert got == {"gfx90a"}


@pytest.mark.integration
@pytest.mark.parametrize("with_generic_env", [False, True], ids=["pinned-only", "pinned+generic"])
def test_enumerator_skip_gfx000_project(tmp_path, with_generic_env):
    targets = parse_targets(HIPCC_TARGETS)
    extra = generic_env(targets) if with_generic_env else {"HIP_PLATFORM": "amd"}
    got = built_for("enumerator_skip_gfx000", tmp_path, build_env(tmp_path, targets, extra))
    assert got == {"gfx90a", "gfx940"}


@pytest.mark.integration
@pytest.mark.parametrize("with_generic_env", [False, True], ids=["profile-only", "profile+generic"])
def test_env_gpu_archs_project(tmp_path, with_generic_env):
    targets = parse_targets(HIPCC_TARGETS)
    profile = profile_for("flash_attn")
    extra = {"HIP_PLATFORM": "amd", **profile.env(targets)}
    if with_generic_env:
        extra = {**generic_env(targets), **profile.env(targets)}
    got = built_for("env_gpu_archs", tmp_path, build_env(tmp_path, targets, extra))
    assert got == {"gfx90a", "gfx940"}


@pytest.mark.integration
@pytest.mark.parametrize("with_generic_env", [False, True], ids=["profile-only", "profile+generic"])
def test_env_hip_architectures_project(tmp_path, with_generic_env):
    targets = parse_targets(HIPCC_TARGETS)
    profile = profile_for("xformers")
    extra = {"HIP_PLATFORM": "amd", **profile.env(targets)}
    if with_generic_env:
        extra = {**generic_env(targets), **profile.env(targets)}
    got = built_for("env_hip_architectures", tmp_path, build_env(tmp_path, targets, extra))
    assert got == {"gfx90a", "gfx940"}


def _hip_lang_dir() -> Path | None:
    """Where the HIP runtime's CMake package (hip-lang-config.cmake) is installed."""
    roots = [os.environ.get("ROCM_PATH"), "/opt/rocm", "/usr"]
    for root in filter(None, roots):
        candidate = Path(root) / "lib" / "cmake" / "hip-lang"
        if (candidate / "hip-lang-config.cmake").is_file():
            return candidate
    for candidate in sorted(Path("/usr/lib").glob("*/cmake/hip-lang")):  # Debian's multiarch layout
        if (candidate / "hip-lang-config.cmake").is_file():
            return candidate
    return None


def cmake_hip_env(tmp_path: Path) -> dict[str, str]:
    """Make enable_language(HIP) work with clang-19 and no GPU libraries, on any HIP layout.

    CMake wants ``<ROCm root>/lib/cmake/hip-lang``; a distribution that puts it under
    ``lib/<multiarch>/`` gets a stand-in root whose ``lib/cmake/hip-lang`` links there. The
    stand-in root's ``bin`` holds a decoy rocm_agent_enumerator (an iGPU), which CMake's
    find_program HINTS would prefer to PATH: only CMAKE_PROGRAM_PATH puts the pinned one first.
    """
    hip_lang = _hip_lang_dir()
    assert hip_lang is not None, "no hip-lang CMake package found (install the HIP development files)"
    root = tmp_path / "rocm-root"
    (root / "lib" / "cmake").mkdir(parents=True)
    (root / "lib" / "cmake" / "hip-lang").symlink_to(hip_lang)
    decoy_tools(root / "bin")
    return {
        "HIPCXX": shutil.which("clang++-19") or "clang++-19",
        "HIPFLAGS": "-nogpuinc -nogpulib -DKERNELS_WITHOUT_HIP_HEADERS",
        "CMAKE_PREFIX_PATH": str(hip_lang.parent),
        "SKBUILD_CMAKE_DEFINE": f"CMAKE_HIP_COMPILER_ROCM_ROOT={root}",
    }


@pytest.mark.integration
@pytest.mark.parametrize("with_generic_env", [False, True], ids=["pinned-only", "pinned+generic"])
def test_cmake_hip_default_project(tmp_path, with_generic_env):
    targets = parse_targets(CLANG_TARGETS)
    extra = cmake_hip_env(tmp_path)
    if with_generic_env:
        extra.update(generic_env(targets))
    got = built_for("cmake_hip_default", tmp_path, build_env(tmp_path, targets, extra))
    assert got == {"gfx90a", "gfx942", "gfx1100"}


@pytest.mark.integration
def test_cmake_default_without_program_path_takes_the_rocm_root_tool(tmp_path):
    """Control: with the pinned tools only on PATH, CMake asks the ROCm root's enumerator first."""
    targets = parse_targets(CLANG_TARGETS)
    env = build_env(tmp_path, targets, cmake_hip_env(tmp_path))
    env.pop("CMAKE_PROGRAM_PATH")
    got = built_for("cmake_hip_default", tmp_path, env)
    assert got == {"gfx1036"}


@pytest.mark.integration
def test_bitsandbytes_style_cmake_defines_reach_cmake(tmp_path):
    """Profile CMake defines travel in CMAKE_ARGS; CMAKE_HIP_ARCHITECTURES from the generic knobs wins."""
    targets = parse_targets("gfx942")
    profile = profile_for("bitsandbytes")
    extra = cmake_hip_env(tmp_path)
    generic = generic_env(targets)
    generic["CMAKE_ARGS"] += " " + " ".join(profile.cmake_args(targets))
    extra.update(generic)
    # pinned tools report something else, so only CMAKE_ARGS can give gfx942
    env = build_env(tmp_path, parse_targets("gfx1100"), extra)
    assert built_for("cmake_hip_default", tmp_path, env) == {"gfx942"}
