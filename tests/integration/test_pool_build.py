"""The compile pool, for real: setuptools projects with several extensions built through the shim
with pip and the real compilers, each compile run through a launcher (``CC``, ``CXX``, and the
nvcc a torch-shaped ``build_ext`` swaps in) that records which tool compiled which file, and when.

What is checked: the plan's and the pool's log lines, that the wheel's extensions import and
answer, that the sources of one extension compiled side by side (largest first within it), that
never more compiles ran at once than the pool's slots, and, for a build that swaps the shared
compiler's ``compiler_so`` for nvcc around a .cu file as torch's build without ninja does
(``unix_wrap_single_compile``), that a C file compiled beside the .cu file still got the C
compiler. No timing is asserted: only the order and overlap of the recorded compiles."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import ROOT, only_wheel, run

NVCC = Path("/usr/local/cuda/bin/nvcc")
PYPROJECT = """\
[build-system]
requires = ["rocm-build-backend", "setuptools>=64"]
build-backend = "rocm_build_backend"

[project]
name = "{name}"
version = "0.1.0"

[tool.setuptools]
packages = ["{package}"]

[tool.rocm-build-backend]
backend = "setuptools.build_meta"
verify = "off"
"""
LAUNCHER = """\
#!{python}
import json, os, subprocess, sys, time
args = sys.argv[1:]
start = time.time()
rc = subprocess.call([{real!r}, *args])
src = next((a for a in args if a.endswith((".c", ".cpp", ".cu"))), "")
with open(os.environ["POOL_RECORD"], "a") as fh:
    obj = args[args.index("-o") + 1] if "-o" in args[:-1] else ""
    fh.write(json.dumps({{"tool": {tool!r}, "kind": "compile" if "-c" in args else "link", "src": src,
                         "obj": obj, "start": start, "end": time.time(), "rc": rc}}) + "\\n")
sys.exit(rc)
"""
MODULE = """\
#include <Python.h>
{decls}
static PyObject* answer(PyObject* self, PyObject* args) {{ return PyLong_FromLong({expr}); }}
static PyMethodDef methods[] = {{{{"answer", answer, METH_NOARGS, NULL}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, methods}};
PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&def); }}
"""


@pytest.fixture
def build_env(build_env):
    """The builds run this checkout's shim, whatever is installed."""
    build_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), build_env.get("PYTHONPATH", "")) if p)
    return build_env


def _functions(prefix: str, count: int, *, cxx: bool = False) -> str:
    """A source of ``count`` small functions, a second or so of the compiler at -O2: the file size
    orders the pool's waiting line."""
    body = "".join(
        f"static int {prefix}{i}(int x) {{ int s = {i}; for (int j = 0; j < x; ++j) "
        f"s += (j * {i}) ^ (s >> 3); return s; }}\n"
        for i in range(count)
    )
    calls = " + ".join(f"{prefix}{i}(3)" for i in range(0, count, max(1, count // 8)))
    head = 'extern "C" ' if cxx else ""
    return f"{body}{head}int {prefix}_total(void) {{ return ({calls}) != 0 ? {count} : -1; }}\n"


def _launchers(folder: Path, env: dict[str, str], **tools: str) -> dict[str, Path]:
    """One recording launcher per tool (name -> the real program); ``POOL_RECORD`` names the record."""
    folder.mkdir()
    made = {}
    for tool, real in tools.items():
        path = folder / f"rec-{tool}"
        path.write_text(LAUNCHER.format(python=sys.executable, real=real, tool=tool))
        path.chmod(0o755)
        made[tool] = path
    env["POOL_RECORD"] = str(folder / "record.jsonl")
    return made


def _records(env: dict[str, str]) -> list[dict]:
    return [json.loads(line) for line in Path(env["POOL_RECORD"]).read_text().splitlines()]


def _overlap(a: dict, b: dict) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


def _most_at_once(compiles: list[dict]) -> int:
    edges = sorted([(c["start"], 1) for c in compiles] + [(c["end"], -1) for c in compiles])
    now = most = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def _build(project: Path, out: Path, env: dict[str, str]) -> str:
    argv = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-v",
        "--no-build-isolation",
        "--no-deps",
        "-w",
        out,
        project,
        "-C",
        "rocm-build-backend.targets=gfx90a",
        "-C",
        "rocm-build-backend.max-jobs=2",
        "-C",
        "rocm-build-backend.compiler-check=false",
        "-C",
        "rocm-build-backend.compiler-cache=off",
    ]  # the launchers record the compiler's runs alone
    proc = run(argv, env=env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    return log


def _answers(wheel: Path, folder: Path, package: str, modules: list[str]) -> list[int]:
    """Each extension module's ``answer()``, imported from the unpacked wheel in a fresh interpreter."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(folder)
    code = f"import importlib; print([importlib.import_module('{package}.' + m).answer() for m in {modules!r}])"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout))


def _plain_project(root: Path) -> Path:
    """Three extensions in a list: ``_multi`` of four sources (C and C++; the two largest take a
    second or so), ``_one`` and ``_two`` of one small source each."""
    project = root / "pool_ext"
    (project / "pool_ext").mkdir(parents=True)
    (project / "pool_ext" / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text(PYPROJECT.format(name="pool-ext", package="pool_ext"))
    multi = project / "csrc" / "multi"
    multi.mkdir(parents=True)
    (multi / "big.cpp").write_text(_functions("big", 400, cxx=True))
    (multi / "mid.c").write_text(_functions("mid", 300))
    (multi / "small.c").write_text(_functions("small", 3))
    (multi / "main.c").write_text(
        MODULE.format(
            name="_multi",
            decls="int big_total(void); int mid_total(void); int small_total(void);",
            expr="big_total() + mid_total() + small_total()",
        )
    )
    for name, value in (("_one", 1), ("_two", 2)):
        (project / "csrc" / f"{name}.c").write_text(MODULE.format(name=name, decls="", expr=value))
    (project / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        "setup(ext_modules=[\n"
        "    Extension('pool_ext._multi', ['csrc/multi/main.c', 'csrc/multi/small.c', 'csrc/multi/mid.c',\n"
        "                                  'csrc/multi/big.cpp'], language='c++'),\n"
        "    Extension('pool_ext._one', ['csrc/_one.c']),\n"
        "    Extension('pool_ext._two', ['csrc/_two.c']),\n"
        "])\n"
    )
    return project


def test_the_extensions_compile_side_by_side_through_one_pool(tmp_path, build_env):
    project = _plain_project(tmp_path)
    tools = _launchers(tmp_path / "tools", build_env, cc=shutil.which("cc") or "cc", cxx=shutil.which("c++") or "c++")
    build_env.update(CC=str(tools["cc"]), CXX=str(tools["cxx"]))
    log = _build(project, tmp_path / "out", build_env)
    assert (
        "build_ext parallel = 3 (3 extensions: 3 at once, their compiles through one pool of 2 slots, "
        "largest first, 1 job each)"
    ) in log
    assert (
        "compile pool: 2 slots shared by 3 extensions, largest first, links through the same slots, each "
        "extension's compiler settings its own"
    ) in log
    assert (
        "compile pool: 6 compiles from 3 compile calls and 3 other compiler runs (links), at most 2 at once "
        "(2 slots, largest first); first compile to last "
    ) in log

    wheel = only_wheel(tmp_path / "out")
    assert _answers(wheel, tmp_path / "site", "pool_ext", ["_multi", "_one", "_two"]) == [400 + 300 + 3, 1, 2]

    compiles = [r for r in _records(build_env) if r["kind"] == "compile"]
    assert sorted(Path(c["src"]).name for c in compiles) == [
        "_one.c",
        "_two.c",
        "big.cpp",
        "main.c",
        "mid.c",
        "small.c",
    ]
    assert all(c["rc"] == 0 for c in compiles)
    assert _most_at_once(compiles) <= 2  # never more than the pool's slots
    links = [r for r in _records(build_env) if r["kind"] == "link"]
    assert len(links) == 3 and _most_at_once(compiles + links) <= 2  # the links take the same slots
    multi = {Path(c["src"]).name: c for c in compiles if "/multi/" in c["src"]}
    assert _overlap(multi["big.cpp"], multi["mid.c"]), multi  # one extension's sources side by side
    assert max(multi["big.cpp"]["start"], multi["mid.c"]["start"]) < min(
        multi["small.c"]["start"], multi["main.c"]["start"]
    )  # largest first
    assert {c["tool"] for c in compiles if c["src"].endswith(".c")} == {"cc"}
    assert multi["big.cpp"]["tool"] == "cxx"


def _swapping_project(root: Path, nvcc: Path) -> Path:
    """torch's build without ninja, in its shape: a ``build_ext`` that sets ``compiler_so`` to nvcc
    for each .cu file and puts back the value it saw (``unix_wrap_single_compile``); ``_dev``
    compiles two C files and one .cu file, ``_plain`` one C file."""
    project = root / "swap_ext"
    (project / "swap_ext").mkdir(parents=True)
    (project / "swap_ext" / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text(PYPROJECT.format(name="swap-ext", package="swap_ext"))
    dev = project / "csrc" / "dev"
    dev.mkdir(parents=True)
    (dev / "k.cu").write_text(
        'extern "C" int dev_answer(void) { return 7; }\n__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }\n'
    )
    (dev / "host.c").write_text(_functions("host", 200))
    (dev / "main.c").write_text(
        MODULE.format(
            name="_dev", decls="int dev_answer(void); int host_total(void);", expr="dev_answer() + host_total()"
        )
    )
    (project / "csrc" / "plain.c").write_text(MODULE.format(name="_plain", decls="", expr=5))
    cuda = NVCC.parent.parent
    (project / "setup.py").write_text(f"""\
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class SwappingBuild(build_ext):
    def build_extensions(self):
        self.compiler.src_extensions += [".cu"]
        original = self.compiler._compile

        def wrapped(obj, src, ext, cc_args, extra_postargs, pp_opts):
            saved = self.compiler.compiler_so
            try:
                if src.endswith(".cu"):
                    self.compiler.set_executable("compiler_so", [{str(nvcc)!r}])
                    extra_postargs = ["-Xcompiler", "-fPIC"]
                original(obj, src, ext, cc_args, extra_postargs, pp_opts)
            finally:
                self.compiler.set_executable("compiler_so", saved)

        self.compiler._compile = wrapped
        super().build_extensions()


setup(ext_modules=[
    Extension("swap_ext._dev", ["csrc/dev/main.c", "csrc/dev/host.c", "csrc/dev/k.cu"], language="c++",
              library_dirs=[{str(cuda / "lib64")!r}], libraries=["cudart_static", "dl", "pthread", "rt"]),
    Extension("swap_ext._plain", ["csrc/plain.c"]),
], cmdclass={{"build_ext": SwappingBuild}})
""")
    return project


@pytest.mark.skipif(not NVCC.is_file(), reason="needs nvcc")
def test_a_c_file_beside_an_nvcc_compile_keeps_the_c_compiler(tmp_path, build_env):
    tools = _launchers(tmp_path / "tools", build_env, cc=shutil.which("cc") or "cc", nvcc=str(NVCC))
    project = _swapping_project(tmp_path, tools["nvcc"])
    build_env["CC"] = str(tools["cc"])
    log = _build(project, tmp_path / "out", build_env)
    assert (
        "compile pool: 4 compiles from 2 compile calls and 2 other compiler runs (links), at most 2 at once "
        "(2 slots, largest first)"
    ) in log

    wheel = only_wheel(tmp_path / "out")
    assert _answers(wheel, tmp_path / "site", "swap_ext", ["_dev", "_plain"]) == [7 + 200, 5]

    compiles = {Path(r["src"]).name: r for r in _records(build_env) if r["kind"] == "compile"}
    assert sorted(compiles) == ["host.c", "k.cu", "main.c", "plain.c"]
    assert compiles["k.cu"]["tool"] == "nvcc"
    assert {compiles[n]["tool"] for n in ("host.c", "main.c", "plain.c")} == {"cc"}  # never nvcc
    beside = [n for n in ("host.c", "main.c", "plain.c") if _overlap(compiles[n], compiles["k.cu"])]
    assert beside, compiles  # a C file did compile while nvcc held compiler_so (device source first)


def test_extensions_that_share_a_source_each_link_their_own_object(tmp_path, build_env):
    """Two extensions compile one source with other macros (torch-cluster's ``_fps_cpu`` and
    ``_fps_cuda`` both compile ``csrc/fps.cpp``), side by side: each writes its own object file
    and links it, so each answers with its own macro's value."""
    project = tmp_path / "share_ext"
    (project / "share_ext").mkdir(parents=True)
    (project / "share_ext" / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text(PYPROJECT.format(name="share-ext", package="share_ext"))
    (project / "csrc").mkdir()
    (project / "csrc" / "shared.c").write_text(_functions("pad", 150) + "int flavor(void) { return FLAVOR; }\n")
    for name in ("_one", "_two"):
        (project / "csrc" / f"{name}.c").write_text(
            MODULE.format(name=name, decls="int flavor(void);", expr="flavor()")
        )
    (project / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        "setup(ext_modules=[Extension(f'share_ext.{n}', [f'csrc/{n}.c', 'csrc/shared.c'],\n"
        "                             define_macros=[('FLAVOR', str(v))]) for n, v in (('_one', 1), ('_two', 2))])\n"
    )
    tools = _launchers(tmp_path / "tools", build_env, cc=shutil.which("cc") or "cc")
    build_env["CC"] = str(tools["cc"])
    _build(project, tmp_path / "out", build_env)
    assert _answers(only_wheel(tmp_path / "out"), tmp_path / "site", "share_ext", ["_one", "_two"]) == [1, 2]
    shared = [r for r in _records(build_env) if r["kind"] == "compile" and r["src"].endswith("shared.c")]
    assert len(shared) == 2 and shared[0]["obj"] != shared[1]["obj"], shared
