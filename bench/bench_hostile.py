"""Time and peak memory of the audit against input size, for each hostile input generator.

    python bench/bench_hostile.py [--sizes 1,2,4,8] [--timeout 120] [--only NAME]

Each generator in tests/data/binaries/src/hostile.py makes an input whose size grows
linearly with n and that once made a reader's work grow faster (entries x strings,
sections x name table, candidates x rest of file, amplified decompression, many small reads
of an inflated zip member). For each, the audit runs in a fresh child process per size
(``audit_paths`` on the file, as ``rocm-build-backend audit`` does); the table shows wall
time, the child's peak RSS (VmHWM) and its growth over the interpreter's own baseline, and
what the audit said (its last problem, or the targets). Linear work shows as time roughly proportional to size; the memory
target is at most 200 MB for any input.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "data" / "binaries" / "src"))

import hostile  # noqa: E402

# n per generator for size step 1; the --sizes multipliers scale it
BASE_N = {
    "offload_strings": 2000,
    "offload_strings_wheel": 2000,
    "strtab_no_nul": 4000,
    "scan_magics": 4000,
    "many_problems": 20000,
    "ccob_sections": 1,
    "lz4_fatbin": 250,
    "small_bundles_wheel": 8000,
    "data_fatbins": 40000,
}

CHILD = r"""
import json, sys, time


def hwm_kb():  # the process's own peak RSS (VmHWM starts afresh at exec; ru_maxrss does not)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


base = hwm_kb()
from rocm_build_backend.binary.audit import audit_paths
t = time.perf_counter()
r = audit_paths([sys.argv[1]])
dt = time.perf_counter() - t
problems = list(r.problems) + [p for f in r.files for p in f.problems]
print(json.dumps({"s": dt, "rss_kb": hwm_kb(), "base_kb": base, "problems": len(problems),
                  "first": problems[-1][:60] if problems else "",
                  "targets": r.targets[:3]}))
"""


def run_one(path: Path, timeout: float) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t = time.perf_counter()
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        return {"s": time.perf_counter() - t, "timeout": True}
    if out.returncode != 0:
        return {"s": time.perf_counter() - t, "error": out.stderr.strip().splitlines()[-1:]}
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1,2,4,8", help="multipliers of each generator's base n")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--only", default="", help="run only this generator")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; one child process per row")
    print(f"{'generator':<22} {'n':>7} {'input':>10} {'time s':>8} {'s/MB':>8} {'peak MB':>8} {'+MB':>6}  result")
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in hostile.GENERATORS.items():
            if args.only and name != args.only:
                continue
            for k in sizes:
                n = BASE_N[name] * k
                fname, data = make(n)
                path = Path(tmp) / fname
                path.write_bytes(data)
                res = run_one(path, args.timeout)
                mb = len(data) / 1e6
                if res.get("timeout") or res.get("error"):
                    what = "TIMEOUT" if res.get("timeout") else f"error {res.get('error')}"
                    print(f"{name:<22} {n:>7} {len(data):>10,} {res['s']:>8.2f} {'':>8} {'':>8} {'':>6}  {what}")
                    continue
                secs = float(res["s"])  # type: ignore[arg-type]
                peak = int(res["rss_kb"]) / 1024  # type: ignore[call-overload]
                grow = (int(res["rss_kb"]) - int(res["base_kb"])) / 1024  # type: ignore[call-overload]
                said = res["first"] or f"targets {res['targets']}"
                print(
                    f"{name:<22} {n:>7} {len(data):>10,} {secs:>8.3f} {secs / max(mb, 1e-9):>8.2f} "
                    f"{peak:>8.1f} {grow:>6.1f}  {res['problems']} problem(s): {said}"
                )
                path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
