"""What putting the pinned compilers in place costs a GPU build. Prints a table; asserts nothing.

    python bench/bench_enforcedir.py [--runs N] [--before TREE] [--targets gfx90a]

Each row times ``builder.enforce.install`` (what ``applied(plan)`` calls before the wrapped hook
of every build with enforcement on) for an AMD build (``HIP_PLATFORM=amd``, the targets given,
hipcc found on PATH: the view of hipcc's clang folder is part of the folder), in a fresh
interpreter (as pip runs each hook), the shim taken from each tree on PYTHONPATH in turn, the
order turned each run, medians compared:

    in place   the folder is already there (every build after the first with these targets)
    first      an empty cache folder (the first build with these targets)

Each tree gets a cache folder of its own (``XDG_CACHE_HOME``), made once for the "in place"
rows and afresh for each "first" row.

``--hip-wheel N`` (with ``--before``): then the whole ``pip wheel`` of the HIP sample for those
targets (``bench_shim.pip_wheel_cpu``: its metadata hook and its build hook each put the folder in
place), N rounds of the two trees side by side, the folder in place, the compiler cache off; the
paired difference is the median of each round's (this tree - before).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_ONE = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from rocm_build_backend.builder.enforce import install\n"
    "import os\n"
    "t = time.perf_counter()\n"
    "install('amd', sys.argv[1].split(';'), dict(os.environ), Path(sys.argv[2]))\n"
    "print(__import__('rocm_build_backend').__file__, (time.perf_counter() - t) * 1000)\n"
)


def env(tree: Path, cache: Path) -> dict[str, str]:
    e = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ROCM_BUILD_BACKEND_") and k not in ("HIP_CLANG_PATH", "HIPCXX", "PYTHONDONTWRITEBYTECODE")
    }
    e.update(PYTHONPATH=str(tree), XDG_CACHE_HOME=str(cache), HIP_PLATFORM="amd")
    return e


def one(tree: Path, cache: Path, targets: str, record: Path) -> float:
    """Milliseconds ``install`` took; run in ``record``'s folder (``python -c`` puts the working
    folder ahead of PYTHONPATH: never a checkout)."""
    out = subprocess.run(
        [sys.executable, "-c", _ONE, targets, str(record)],
        env=env(tree, cache),
        capture_output=True,
        text=True,
        check=True,
        cwd=record.parent,
    ).stdout
    module, ms = out.split()[-2:]
    if not Path(module).is_relative_to(tree):
        raise RuntimeError(f"{module} ran, not the shim of {tree}")
    return float(ms)


def hip_wheel(runs: int, before: Path, targets: str) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_shim

    trees = {"before": before, "this tree": ROOT}
    settings = (
        f"rocm-build-backend.targets={targets}",
        "rocm-build-backend.stale=clean",
        "rocm-build-backend.compiler-cache=off",
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        projects = {label: work / f"hip-{i}" for i, label in enumerate(trees)}
        saved = os.environ.get("XDG_CACHE_HOME")
        os.environ["XDG_CACHE_HOME"] = str(work / "cache")
        try:
            for label, tree in trees.items():  # each tree's folder in place, bytecode warm
                shutil.copytree(bench_shim.SAMPLES / "setuptools_hip", projects[label])
                bench_shim.pip_wheel_cpu(projects[label], work / "o", *settings, tree=tree)
            rows: dict[str, list[float]] = {label: [] for label in trees}
            for i in range(runs):
                for label in list(trees) if i % 2 == 0 else list(reversed(trees)):
                    rows[label].append(
                        bench_shim.pip_wheel_cpu(projects[label], work / "o", *settings, tree=trees[label])[0]
                    )
        finally:
            if saved is None:
                os.environ.pop("XDG_CACHE_HOME", None)
            else:
                os.environ["XDG_CACHE_HOME"] = saved
    print(f"HIP sample, pip wheel --no-build-isolation for {targets}, {runs} rounds side by side, the folder in place")
    for label, values in rows.items():
        print(f"  {label:28} {statistics.median(values) * 1000:8.0f} ms")
    diff = [(a - b) * 1000 for a, b in zip(rows["this tree"], rows["before"])]
    print(
        f"  this tree - before, paired   {statistics.median(diff):8.0f} ms (faster in {sum(d < 0 for d in diff)} "
        f"of {runs} rounds)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--before", type=Path, metavar="TREE", help="another checkout's shim, side by side")
    ap.add_argument("--targets", default="gfx90a")
    ap.add_argument("--hip-wheel", type=int, default=0, metavar="N", help="also N rounds of the HIP sample's pip wheel")
    args = ap.parse_args()
    import compileall

    trees = {"before": args.before} if args.before else {}
    trees["this tree"] = ROOT
    for tree in trees.values():
        compileall.compile_dir(str(tree / "rocm_build_backend"), quiet=1)
    found = shutil.which("hipcc")
    rows: dict[str, list[float]] = {f"{label}, {kind}": [] for kind in ("in place", "first") for label in trees}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        caches = {label: work / f"cache-{i}" for i, label in enumerate(trees)}
        for label, tree in trees.items():  # the folder in place, and each tree's bytecode warm
            one(tree, caches[label], args.targets, work / "record")
        order = list(trees.items())
        for i in range(args.runs):
            for label, tree in order[i % len(order) :] + order[: i % len(order)]:
                rows[f"{label}, in place"].append(one(tree, caches[label], args.targets, work / "record"))
                fresh = work / f"fresh-{i}-{len(rows[f'{label}, first'])}"
                rows[f"{label}, first"].append(one(tree, fresh, args.targets, work / "record"))
                shutil.rmtree(fresh)
        views = sorted(p for p in caches[next(iter(trees))].rglob("llvm/bin") if p.is_dir())
        size = len(os.listdir(views[0])) if views else 0
    print(
        f"builder.enforce.install('amd', {args.targets!r}) in a fresh interpreter, median of {args.runs} runs, "
        f"the order turned each run; hipcc {found or 'not found'}, its clang folder's view {size} entries; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end"
    )
    base = {kind: statistics.median(rows[f"{next(iter(trees))}, {kind}"]) for kind in ("in place", "first")}
    print(f"  {'':28} {'ms':>8} {'ratio':>6}")
    for label, values in rows.items():
        kind = label.rsplit(", ", 1)[1]
        m = statistics.median(values)
        print(f"  {label:28} {m:8.1f} {m / base[kind]:6.3f}")
    if args.hip_wheel and args.before:
        hip_wheel(args.hip_wheel, args.before, args.targets)


if __name__ == "__main__":
    main()
