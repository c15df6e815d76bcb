"""Every core: a many-extension setuptools project built through the shim three ways, side by side
in one run: with the shim's plan (every extension at once, their compiles through the compile
pool, largest first), with setuptools' parallel ``build_ext`` alone (as many extensions at once
as cores, each compiling its files one after another: the shim's plan before the pool) and one
extension at a time.

The project is made here, in torch-cluster's shape without torch or GPU code (``verify = "off"``):
N C++ extensions made in a loop, each of a small module file and a medium source, the last one
(built last) of a small module file and three large sources, so that compiled one after another
its sources are the build's critical path. The two other ways are the user's own
``DIST_EXTRA_CONFIG`` with ``[build_ext] parallel`` = cores and = 1 (which the shim honours, without
its pool). For each: wall time, CPU time of the build's processes, and CPU use as CPU time / wall
/ cores. Rounds interleave the three.

    python3 bench/bench_parallel.py [--extensions 6] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE = r"""
#include <Python.h>
extern "C" int @NAME@_work(void);
static PyObject* run(PyObject*, PyObject*) { return PyLong_FromLong(@NAME@_work()); }
static PyMethodDef methods[] = {{"run", run, METH_NOARGS, nullptr}, {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "@NAME@", nullptr, -1, methods};
PyMODINIT_FUNC PyInit_@NAME@(void) { return PyModule_Create(&def); }
"""
MEDIUM, LARGE = 400, 1200  # functions in a medium and a large source: about 1.4 s and 4 s of g++ -O2 here


def source(name: str, count: int) -> str:
    """``count`` small functions (g++ -O2 time grows with them) and ``name``, which calls two."""
    body = "".join(
        f"int {name}_f{i}(int x) {{ int s = {i}; for (int j = 0; j < x; ++j) s += (j * {i}) ^ (s >> 3); return s; }}\n"
        for i in range(count)
    )
    return f'{body}extern "C" int {name}(void) {{ return {name}_f0(3) + {name}_f{count - 1}(3); }}\n'


def make_project(folder: Path, count: int) -> Path:
    (folder / "csrc").mkdir(parents=True)
    (folder / "manyext").mkdir()
    (folder / "manyext" / "__init__.py").write_text("")
    for i in range(count):
        last = i == count - 1
        (folder / "csrc" / f"e{i}.cpp").write_text(MODULE.replace("@NAME@", f"_e{i}"))
        parts = [f"e{i}_{k}" for k in range(3 if last else 1)]
        for k, part in enumerate(parts):
            work = f"_e{i}_work" if k == 0 else f"_e{i}_more{k}"
            (folder / "csrc" / f"{part}.cpp").write_text(source(work, LARGE if last else MEDIUM))
    (folder / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        f"N = {count}\n"
        "def sources(i):\n"
        "    return [f'csrc/e{i}.cpp'] + [f'csrc/e{i}_{k}.cpp' for k in range(3 if i == N - 1 else 1)]\n"
        "setup(ext_modules=[Extension(f'manyext._e{i}', sources(i), extra_compile_args=['-O2']) for i in range(N)])\n"
    )
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["rocm-build-backend", "setuptools>=64"]\nbuild-backend = "rocm_build_backend"\n'
        '[project]\nname = "manyext"\nversion = "0.1.0"\n[tool.setuptools]\npackages = ["manyext"]\n'
        '[tool.rocm-build-backend]\nbackend = "setuptools.build_meta"\nverify = "off"\n'
    )
    return folder


def build(project: Path, out: Path, env: dict[str, str]) -> tuple[float, float, str]:
    shutil.rmtree(project / "build", ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            str(out),
            str(project),
            "-C",
            "rocm-build-backend.targets=gfx90a",
            "-C",
            "rocm-build-backend.compiler-check=false",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [
        ln.strip()
        for ln in (proc.stdout + proc.stderr).splitlines()
        if "build_ext parallel =" in ln or "compile pool: " in ln and " compiles from " in ln
    ]
    return wall, cpu, "\n    log: ".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extensions", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    work = Path(tempfile.mkdtemp(prefix="bench-parallel-"))
    try:
        project = make_project(work / "manyext", args.extensions)
        side_cfg, serial_cfg = work / "side.cfg", work / "serial.cfg"
        side_cfg.write_text(f"[build_ext]\nparallel = {cores}\n")
        serial_cfg.write_text("[build_ext]\nparallel = 1\n")
        base = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(work / "cache")}
        base.pop("DIST_EXTRA_CONFIG", None)
        cases = {
            "compile pool (the shim's plan)": base,
            f"{cores} extensions at once, no pool": {**base, "DIST_EXTRA_CONFIG": str(side_cfg)},
            "one extension at a time": {**base, "DIST_EXTRA_CONFIG": str(serial_cfg)},
        }
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        lines = {}
        for _ in range(args.rounds):
            for name, env in cases.items():
                wall, cpu, line = build(project, work / "out", env)
                got[name].append((wall, cpu))
                lines[name] = line
        print(
            f"{args.extensions} C++ extensions ({2 * args.extensions + 2} sources, the last extension's three large), "
            f"{cores} cores, median of {args.rounds} interleaved rounds (load {os.getloadavg()[0]:.1f}):"
        )
        serial_wall = statistics.median(w for w, _ in got["one extension at a time"])
        for name, values in got.items():
            wall = statistics.median(w for w, _ in values)
            cpu = statistics.median(c for _, c in values)
            print(
                f"  {name:38s} wall {wall:6.1f} s  cpu {cpu:6.1f} s  cpu/wall/cores {cpu / wall / cores:4.0%}  "
                f"x{wall / serial_wall:.2f}"
            )
            print(f"    log: {lines[name]}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
