"""Every core: a many-extension setuptools project built through the shim with its parallel
``build_ext`` and one extension at a time, side by side in one run.

The project is made here: N C++ extensions (each a few seconds of g++ at -O2), made in a loop the
way torch-scatter makes its own, without GPU code (``verify = "off"``). "serial" is the same
build with ``[build_ext] parallel = 1`` in the user's own ``DIST_EXTRA_CONFIG`` (which the shim
honours). For each: wall time, CPU time of the build's processes, and CPU use as CPU time / wall /
cores. Rounds interleave the two.

    python3 bench/bench_parallel.py [--extensions 8] [--rounds 2]
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
SOURCE = r"""
#include <Python.h>
#include <map>
#include <string>
#include <vector>
#include <algorithm>
// Enough templates that -O2 takes a few seconds.
template <int N> struct Work {
  static std::map<std::string, std::vector<double>> make() {
    std::map<std::string, std::vector<double>> m;
    for (int i = 0; i < N; ++i) m[std::to_string(i)].push_back(i * 0.5);
    auto v = Work<N - 1>::make();
    for (auto& kv : v) std::sort(kv.second.begin(), kv.second.end());
    m.insert(v.begin(), v.end());
    return m;
  }
};
template <> struct Work<0> { static std::map<std::string, std::vector<double>> make() { return {}; } };
static PyObject* run(PyObject*, PyObject*) { return PyLong_FromSize_t(Work<120>::make().size()); }
static PyMethodDef methods[] = {{"run", run, METH_NOARGS, nullptr}, {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "@NAME@", nullptr, -1, methods};
PyMODINIT_FUNC PyInit_@NAME@(void) { return PyModule_Create(&def); }
"""


def make_project(folder: Path, count: int) -> Path:
    (folder / "csrc").mkdir(parents=True)
    (folder / "manyext").mkdir()
    (folder / "manyext" / "__init__.py").write_text("")
    for i in range(count):
        (folder / "csrc" / f"e{i}.cpp").write_text(SOURCE.replace("@NAME@", f"_e{i}"))
    (folder / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        f"setup(ext_modules=[Extension(f'manyext._e{{i}}', [f'csrc/e{{i}}.cpp'], extra_compile_args=['-O2'])"
        f" for i in range({count})])\n")
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["rocm-build-backend", "setuptools>=64"]\nbuild-backend = "rocm_build_backend"\n'
        '[project]\nname = "manyext"\nversion = "0.1.0"\n[tool.setuptools]\npackages = ["manyext"]\n'
        '[tool.rocm-build-backend]\nbackend = "setuptools.build_meta"\nverify = "off"\n')
    return folder


def build(project: Path, out: Path, env: dict[str, str]) -> tuple[float, float, str]:
    shutil.rmtree(project / "build", ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
                           "-w", str(out), str(project), "-C", "rocm-build-backend.targets=gfx90a",
                           "-C", "rocm-build-backend.compiler-check=false"],
                          env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    line = next((ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if "build_ext parallel" in ln), "")
    return wall, cpu, line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extensions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    work = Path(tempfile.mkdtemp(prefix="bench-parallel-"))
    try:
        project = make_project(work / "manyext", args.extensions)
        serial_cfg = work / "serial.cfg"
        serial_cfg.write_text("[build_ext]\nparallel = 1\n")
        base = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(work / "cache")}
        base.pop("DIST_EXTRA_CONFIG", None)
        cases = {"parallel build_ext (the shim's plan)": base,
                 "one extension at a time": {**base, "DIST_EXTRA_CONFIG": str(serial_cfg)}}
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        lines = {}
        for _ in range(args.rounds):
            for name, env in cases.items():
                wall, cpu, line = build(project, work / "out", env)
                got[name].append((wall, cpu))
                lines[name] = line
        print(f"{args.extensions} C++ extensions, {cores} cores, median of {args.rounds} interleaved rounds "
              f"(load {os.getloadavg()[0]:.1f}):")
        serial_wall = statistics.median(w for w, _ in got["one extension at a time"])
        for name, values in got.items():
            wall = statistics.median(w for w, _ in values)
            cpu = statistics.median(c for _, c in values)
            print(f"  {name:38s} wall {wall:6.1f} s  cpu {cpu:6.1f} s  cpu/wall/cores {cpu / wall / cores:4.0%}  "
                  f"x{wall / serial_wall:.2f}")
            print(f"    log: {lines[name]}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
