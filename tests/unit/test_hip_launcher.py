"""The pinned HIP compiler's decisions (tables), its reading of response files (checked against
clang-19's own reading where it is installed), the options it refuses, the program as written run
in front of a real clang, and the view of hipcc's clang folder that leads hipcc to it. Builds
through the shim are in tests/integration/test_enforce_hip.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_build_backend.builder.enforce import Enforced
from rocm_build_backend.builder.enforcedir import write
from rocm_build_backend.gpu.amd import enforce as amd_enforce
from rocm_build_backend.gpu.amd import hip_launcher
from rocm_build_backend.gpu.amd.hip_launcher import Refused, decide, expand, quote, tokenize

FLAGS = ["--no-offload-arch=all", "--offload-arch=gfx90a"]
CLANG = shutil.which("clang-19")
K = ["-c", "k.hip", "-o", "k.o"]


@pytest.mark.parametrize(
    "argv, action, listed, step",
    [
        (
            ["clang++", "-x", "hip", *K, "--offload-arch=gfx906", "--offload-arch=gfx908"],
            "rewritten",
            ["gfx906", "gfx908"],
            "compile",
        ),
        (["clang++", *K, "--offload-arch=gfx90a"], "kept", ["gfx90a"], "compile"),
        (["clang++", *K], "added", [], "compile"),
        (["clang++", *K, "--offload-arch=gfx908", "--no-offload-arch=gfx908"], "added", [], "compile"),
        (["clang++", *K, "--offload-arch=native"], "rewritten", ["native"], "compile"),
        (["clang++", *K, "--offload-arch", "native"], "rewritten", ["native"], "compile"),
        (["clang++", *K, "--cuda-gpu-arch=gfx908,gfx906"], "rewritten", ["gfx908", "gfx906"], "compile"),
        (["clang++", *K, "--amdgpu-target=gfx908"], "rewritten", ["gfx908"], "compile"),
        (
            ["clang++", *K, "--offload-arch=gfx908", "--no-cuda-gpu-arch=all", "--offload-arch=gfx90a"],
            "kept",
            ["gfx90a"],
            "compile",
        ),
        # compiled and linked in one run (no -c): a compile
        (["clang++", "--offload-arch=native", "-shared", "k.hip", "-o", "k.so"], "rewritten", ["native"], "compile"),
        # hipcc's compile: the project's list, then HIPCC_COMPILE_FLAGS_APPEND (the build's own copy)
        (
            ["clang++-15", "--offload-arch=gfx908", *FLAGS, "-O3", "-c", "-x", "hip", "k.cpp", "-o", "k.o"],
            "rewritten",
            ["gfx908"],
            "compile",
        ),
        (["clang++-15", *FLAGS, "-c", "-x", "hip", "k.cpp"], "added", [], "compile"),
        # -fgpu-rdc link steps: the device code is made here
        (
            ["clang++", "-fgpu-rdc", "--hip-link", "--offload-arch=gfx908", "k.o", "-shared", "-o", "k.so"],
            "rewritten",
            ["gfx908"],
            "link",
        ),
        (["clang++", "-fgpu-rdc", "--offload-arch=native", "a.o", "b.o", "-o", "app"], "rewritten", ["native"], "link"),
        (["clang++", "-fgpu-rdc", "k.o", "-shared", "-o", "k.so"], "added", [], "link"),
        # runs as given: a link without -fgpu-rdc, -fno-gpu-rdc last, preprocessing, a C file, a query
        (["clang++", "k.o", "-o", "lib.so", "-shared", "--offload-arch=gfx908"], "untouched", [], "link"),
        (
            ["clang++", "-fgpu-rdc", "-fno-gpu-rdc", "--offload-arch=gfx908", "k.o", "-o", "k.so"],
            "untouched",
            [],
            "link",
        ),
        (["clang++", "-E", "k.hip"], "untouched", [], "compile"),
        (["clang", "-x", "c", "-c", "a.c"], "untouched", [], "compile"),
        (["clang++-15", "--version"], "untouched", [], "link"),
        # a value that looks like a target option is a value
        (["clang++", *K, "-Xlinker", "--offload-arch=gfx908"], "added", [], "compile"),
    ],
)
def test_decisions(argv, action, listed, step):
    got, command, got_listed, got_step = decide(argv, FLAGS)
    assert (got, got_listed, got_step) == (action, listed, step)
    if action == "untouched":
        assert command == argv
    else:
        assert command[-1] == "--offload-arch=gfx90a"
        rest = command[:-1]
        named = [w for w in rest if "offload-arch" in w or "gpu-arch" in w or "amdgpu-target" in w]
        assert named == (["--offload-arch=gfx908"] if "-Xlinker" in argv else [])
        assert all("arch" in w or "target" in w or w == "native" for w in argv if w not in rest)


def test_preprocessing_that_names_native_is_rewritten_and_not_counted():
    action, command, _, _ = decide(["clang++", "-E", "k.hip", "--offload-arch=native"], FLAGS)
    assert action == "untouched" and command == ["clang++", "-E", "k.hip", "--offload-arch=gfx90a"]


@pytest.mark.parametrize(
    "argv, named",
    [
        (["-Xarch_device", "-mcpu=gfx908"], "-Xarch_device -mcpu=gfx908"),
        (["-Xarch_amdgcn", "-march=gfx908"], "-Xarch_amdgcn -march=gfx908"),
        (["-Xclang", "-target-cpu", "-Xclang", "gfx908"], "-Xclang -target-cpu"),
        (["-mcpu=gfx908"], "-mcpu=gfx908"),
        (["--offload=amdgcn-amd-amdhsa"], "--offload=amdgcn-amd-amdhsa"),
        (["-fopenmp-targets=amdgcn-amd-amdhsa"], "-fopenmp-targets=amdgcn-amd-amdhsa"),
    ],
)
def test_an_option_that_may_name_a_target_unread_is_refused(argv, named):
    with pytest.raises(Refused) as got:
        decide(["clang++", *K, *argv], FLAGS)
    assert str(got.value) == named


def test_host_cpu_options_pass():
    assert decide(["clang++", *K, "-march=native", "-mcpu=znver4"], FLAGS)[0] == "added"


@pytest.mark.parametrize(
    "text, words",
    [
        (
            '-DA="x y"  \'q\\\'z\'\ta\\ b "" c\\\\d\n--offload-arch=gfx908',
            ["-DA=x y", "q'z", "a b", "c\\d", "--offload-arch=gfx908"],
        ),
        ("'unterminated word", ["unterminated word"]),
        ("trailing\\", ["trailing\\"]),
        ("\r\n", []),
    ],
)
def test_tokenize_as_llvm_gnu(text, words):
    assert tokenize(text) == words


@pytest.mark.skipif(CLANG is None, reason="needs clang-19")
def test_tokenize_agrees_with_clang(tmp_path):
    """clang-19 reads the same response file into the same words (seen as the macros it defines)."""
    text = '-DA="x y" -DB=\'q\\\'z\' -DC=a\\ b -DD="a\\"b" -DE=c\\\\d\n-DF=\'a"b\''
    (tmp_path / "r.rsp").write_text(text)
    (tmp_path / "m.c").write_text("")
    out = subprocess.run(
        [CLANG, "-E", "-dM", "@r.rsp", "m.c"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    theirs = {
        line.split(" ", 2)[1]: line.split(" ", 2)[2]
        for line in out.splitlines()
        if line.split(" ")[1:2] and line.split(" ")[1] in "ABCDEF" and len(line.split(" ")[1]) == 1
    }
    ours = {w[2]: w[4:] for w in tokenize(text)}
    assert theirs == ours


def test_response_files_nest_from_the_working_folder_and_stop_at_a_loop(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "outer.rsp").write_text("-O2 @inner.rsp @sub/outer.rsp")
    (tmp_path / "inner.rsp").write_text("--offload-arch=gfx908")
    assert expand(["@sub/outer.rsp", "@missing.rsp"]) == [
        ("-O2", 0),
        ("--offload-arch=gfx908", 0),
        ("@sub/outer.rsp", 0),
        ("@missing.rsp", 1),
    ]


def test_a_response_file_with_a_target_is_replaced_and_one_without_kept(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "arch.rsp").write_text("-O2 --offload-arch=gfx908 '-DX=a b'")
    (tmp_path / "inc.rsp").write_text("-Iinclude")
    action, command, listed, _ = decide(["clang++", "@inc.rsp", "@arch.rsp", *K], FLAGS)
    assert (action, listed) == ("rewritten", ["gfx908"])
    assert command == ["clang++", "@inc.rsp", "-O2", "-DX=a b", *K, "--offload-arch=gfx90a"]


def test_the_record_counts_links_and_native():
    done = Enforced()
    for listed in (["native"], ["gfx908"]):
        done.add({"tool": "hip", "action": "rewritten", "step": "link", "listed": listed, "now": ["gfx90a"]})
    assert (done.compiles, done.rewritten, done.dropped) == (2, 2, {"gfx908"})


def _program(tmp_path: Path) -> Path:
    path = tmp_path / "hip_launcher.py"
    path.write_text(amd_enforce.program_text(["gfx942"]))
    return path


@pytest.mark.skipif(CLANG is None, reason="needs clang-19")
def test_the_program_as_written_runs_clang(tmp_path):
    """The written program in front of clang-19 on this machine without a GPU: native and a response
    file naming gfx908 become gfx942; a command line too long to pass on goes through a response
    file of its own, removed afterwards; a refused option stops the run with exit 2, named."""
    (tmp_path / "k.hip").write_text("__attribute__((global)) void k(int *x) { x[0] += 1; }\n")
    (tmp_path / "arch.rsp").write_text("--offload-arch=gfx908\n")
    record = tmp_path / "record"
    env = {**os.environ, "ROCM_BUILD_BACKEND_ENFORCE_RECORD": str(record), "TMPDIR": str(tmp_path)}
    base = [
        sys.executable,
        "-I",
        "-S",
        str(_program(tmp_path)),
        CLANG,
        "-x",
        "hip",
        "-nogpuinc",
        "-nogpulib",
        "--cuda-device-only",
        "-c",
        "k.hip",
    ]
    long_define = "-DLONG=" + "x" * 120_000
    for extra in (["--offload-arch=native"], ["@arch.rsp", long_define]):
        proc = subprocess.run([*base, *extra, "-o", "k.o"], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert b"gfx942" in (tmp_path / "k.o").read_bytes() and b"gfx908" not in (tmp_path / "k.o").read_bytes()
    assert not list(tmp_path.glob("hip-launcher-*.rsp"))
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [(x["action"], x["listed"], x["sources"]) for x in lines] == [
        ("rewritten", ["native"], ["k.hip"]),
        ("rewritten", ["gfx908"], ["k.hip"]),
    ]
    proc = subprocess.run(
        [*base, "-Xarch_device", "-mcpu=gfx908"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2 and "option -Xarch_device -mcpu=gfx908 may name a GPU target" in proc.stderr


def test_quote_reads_back():
    words = ["a b", "it's", "back\\slash", '"q"', ""]
    assert tokenize("\n".join(quote(w) for w in words)) == words[:-1]  # an empty word is no word, as in clang


def _fake_rocm(tmp_path: Path) -> Path:
    root = tmp_path / "rocm"
    (root / "bin").mkdir(parents=True)
    (root / "lib" / "clang").mkdir(parents=True)
    for name in ("clang++-15", "clang", "lld", "hipcc"):
        (root / "bin" / name).write_text("#!/bin/sh\n")
        (root / "bin" / name).chmod(0o755)
    return root


def test_the_view_of_hipccs_clang_folder(tmp_path):
    """hipcc's clang folder is found beside hipcc on PATH; the view's clang drivers start the
    launcher with the real one, its other entries and the folder above link to the real ones, and
    a view given back as HIP_CLANG_PATH stands for the folder it was made from."""
    root = _fake_rocm(tmp_path)
    env = {"PATH": str(root / "bin")}
    assert amd_enforce.clang_folder(env) == root / "bin"
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    write(work, amd_enforce.contents(home, ["gfx90a"], "none", env, sys.executable))
    view = work / "llvm"
    assert f'{home}/hip_launcher.py {root}/bin/clang++-15 "$@"' in (view / "bin" / "clang++-15").read_text()
    assert os.readlink(view / "bin" / "lld") == str(root / "bin" / "lld")
    assert os.readlink(view / "lib") == str(root / "lib")
    got = amd_enforce.variables(work, env)
    assert got["HIP_CLANG_PATH"] == str(view / "bin")
    assert amd_enforce.clang_folder({"HIP_CLANG_PATH": str(view / "bin")}) == root / "bin"
    assert amd_enforce.clang_folder({"PATH": str(tmp_path / "none")}) is None


def test_hipcxx_is_led_through_a_view_of_its_folder(tmp_path):
    """CMake's HIP compiler (HIPCXX) gets the same name in a view: the one of hipcc's clang folder
    when it is there, else a view of its own folder; a compiler of that view is ours, which the
    launcher in front of it passes on untouched."""
    root = _fake_rocm(tmp_path)
    other = tmp_path / "llvm19" / "bin"
    other.mkdir(parents=True)
    (other / "clang++-19").write_text("#!/bin/sh\n")
    (other / "clang++-19").chmod(0o755)
    for hipcxx, view in ((str(root / "bin" / "clang++-15"), "llvm"), (str(other / "clang++-19"), "cxx")):
        work = tmp_path / f"work-{view}"
        work.mkdir()
        env = {"PATH": str(root / "bin"), "HIPCXX": hipcxx}
        write(work, amd_enforce.contents(work, ["gfx90a"], "none", env, sys.executable))
        got = amd_enforce.variables(work, env)
        assert got["HIPCXX"] == str(work / view / "bin" / Path(hipcxx).name)
        assert amd_enforce.hip_compiler({**env, "HIPCXX": got["HIPCXX"]}) == Path(hipcxx)
        assert "HIPCXX" not in amd_enforce.variables(work, {**env, "HIPCXX": "g++"})


def test_the_launcher_passes_a_compile_for_our_own_compiler_on(tmp_path, monkeypatch):
    monkeypatch.setattr(hip_launcher, "__file__", str(tmp_path / "hip_launcher.py"))
    (tmp_path / "llvm" / "bin").mkdir(parents=True)
    assert hip_launcher.ours(str(tmp_path / "llvm" / "bin" / "clang++"))
    assert not hip_launcher.ours("/usr/bin/clang++")
