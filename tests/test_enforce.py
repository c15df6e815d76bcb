"""Enforcement: the pinned nvcc's and the HIP launcher's decisions (tables), the programs as written
(run with the real nvcc and read back with the audit), their folder, and the record they keep."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from rocm_build_backend.builder.enforce import Enforced, cache_dir, install, read_record
from rocm_build_backend.gpu.amd import hip_launcher
from rocm_build_backend.gpu.nvidia import enforce as nv_enforce
from rocm_build_backend.gpu.nvidia.pinned_nvcc import decide, json_line, read_targets

SM90 = nv_enforce.config(["sm_90"], "none", "/x/nvcc")
SM90_PTX = nv_enforce.config(["sm_90"], "highest", "/x/nvcc")
SM80_90 = nv_enforce.config(["sm_80", "sm_90"], "none", "/x/nvcc")
NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
has_nvcc = pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="needs nvcc")
K = ["-c", "k.cu", "-o", "k.o"]


@pytest.mark.parametrize("argv, cfg, action, listed, now", [
    # causal-conv1d's shape: two words per entry, nine targets, --threads
    (K + ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90",
          "-gencode", "arch=compute_120,code=sm_120", "--threads", "4"], SM90, "rewritten",
     ["sm_120", "sm_80", "sm_90"], ["sm_90"]),
    # torch's spelling, and CMake's bracket lists with PTX: the PTX goes with ptx = "none"
    (K + ["-gencode=arch=compute_90,code=sm_90"], SM90, "kept", ["sm_90"], ["sm_90"]),
    (K + ["--generate-code=arch=compute_90,code=[compute_90,sm_90]"], SM90, "rewritten",
     ["compute_90", "sm_90"], ["sm_90"]),
    (K + ["--generate-code=arch=compute_90,code=[compute_90,sm_90]"], SM90_PTX, "kept",
     ["compute_90", "sm_90"], ["compute_90", "sm_90"]),
    # ptx = "highest" adds the PTX to the kept SASS target
    (K + ["-gencode", "arch=compute_90,code=sm_90"], SM90_PTX, "rewritten", ["sm_90"], ["compute_90", "sm_90"]),
    # -arch=sm_XY is SASS and PTX; -arch X spelled apart; -arch=compute -code=list
    (K + ["-arch=sm_90"], SM90, "rewritten", ["compute_90", "sm_90"], ["sm_90"]),
    (K + ["-arch", "sm_86"], SM90, "whole", ["compute_86", "sm_86"], ["compute_86", "sm_86"]),
    (K + ["-arch=compute_80", "-code=sm_80,sm_90"], SM90, "rewritten", ["sm_80", "sm_90"], ["sm_90"]),
    (K + ["--gpu-architecture=compute_80", "--gpu-code=sm_80,sm_90"], SM80_90, "kept",
     ["sm_80", "sm_90"], ["sm_80", "sm_90"]),
    # native, all, all-major stand for the targets
    (K + ["-arch=native"], SM90, "rewritten", ["native"], ["sm_90"]),
    (K + ["-arch=all-major"], SM80_90, "rewritten", ["all-major"], ["sm_80", "sm_90"]),
    # none of the targets listed: a file built for one architecture on purpose, left whole
    (K + ["-gencode", "arch=compute_90a,code=sm_90a"], SM90, "whole", ["sm_90a"], ["sm_90a"]),
    # no target at all: the targets (what NVCC_APPEND_FLAGS would give)
    (K, SM90, "added", [], ["sm_90"]),
    # -MD compiles (torch's ninja rule, CMake): decided like any compile
    (["-MD", "-MF", "k.o.d"] + K + ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90"],
     SM90, "rewritten", ["sm_80", "sm_90"], ["sm_90"]),
    # a device link with its own list
    (["-dlink", "a.o", "b.o", "-o", "d.o", "-gencode=arch=compute_80,code=sm_80",
      "-gencode=arch=compute_90,code=sm_90"], SM90, "rewritten", ["sm_80", "sm_90"], ["sm_90"]),
])
def test_decisions(argv, cfg, action, listed, now):
    got, new, got_listed, got_now = decide(argv, cfg)
    assert (got, got_listed, got_now) == (action, listed, now)
    if action in ("kept", "whole"):
        assert new == argv
    else:
        assert new[:4] == K[:4] or new[0] in ("-MD", "-dlink")  # the rest of the line keeps its order


@pytest.mark.parametrize("argv", [
    ["--version"], ["-V"], ["--list-gpu-code"], ["--help"],
    ["-E", "k.cu", "-gencode=arch=compute_80,code=sm_80"],  # preprocessing
    ["-M", "k.cu", "-gencode=arch=compute_80,code=sm_80"],  # dependencies only
    ["-c", "host.cpp", "-o", "host.o"],  # host-only compile
    ["a.o", "b.o", "-o", "lib.so", "-shared"],  # a link without targets
    ["-c", "k.cu", "-arch=sm_80", "-arch=sm_90"],  # two -arch: not ours to guess
    ["-c", "k.cu", "-code=sm_90"],  # -code without -arch
    ["-c", "k.cu", "--options-file", "flags.txt"],  # the targets may be in the file
    ["-c", "k.cu", "-gencode", "garbage"],
])
def test_untouched(argv):
    action, new, listed, now = decide(argv, SM90)
    assert action == "untouched" and new == argv and listed == now == []


def test_a_value_that_looks_like_an_input_is_no_input():
    """``-o k.cu`` names the output: the line holds no CUDA source."""
    assert read_targets(["-c", "x.cpp", "-o", "k.cu"])[3] is False
    assert read_targets(["-x", "cu", "-c", "x.cpp"])[3] is True


def test_the_rewritten_line_keeps_each_entrys_virtual_architecture():
    _, new, _, _ = decide(K + ["-gencode=arch=compute_80,code=[sm_80,sm_90]"], SM90)
    assert new == K + ["-gencode=arch=compute_80,code=sm_90"]


def test_json_line_is_json():
    line = {"tool": "nvcc", "sources": ['we"ird\\name\n.cu', "é.cu"], "action": "kept"}
    assert json.loads(json_line(line)) == line


@pytest.mark.parametrize("argv, action, listed", [
    (["clang++", "-x", "hip", "-c", "k.hip", "-o", "k.o", "--offload-arch=gfx906", "--offload-arch=gfx908"],
     "rewritten", ["gfx906", "gfx908"]),
    (["clang++", "-c", "k.hip", "--offload-arch=gfx90a"], "kept", ["gfx90a"]),
    (["clang++", "-c", "k.hip"], "added", []),
    (["clang++", "-c", "k.hip", "--offload-arch=gfx908", "--no-offload-arch=gfx908"], "added", []),
    (["clang++", "-E", "k.hip", "--offload-arch=gfx908"], "untouched", []),
    (["clang++", "k.o", "-o", "lib.so", "-shared"], "untouched", []),
])
def test_hip_launcher_decisions(argv, action, listed):
    flags = ["--no-offload-arch=all", "--offload-arch=gfx90a"]
    got, command, got_listed = hip_launcher.decide(argv, flags)
    assert (got, got_listed) == (action, listed)
    assert command == (argv if action == "untouched" else argv + flags)


# --- the programs as written, with the real nvcc ------------------------------------------------

@pytest.fixture
def pinned(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for var in ("CUDA_HOME", "CUDA_PATH", "PYTORCH_NVCC", "CUDACXX", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS"):
        env.pop(var, None)
    record = tmp_path / "record.jsonl"
    variables = install("nvidia", ["sm_90"], env, record)
    return {**env, **variables}, record


def _audit(path: Path) -> list[str]:
    from rocm_build_backend.binary.audit import audit_paths

    return sorted({t for f in audit_paths([path]).files for t in f.targets})


@has_nvcc
def test_every_path_to_nvcc_leads_to_the_pinned_one(pinned):
    env, _ = pinned
    view = Path(env["CUDA_HOME"])
    ours = str(view / "bin" / "nvcc")
    assert env["PYTORCH_NVCC"] == env["CUDACXX"] == ours and env["CUDA_PATH"] == env["CUDA_HOME"]
    assert shutil.which("nvcc", path=env["PATH"]) == ours
    # headers and libraries resolve through the view to the real toolkit
    assert (view / "include" / "cuda_runtime.h").is_file()
    assert (view / "bin" / "ptxas").exists() and any((view / d).exists() for d in ("lib64", "lib"))


@has_nvcc
def test_the_pinned_nvcc_cuts_compiles_and_records_them(pinned, tmp_path):
    env, record = pinned
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n")
    env["NVCC_APPEND_FLAGS"] = "-gencode=arch=compute_90,code=sm_90"  # the plan's copy: must not undo "whole"
    runs = {
        "cut": ["-gencode", "arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90",
                "-gencode=arch=compute_120,code=sm_120"],
        "whole": ["-gencode", "arch=compute_80,code=sm_80"],
        "none": [],
    }
    for name, flags in runs.items():
        out = tmp_path / f"{name}.o"
        subprocess.run([env["CUDACXX"], "-c", str(src), "-o", str(out), *flags], env=env, check=True,
                       capture_output=True)
    assert _audit(tmp_path / "cut.o") == ["sm_90"]
    assert _audit(tmp_path / "whole.o") == ["sm_80"]
    assert _audit(tmp_path / "none.o") == ["sm_90"]
    version = subprocess.run([env["CUDACXX"], "--version"], env=env, capture_output=True, text=True, check=True)
    assert "release" in version.stdout
    done = read_record(record)
    assert (done.compiles, done.rewritten, done.added, done.whole_count) == (3, 1, 1, 1)
    assert done.dropped == {"sm_80", "sm_120"} and done.whole == [(["k.cu"], ["sm_80"])]
    assert any("left whole" in line and "k.cu for sm_80" in line for line in done.lines(["sm_90"]))


@has_nvcc
def test_a_view_of_ours_stands_for_its_toolkit(pinned):
    env, _ = pinned
    root = nv_enforce.toolkit_root({"CUDA_HOME": env["CUDA_HOME"], "PATH": os.defpath})
    assert root is not None and "rocm-build-backend" not in str(root)


@has_nvcc
def test_the_folder_is_written_once_and_old_ones_go(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("CUDA_HOME", None)
    base = cache_dir(env)
    first = install("nvidia", ["sm_90"], env, tmp_path / "r")
    again = install("nvidia", ["sm_90"], env, tmp_path / "r")
    assert first["CUDACXX"] == again["CUDACXX"]
    other = install("nvidia", ["sm_80"], env, tmp_path / "r")
    assert other["CUDACXX"] != first["CUDACXX"]
    stale = base / ".tmp-killed"  # a write killed two days ago
    stale.mkdir()
    old = time.time() - 2 * 86400
    os.utime(stale, (old, old))
    unused = Path(other["CUDA_HOME"]).parent
    os.utime(unused, (time.time() - 31 * 86400,) * 2)
    install("nvidia", ["sm_90"], env, tmp_path / "r")
    assert not stale.exists() and not unused.exists() and Path(first["CUDA_HOME"]).is_dir()


def test_without_a_toolkit_install_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(nv_enforce, "DEFAULT_ROOT", str(tmp_path / "no-cuda"))
    env = {"XDG_CACHE_HOME": str(tmp_path / "c"), "PATH": str(tmp_path), "CUDA_HOME": str(tmp_path / "none")}
    with pytest.raises(FileNotFoundError, match="no CUDA toolkit"):
        install("nvidia", ["sm_90"], env, tmp_path / "r")


def test_pytorch_nvcc_with_a_launcher_keeps_it(tmp_path):
    got = nv_enforce.variables(tmp_path, {"PYTORCH_NVCC": "ccache /usr/local/cuda/bin/nvcc", "PATH": "/bin"})
    assert got["PYTORCH_NVCC"] == f"ccache {tmp_path}/cuda/bin/nvcc"
    got = nv_enforce.variables(tmp_path, {"CUDACXX": "/usr/bin/clang++", "PATH": "/bin"})
    assert "CUDACXX" not in got  # a CUDA compiler that is not nvcc stays the user's


def test_the_hip_launcher_chains_the_users_own(tmp_path):
    from rocm_build_backend.gpu.amd import enforce as amd_enforce

    got = amd_enforce.variables(tmp_path, {"CMAKE_HIP_COMPILER_LAUNCHER": "ccache"})
    assert got == {"CMAKE_HIP_COMPILER_LAUNCHER": f"{tmp_path}/hip-launcher;ccache"}


def test_the_record_reader_is_bounded_and_skips_bad_lines(tmp_path):
    record = tmp_path / "r"
    record.write_bytes(b'{"action": "rewritten", "listed": ["sm_80", "native"], "now": []}\nnot json\n[1]\n'
                       + b'{"action": "whole", "listed": ["sm_80"], "sources": ["a.cu"]}\n' * 20)
    done = read_record(record)
    assert done.compiles == 21 and done.dropped == {"sm_80"} and done.whole_count == 20 and len(done.whole) == 8
    stamp = done.to_stamp()
    assert stamp["left_whole"][0] == {"sources": ["a.cu"], "targets": ["sm_80"]}
    assert read_record(None).compiles == 0 and read_record(tmp_path / "missing").compiles == 0
    assert Enforced().lines(["gfx90a"], "hipcc is not counted") == [
        "enforce: no compile came through the pinned compilers (targets gfx90a); hipcc is not counted"]
