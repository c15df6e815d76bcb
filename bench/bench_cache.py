"""A warm rebuild from the compiler cache against its cold build. Prints a table; asserts nothing.

    python bench/bench_cache.py [--runs N] [--sources N] [--cache sccache|ccache]

A CMake project with N HIP sources (CMake's HIP language, clang-19, one target), built through
the shim with `pip wheel --no-build-isolation`, every build in a fresh copy of the sources (as pip,
uv and CI build). Each round, alternated: a *cold* build (the cache folder emptied first), a *warm*
build (the same target again, the cache as the cold build left it), then a *revisit* (another
target, then the first one again: the second of those is timed). Medians of the rounds, wall time,
and the cache's hits and misses from the build log. Needs clang-19, cmake, ninja and the cache.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers import cmake_hip_env  # noqa: E402  (the benchmark uses the tests' HIP setup)

SOURCE = """// a kernel file heavy enough to take a while to compile: templates unrolled for several types
#include <stddef.h>
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
struct dim3 {{ unsigned x, y, z; }};
typedef struct ihipStream_t* hipStream_t;
extern "C" int hipLaunchKernel(const void*, dim3, dim3, void**, size_t, hipStream_t);
template <typename T, int N> __device__ T poly(T x) {{
  T acc = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) acc = acc * x + (T)(i * {n} + 1);
  return acc;
}}
template <typename T, int N> __global__ void k{n}(T* x, int n) {{
  int i = (int)__builtin_amdgcn_workitem_id_x();
  if (i < n) x[i] = poly<T, N>(x[i]) + poly<T, N / 2>(x[i] * (T)2);
}}
template __global__ void k{n}<float, 256>(float*, int);
template __global__ void k{n}<double, 256>(double*, int);
template __global__ void k{n}<int, 256>(int*, int);
template __global__ void k{n}<long, 256>(long*, int);
template __global__ void k{n}<float, 512>(float*, int);
template __global__ void k{n}<double, 512>(double*, int);
"""

CMAKELISTS = """cmake_minimum_required(VERSION 3.21)
project(bench_cache LANGUAGES CXX HIP)
file(GLOB SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/csrc/*.hip)
add_library(kernels SHARED ${SOURCES})
install(TARGETS kernels LIBRARY DESTINATION bench_cache)
"""

PYPROJECT = """[build-system]
requires = ["rocm-build-backend", "scikit-build-core>=0.10"]
build-backend = "rocm_build_backend"

[project]
name = "bench-cache"
version = "0.1.0"

[tool.scikit-build]
wheel.packages = ["bench_cache"]

[tool.rocm-build-backend]
backend = "scikit_build_core.build"
"""


def make_project(folder: Path, sources: int) -> Path:
    (folder / "csrc").mkdir(parents=True)
    (folder / "bench_cache").mkdir()
    (folder / "bench_cache" / "__init__.py").write_text("")
    (folder / "CMakeLists.txt").write_text(CMAKELISTS)
    (folder / "pyproject.toml").write_text(PYPROJECT)
    for n in range(sources):
        (folder / "csrc" / f"k{n}.hip").write_text(SOURCE.format(n=n))
    return folder


class Builder:
    def __init__(self, work: Path, project: Path, cache: str, env: dict[str, str]) -> None:
        self.work, self.project, self.cache, self.env, self.n = work, project, cache, env, 0

    def build(self, target: str) -> tuple[float, str]:
        """One build in a fresh copy: (wall seconds, the cache's log line)."""
        self.n += 1
        src = self.work / f"copy{self.n}"
        shutil.copytree(self.project, src)
        out = self.work / f"out{self.n}"
        argv = [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            str(out),
            str(src),
            "-C",
            f"rocm-build-backend.targets={target}",
            "-C",
            f"rocm-build-backend.compiler-cache={self.cache}",
        ]
        t = time.perf_counter()
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise SystemExit(log[-4000:])
        shutil.rmtree(src)
        shutil.rmtree(out)
        lines = [m.group(1) for m in re.finditer(rf"compiler cache: {self.cache}: (\d+ hits, \d+ misses)", log)]
        return wall, lines[-1] if lines else "no statistics"

    def empty_cache(self) -> None:
        folder = Path(self.env["SCCACHE_DIR" if self.cache == "sccache" else "CCACHE_DIR"])
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sources", type=int, default=6)
    ap.add_argument("--cache", choices=["sccache", "ccache"], default="sccache")
    ap.add_argument("--targets", default="gfx90a,gfx908", help="A,B: the target built, and the other one")
    args = ap.parse_args()
    a, b = args.targets.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCM_BUILD_BACKEND_", "SCCACHE_", "CCACHE_"))}
        env.update(
            cmake_hip_env(work),
            PYTHONPATH=str(ROOT),
            XDG_CACHE_HOME=str(work / "xdg"),
            PIP_NO_CACHE_DIR="1",
            PIP_DISABLE_PIP_VERSION_CHECK="1",
            SCCACHE_DIR=str(work / "sccache"),
            CCACHE_DIR=str(work / "ccache"),
            SCCACHE_SERVER_PORT="4299",
        )
        builder = Builder(work, make_project(work / "project", args.sources), args.cache, env)
        rows: dict[str, list[float]] = {"cold": [], "warm": [], "revisit": []}
        notes: dict[str, str] = {}
        for _ in range(args.runs):
            builder.empty_cache()
            for label, target in (("cold", a), ("warm", a)):
                wall, note = builder.build(target)
                rows[label].append(wall)
                notes[label] = note
            builder.build(b)
            wall, notes["revisit"] = builder.build(a)
            rows["revisit"].append(wall)
        cold = statistics.median(rows["cold"])
        print(
            f"CMake HIP project, {args.sources} sources, clang-19, target {a}, cache {args.cache}, "
            f"fresh copy each build, {args.runs} rounds (medians)"
        )
        for label, times in rows.items():
            med = statistics.median(times)
            print(
                f"  {label:8s} median {med:6.2f} s  ({med / cold:.2f}x cold)  "
                f"runs {' '.join(f'{t:.2f}' for t in times)}  last: {notes[label]}"
            )


if __name__ == "__main__":
    main()
