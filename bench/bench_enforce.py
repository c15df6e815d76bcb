"""What enforcement costs and saves at the compiler, side by side in one run.

1. The pinned nvcc's own cost per call: ``nvcc --version`` run directly and through the pinned
   nvcc (its ``sh`` starter and the Python program in front of the real nvcc), interleaved.
2. One compile of a kernel file, causal-conv1d-style: a hard-coded list of the nine targets
   causal-conv1d 1.6.0 passes on CUDA 13 (setup.py L177-203), built (a) with only the chosen
   target set by hand (sm_90), (b) through the pinned nvcc (enforce = true: cut to sm_90), and
   (c) directly with the whole list (enforce = false). Rounds interleave a, b, c, so machine
   load falls on all three alike; the figure is the median of each and the ratios to (a).

    python3 bench/bench_enforce.py [--rounds 3] [--calls 30]

Needs nvcc (CUDA 12.9+ for the sm_103/sm_110/sm_121 of the list: older ones drop those). No GPU.
Prints a table; writes nothing but a temporary folder it removes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rocm_build_backend.builder.enforce import install, read_record  # noqa: E402
from rocm_build_backend.gpu.nvidia.enforce import toolkit_root  # noqa: E402

LIST = ["75", "80", "87", "90", "100", "103", "110", "120", "121"]  # causal-conv1d 1.6.0 on CUDA 13
KERNEL = r"""
// A templated kernel family, instantiated 24 ways: enough device code that each target costs
// time, as causal-conv1d's kernels do.
template <int N, typename T>
__global__ void conv(const T* x, const T* w, T* y, int len) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= len) return;
  T acc = 0;
#pragma unroll
  for (int k = 0; k < N; ++k) acc += (i >= k ? x[i - k] : T(0)) * w[k];
  y[i] = acc > T(0) ? acc : T(0);
}
#define INST(N) template __global__ void conv<N, float>(const float*, const float*, float*, int); \
                template __global__ void conv<N, double>(const double*, const double*, double*, int);
INST(2) INST(3) INST(4) INST(5) INST(6) INST(7) INST(8) INST(9) INST(10) INST(11) INST(12) INST(13)
"""


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def gencode(numbers: list[str]) -> list[str]:
    out: list[str] = []
    for n in numbers:
        out += ["-gencode", f"arch=compute_{n},code=sm_{n}"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    root = toolkit_root(os.environ)
    if root is None:
        print("no CUDA toolkit found", file=sys.stderr)
        return 2
    real = str(root / "bin" / "nvcc")
    work = Path(tempfile.mkdtemp(prefix="bench-enforce-"))
    try:
        env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache")}
        for var in ("NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS"):
            env.pop(var, None)
        record = work / "record.jsonl"
        pinned_env = {**env, **install("nvidia", ["sm_90"], env, record)}
        pinned = pinned_env["CUDACXX"]
        src = work / "k.cu"
        src.write_text(KERNEL)

        direct_v, pinned_v = [], []
        for _ in range(args.calls):
            direct_v.append(timed([real, "--version"], env))
            pinned_v.append(timed([pinned, "--version"], pinned_env))
        d, p = statistics.median(direct_v) * 1000, statistics.median(pinned_v) * 1000
        print(
            f"nvcc --version, median of {args.calls}: direct {d:.1f} ms, through the pinned nvcc {p:.1f} ms "
            f"(+{p - d:.1f} ms a call)"
        )

        cases = {
            "a: sm_90 set by hand": ([real], gencode(["90"]), env),
            "b: the list, pinned nvcc (enforce)": ([pinned], gencode(LIST), pinned_env),
            "c: the list, real nvcc (enforce off)": ([real], gencode(LIST), env),
        }
        times: dict[str, list[float]] = {k: [] for k in cases}
        for r in range(args.rounds):
            for name, (cmd, flags, e) in cases.items():
                out = work / f"k{r}.o"
                times[name].append(timed(cmd + ["-O3", "-c", str(src), "-o", str(out)] + flags, e))
        base = statistics.median(times["a: sm_90 set by hand"])
        print(
            f"\none compile of a 24-kernel file, median of {args.rounds} interleaved rounds "
            f"(nvcc {root.name}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}):"
        )
        for name, values in times.items():
            med = statistics.median(values)
            print(f"  {name:40s} {med:7.2f} s  x{med / base:.2f}")
        done = read_record(record)
        print(
            f"\nthe pinned nvcc's record: {done.compiles} compiles, {done.rewritten} cut to sm_90, "
            f"dropped {' '.join(sorted(done.dropped))}"
        )
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
