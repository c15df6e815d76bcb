"""Enforcement without a compiler: the pinned nvcc's and the HIP launcher's decisions (tables), the
variables that lead a build to them, a build without a toolkit, and the record they keep. The
programs as written, run with the real nvcc, are in tests/integration/test_enforce_nvcc.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rocm_build_backend.builder.enforce import Enforced, install, read_record
from rocm_build_backend.errors import EnforcementError
from rocm_build_backend.gpu.amd import enforce as amd_enforce
from rocm_build_backend.gpu.nvidia import enforce as nv_enforce
from rocm_build_backend.gpu.nvidia.nvcc_line import Options, Unreadable, expand, read_targets, split_options
from rocm_build_backend.gpu.nvidia.pinned_nvcc import decide, json_line

SM90 = nv_enforce.config(["sm_90"], "none", "/x/nvcc")
SM90_PTX = nv_enforce.config(["sm_90"], "highest", "/x/nvcc")
SM80_90 = nv_enforce.config(["sm_80", "sm_90"], "none", "/x/nvcc")
K = ["-c", "k.cu", "-o", "k.o"]


@pytest.mark.parametrize(
    "argv, cfg, action, listed, now",
    [
        # causal-conv1d's shape: two words per entry, nine targets, --threads
        (
            K
            + [
                "-gencode",
                "arch=compute_80,code=sm_80",
                "-gencode",
                "arch=compute_90,code=sm_90",
                "-gencode",
                "arch=compute_120,code=sm_120",
                "--threads",
                "4",
            ],
            SM90,
            "rewritten",
            ["sm_120", "sm_80", "sm_90"],
            ["sm_90"],
        ),
        # torch's spelling, and CMake's bracket lists with PTX: the PTX goes with ptx = "none"
        (K + ["-gencode=arch=compute_90,code=sm_90"], SM90, "kept", ["sm_90"], ["sm_90"]),
        (
            K + ["--generate-code=arch=compute_90,code=[compute_90,sm_90]"],
            SM90,
            "rewritten",
            ["compute_90", "sm_90"],
            ["sm_90"],
        ),
        (
            K + ["--generate-code=arch=compute_90,code=[compute_90,sm_90]"],
            SM90_PTX,
            "kept",
            ["compute_90", "sm_90"],
            ["compute_90", "sm_90"],
        ),
        # ptx = "highest" adds the PTX to the kept SASS target
        (K + ["-gencode", "arch=compute_90,code=sm_90"], SM90_PTX, "rewritten", ["sm_90"], ["compute_90", "sm_90"]),
        # -arch=sm_XY is SASS and PTX; -arch X spelled apart; -arch=compute -code=list
        (K + ["-arch=sm_90"], SM90, "rewritten", ["compute_90", "sm_90"], ["sm_90"]),
        (K + ["-arch", "sm_86"], SM90, "whole", ["compute_86", "sm_86"], ["compute_86", "sm_86"]),
        (K + ["-arch=compute_80", "-code=sm_80,sm_90"], SM90, "rewritten", ["sm_80", "sm_90"], ["sm_90"]),
        (
            K + ["--gpu-architecture=compute_80", "--gpu-code=sm_80,sm_90"],
            SM80_90,
            "kept",
            ["sm_80", "sm_90"],
            ["sm_80", "sm_90"],
        ),
        # native, all, all-major stand for the targets
        (K + ["-arch=native"], SM90, "rewritten", ["native"], ["sm_90"]),
        (K + ["-arch=all-major"], SM80_90, "rewritten", ["all-major"], ["sm_80", "sm_90"]),
        # none of the targets listed: a file built for one architecture on purpose, left whole
        (K + ["-gencode", "arch=compute_90a,code=sm_90a"], SM90, "whole", ["sm_90a"], ["sm_90a"]),
        # no target at all: the targets (what NVCC_APPEND_FLAGS would give)
        (K, SM90, "added", [], ["sm_90"]),
        # -MD compiles (torch's ninja rule, CMake): decided like any compile
        (
            ["-MD", "-MF", "k.o.d"]
            + K
            + ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90"],
            SM90,
            "rewritten",
            ["sm_80", "sm_90"],
            ["sm_90"],
        ),
        # a device link with its own list
        (
            [
                "-dlink",
                "a.o",
                "b.o",
                "-o",
                "d.o",
                "-gencode=arch=compute_80,code=sm_80",
                "-gencode=arch=compute_90,code=sm_90",
            ],
            SM90,
            "rewritten",
            ["sm_80", "sm_90"],
            ["sm_90"],
        ),
    ],
)
def test_decisions(argv, cfg, action, listed, now):
    got, new, got_listed, got_now = decide(argv, cfg)
    assert (got, got_listed, got_now) == (action, listed, now)
    if action in ("kept", "whole"):
        assert new == argv
    else:
        assert new[:4] == K[:4] or new[0] in ("-MD", "-dlink")  # the rest of the line keeps its order


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["-V"],
        ["--list-gpu-code"],
        ["--help"],
        ["-E", "k.cu", "-gencode=arch=compute_80,code=sm_80"],  # preprocessing
        ["-M", "k.cu", "-gencode=arch=compute_80,code=sm_80"],  # dependencies only
        ["-c", "host.cpp", "-o", "host.o"],  # host-only compile
        ["a.o", "b.o", "-o", "lib.so", "-shared"],  # a link without targets
        ["-c", "k.cu", "-code=sm_90"],  # -code without -arch: nvcc rejects it
        ["-c", "k.cu", "-arch=sm_80", "-code=sm_80"],  # -arch=sm_XY with -code: nvcc rejects it
        ["-c", "k.cu", "-arch=sm_80", "-forward-unknown-to-host-compiler", "-E"],
        ["-c", "k.cu", "-gencode", "garbage"],
    ],
)
def test_untouched(argv):
    action, new, listed, now = decide(argv, SM90)
    assert action == "untouched" and new == argv and listed == now == []


@pytest.mark.parametrize(
    "argv, action, listed, now",
    [
        # as nvcc reads them: the last -arch wins (nvcc warns), -code values and -gencode entries add up
        (K + ["-arch=sm_80", "-arch=sm_90"], "rewritten", ["compute_90", "sm_90"], ["sm_90"]),
        (K + ["-arch=sm_90", "-arch=sm_80"], "whole", ["compute_80", "sm_80"], ["compute_80", "sm_80"]),
        (K + ["-arch=compute_80", "-code=sm_80", "-code=sm_90"], "rewritten", ["sm_80", "sm_90"], ["sm_90"]),
        (
            K + ["-arch=sm_80", "-gencode=arch=compute_90,code=sm_90"],
            "rewritten",
            ["compute_80", "sm_80", "sm_90"],
            ["sm_90"],
        ),
        # an option nvcc does not know that could carry a target or name an input: refused, named
        (K + ["-forward-unknown-to-host-compiler", "-foo=sm_80"], "refused", ["-foo=sm_80"], []),
        (K + ["--gpu-arch-list=90"], "refused", ["--gpu-arch-list=90"], []),
        (K + ["-include-cu=other.cu"], "refused", ["-include-cu=other.cu"], []),
        # other unknown options pass through; known ones with such words are nvcc's own
        (K + ["-forward-unknown-to-host-compiler", "-fPIC", "-march=native", "-Wall"], "added", [], ["sm_90"]),
        (
            K + ["-DARCH=sm_80", "-Xcompiler=-fPIC", "-I/x/sm_80", "-arch=sm_90"],
            "rewritten",
            ["compute_90", "sm_90"],
            ["sm_90"],
        ),
    ],
)
def test_nvcc_reading_of_repeated_and_unknown_options(argv, action, listed, now):
    got, new, got_listed, got_now = decide(argv, SM90)
    assert (got, got_listed, got_now) == (action, listed, now)


@pytest.mark.parametrize(
    "text, words",
    [
        ('-I"/a b/c" -DX=1\n\t-arch=sm_80', ["-I/a b/c", "-DX=1", "-arch=sm_80"]),
        ("-o m\\ m.o 'x'", ["-o", "m m.o", "'x'"]),  # a backslash keeps a blank; single quotes are plain
        ('"" -c', ["", "-c"]),
        ("", []),
    ],
)
def test_options_files_are_split_as_nvcc_splits_them(text, words):
    assert split_options(text) == words


def test_options_files_are_expanded_in_place_nested_and_listed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inc.rsp").write_text('-I"/p q"\n--options-file arch.rsp\n')
    (tmp_path / "arch.rsp").write_text("-gencode arch=compute_80,code=sm_80\n")
    (tmp_path / "more.rsp").write_text("-DX -gencode=arch=compute_90,code=sm_90\n")
    line, files = expand(["-c", "k.cu", "--options-file", "inc.rsp", "-o", "k.o", "-optf=more.rsp,arch.rsp"])
    assert line == [
        "-c",
        "k.cu",
        "-I/p q",
        "-gencode",
        "arch=compute_80,code=sm_80",
        "-o",
        "k.o",
        "-DX",
        "-gencode=arch=compute_90,code=sm_90",
        "-gencode",
        "arch=compute_80,code=sm_80",
    ]
    assert files == ["inc.rsp", "arch.rsp", "more.rsp", "arch.rsp"]
    action, new, listed, now = decide(line, SM90)
    assert (action, listed, now) == ("rewritten", ["sm_80", "sm_90"], ["sm_90"])
    assert "-optf=more.rsp,arch.rsp" not in new and "-I/p q" in new
    (tmp_path / "loop.rsp").write_text("-optf loop.rsp\n")
    for argv in (["-optf", "missing.rsp"], ["-optf", "loop.rsp"], ["--options-file"]):
        with pytest.raises(Unreadable):
            expand(argv)


def test_a_value_that_looks_like_an_input_is_no_input():
    """``-o k.cu`` names the output: the line holds no CUDA source."""
    options = Options(SM90["options"])
    assert read_targets(["-c", "x.cpp", "-o", "k.cu"], options)[3] is False
    assert read_targets(["-x", "cu", "-c", "x.cpp"], options)[3] is True


def test_the_rewritten_line_keeps_each_entrys_virtual_architecture():
    _, new, _, _ = decide(K + ["-gencode=arch=compute_80,code=[sm_80,sm_90]"], SM90)
    assert new == K + ["-gencode=arch=compute_80,code=sm_90"]


def test_json_line_is_json():
    line = {"tool": "nvcc", "sources": ['we"ird\\name\n.cu', "é.cu"], "action": "kept"}
    assert json.loads(json_line(line)) == line


def test_the_pinned_nvcc_is_written_as_one_file_that_runs_isolated(tmp_path):
    """``python -I -S`` cannot import the package: the program holds nvcc_line.py's text and
    imports nothing of ours, and it reads, decides and runs the real nvcc (here a stand-in that
    prints its arguments)."""
    real = tmp_path / "real-nvcc"
    real.write_text('#!/bin/sh\necho "$@"\n')
    real.chmod(0o755)
    program = tmp_path / "pinned_nvcc.py"
    program.write_text(nv_enforce.program_text(nv_enforce.config(["sm_90"], "none", str(real))))
    text = program.read_text()
    assert "import rocm_build_backend" not in text and "from rocm_build_backend" not in text
    (tmp_path / "k.optf").write_text("-gencode arch=compute_80,code=sm_80\n")
    proc = subprocess.run(
        [sys.executable, "-I", "-S", str(program), *K, "-optf", "k.optf", "-gencode=arch=compute_90,code=sm_90"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == K + ["-gencode=arch=compute_90,code=sm_90"]


def test_without_a_toolkit_install_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(nv_enforce, "DEFAULT_ROOT", str(tmp_path / "no-cuda"))
    env = {"XDG_CACHE_HOME": str(tmp_path / "c"), "PATH": str(tmp_path), "CUDA_HOME": str(tmp_path / "none")}
    with pytest.raises(EnforcementError, match="no CUDA toolkit") as exc:
        install("nvidia", ["sm_90"], env, tmp_path / "r")
    assert "enforce = false" in (exc.value.hint or "")


def test_pytorch_nvcc_with_a_launcher_keeps_it(tmp_path):
    got = nv_enforce.variables(tmp_path, {"PYTORCH_NVCC": "ccache /usr/local/cuda/bin/nvcc", "PATH": "/bin"})
    assert got["PYTORCH_NVCC"] == f"ccache {tmp_path}/cuda/bin/nvcc"
    got = nv_enforce.variables(tmp_path, {"CUDACXX": "/usr/bin/clang++", "PATH": "/bin"})
    assert "CUDACXX" not in got  # a CUDA compiler that is not nvcc stays the user's


def test_the_hip_launcher_chains_the_users_own(tmp_path):
    got = amd_enforce.variables(tmp_path, {"CMAKE_HIP_COMPILER_LAUNCHER": "ccache"})
    assert got == {"CMAKE_HIP_COMPILER_LAUNCHER": f"{tmp_path}/hip-launcher;ccache"}


def test_the_record_reader_is_bounded_and_skips_bad_lines(tmp_path):
    record = tmp_path / "r"
    record.write_bytes(
        b'{"action": "rewritten", "listed": ["sm_80", "native"], "now": []}\nnot json\n[1]\n'
        + b'{"action": "whole", "listed": ["sm_80"], "sources": ["a.cu"]}\n' * 20
    )
    done = read_record(record)
    assert done.compiles == 21 and done.dropped == {"sm_80"} and done.whole_count == 20 and len(done.whole) == 8
    stamp = done.to_stamp()
    assert stamp["left_whole"][0] == {"sources": ["a.cu"], "targets": ["sm_80"]}
    assert read_record(None).compiles == 0 and read_record(tmp_path / "missing").compiles == 0
    assert Enforced().lines(["gfx90a"], "hipcc is not counted") == [
        "enforce: no compile came through the pinned compilers (targets gfx90a); hipcc is not counted"
    ]
