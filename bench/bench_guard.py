"""What the import guard costs when its check passes, next to the same package without it.

Run: python bench/bench_guard.py [--repeat N]

Builds two copies of a small package in a temporary folder (one with the guard, one without,
both byte-compiled as an installer would), and fake KFD roots (one gfx90a GPU; eight gfx942
GPUs; no KFD at all). It reports

- in-process: the time of ``import pkg`` with the module dropped from sys.modules each round
  (the import system's caches warm, as for any import after the first in a process);
- fresh interpreters: ``python -X importtime`` for the guard module alone (cumulative).

Numbers are medians; the target is at most 2 ms for the guard when the check passes.
"""

from __future__ import annotations

import argparse
import importlib
import os
import py_compile
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rocm_build_backend.wheel.guard import GUARD_MODULE, guard_source, insert_guard_import  # noqa: E402

BODY = b'"""A package."""\nfrom __future__ import annotations\n\nVALUE = 42\n'


def make_packages(base: Path) -> None:
    plain = base / "pkg_plain"
    guarded = base / "pkg_guarded"
    for folder in (plain, guarded):
        folder.mkdir()
    (plain / "__init__.py").write_bytes(BODY)
    (guarded / "__init__.py").write_bytes(insert_guard_import(BODY))
    (guarded / f"{GUARD_MODULE}.py").write_text(guard_source(["gfx90a", "gfx942"], "pkg-guarded"))
    for path in base.rglob("*.py"):
        py_compile.compile(str(path), doraise=True)


def make_root(base: Path, *versions: int) -> Path:
    nodes = base / "sys" / "class" / "kfd" / "kfd" / "topology" / "nodes"
    nodes.mkdir(parents=True)
    (nodes / "0").mkdir()
    (nodes / "0" / "properties").write_text("cpu_cores_count 24\nsimd_count 0\ngfx_target_version 0\n" * 3)
    for i, version in enumerate(versions, start=1):
        (nodes / str(i)).mkdir()
        lines = [f"field_{k} {k * 1234}" for k in range(18)] + [f"gfx_target_version {version}"]
        lines += [f"tail_{k} {k}" for k in range(20)]
        (nodes / str(i) / "properties").write_text("\n".join(lines) + "\n")
    return base


def in_process(name: str, repeat: int) -> float:
    """Median µs of importing ``name`` afresh (its modules dropped from sys.modules)."""
    times = []
    for _ in range(repeat):
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[mod]
        t0 = time.perf_counter_ns()
        importlib.import_module(name)
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1000


def fresh(base: Path, env: dict, repeat: int) -> float:
    """Median µs ``-X importtime`` reports for the guard module (cumulative) in new interpreters."""
    pattern = re.compile(r"import time:\s+\d+ \|\s+(\d+) \|\s+pkg_guarded\." + GUARD_MODULE + "$")
    times = []
    for _ in range(repeat):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import pkg_guarded"],
            cwd=base,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        (match,) = [m for m in map(pattern.search, proc.stderr.splitlines()) if m]
        times.append(int(match.group(1)))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        make_packages(base)
        roots = {
            "1 GPU gfx90a": make_root(base / "one", 90010),
            "8 GPUs gfx942": make_root(base / "eight", *[90402] * 8),
            "no KFD": base / "missing",
        }
        sys.path.insert(0, str(base))
        print(f"python {sys.version.split()[0]}, {args.repeat} rounds, medians in µs")
        print(f"{'machine':<16}{'plain pkg':>12}{'guarded pkg':>13}{'guard cost':>12}{'ratio':>8}{'fresh proc':>12}")
        for label, root in roots.items():
            os.environ["ROCM_BUILD_BACKEND_SYSFS_ROOT"] = str(root)
            in_process("pkg_plain", 20)
            in_process("pkg_guarded", 20)  # warm up
            plain = in_process("pkg_plain", args.repeat)
            guarded = in_process("pkg_guarded", args.repeat)
            env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
            cold = fresh(base, env, max(5, args.repeat // 30))
            print(
                f"{label:<16}{plain:>12.1f}{guarded:>13.1f}{guarded - plain:>12.1f}{guarded / plain:>8.2f}{cold:>12.0f}"
            )
        os.environ["ROCM_BUILD_BACKEND_GUARD_OFF"] = "1"
        off = in_process("pkg_guarded", args.repeat) - in_process("pkg_plain", args.repeat)
        print(f"guard turned off (ROCM_BUILD_BACKEND_GUARD_OFF=1): {off:.1f} µs over the plain package")
        print("target: guard cost <= 2000 µs when the check passes")


if __name__ == "__main__":
    main()
