"""What the shim costs, and what it saves. Prints a table; asserts nothing.

    python bench/bench_shim.py [--runs N] [--before TREE [--paired N]] [--no-hip]

1. Building the pure-Python sample through the shim vs its wrapped backend alone: same
   frontend (pip wheel --no-build-isolation), runs alternated, medians compared, wall time and
   CPU time (user + sys of pip and its hook processes: steadier on a shared machine).
   ``--before TREE``: the shim from another checkout too, in the same alternation.
   ``--paired N``: then N rounds of only the two shims, side by side, and the median of each
   round's difference (this tree - before): on a machine whose speed drifts by more than the
   difference, steadier than comparing medians of separate runs.
2. `import rocm_build_backend`, from `python -X importtime`, median of many fresh interpreters.
3. The HIP sample for one target vs the eight-target list PyTorch used to default to (those
   the installed compiler accepts): wall time of the build through the shim and .so size.
"""

from __future__ import annotations

import argparse
import os
import resource
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_projects"
OLD_DEFAULT = "gfx900;gfx906;gfx908;gfx90a;gfx1030;gfx1100;gfx1101;gfx940"


def env(tree: Path | None = None) -> dict[str, str]:
    # as installed by pip: bytecode compiled (setuptools' is; a PYTHONDONTWRITEBYTECODE shell
    # would otherwise make only our modules compile from source on every hook call)
    e = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ROCM_BUILD_BACKEND_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    if tree is not None:
        e["PYTHONPATH"] = str(tree)
    for k in ("PYTORCH_ROCM_ARCH", "MAX_JOBS", "CMAKE_ARGS", "HIPCC_COMPILE_FLAGS_APPEND"):
        e.pop(k, None)
    e["PIP_NO_CACHE_DIR"] = "1"
    e["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return e


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def pip_wheel(project: Path, out: Path, *settings: str, tree: Path | None = None) -> float:
    return pip_wheel_cpu(project, out, *settings, tree=tree)[0]


def pip_wheel_cpu(project: Path, out: Path, *settings: str, tree: Path | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of pip and its hook processes); run from ``project``'s parent,
    so ``tree`` (on PYTHONPATH) is the shim that runs."""
    shutil.rmtree(project / "build", ignore_errors=True)
    for p in project.glob("*.egg-info"):
        shutil.rmtree(p)
    argv = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-build-isolation",
        "--no-deps",
        "-w",
        str(out),
        str(project),
    ]
    for s in settings:
        argv += ["-C", s]
    t, c = time.perf_counter(), _cpu()
    subprocess.run(argv, check=True, env=env(tree), capture_output=True, cwd=project.parent)
    return time.perf_counter() - t, _cpu() - c


def overhead(runs: int, work: Path, trees: dict[str, Path]) -> dict[str, list[tuple[float, float]]]:
    """Each round: setuptools alone, then the shim from each tree, the order turned every round."""
    plain = work / "plain"
    shutil.copytree(SAMPLES / "pure_python", plain)
    text = (plain / "pyproject.toml").read_text()
    (plain / "pyproject.toml").write_text(
        text.replace('build-backend = "rocm_build_backend"', 'build-backend = "setuptools.build_meta"')
    )
    steps: list[tuple[str, Path, tuple[str, ...], Path]] = [("setuptools alone", plain, (), ROOT)]
    for label, tree in trees.items():
        shim = work / f"shim-{label}"
        shutil.copytree(SAMPLES / "pure_python", shim)
        steps.append((label, shim, ("rocm-build-backend.targets=gfx90a",), tree))
    for _label, project, settings, tree in steps:  # warm each once
        pip_wheel_cpu(project, work / "o", *settings, tree=tree)
    rows: dict[str, list[tuple[float, float]]] = {label: [] for label, *_ in steps}
    for i in range(runs):
        for label, project, settings, tree in steps[i % len(steps) :] + steps[: i % len(steps)]:
            rows[label].append(pip_wheel_cpu(project, work / "o", *settings, tree=tree))
    return rows


def paired(runs: int, work: Path, before: Path) -> dict[str, list[tuple[float, float]]]:
    """Rounds of the pure sample through the shim of ``before`` and of this tree, the order
    turned each round."""
    trees = {"before": before, "this tree": ROOT}
    projects = {label: work / f"paired-{i}" for i, label in enumerate(trees)}
    for label, tree in trees.items():
        shutil.copytree(SAMPLES / "pure_python", projects[label])
        pip_wheel_cpu(projects[label], work / "o", "rocm-build-backend.targets=gfx90a", tree=tree)
    rows: dict[str, list[tuple[float, float]]] = {label: [] for label in trees}
    for i in range(runs):
        for label in list(trees) if i % 2 == 0 else list(reversed(trees)):
            rows[label].append(
                pip_wheel_cpu(projects[label], work / "o", "rocm-build-backend.targets=gfx90a", tree=trees[label])
            )
    return rows


def import_time(runs: int) -> tuple[float, float]:
    def one(module: str) -> float:
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            capture_output=True,
            text=True,
            check=True,
            env=env(),
        ).stderr
        for line in out.splitlines():
            m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S+)$", line)
            if m and m.group(2) == module:
                return int(m.group(1)) / 1000
        raise RuntimeError(out)

    return (
        statistics.median(one("rocm_build_backend") for _ in range(runs)),
        statistics.median(one("setuptools.build_meta") for _ in range(max(3, runs // 4))),
    )


def accepted(targets: str) -> list[str]:
    from rocm_build_backend.gpu.targets import parse_targets
    from rocm_build_backend.gpu.amd.toolchain import check_targets, find_compiler

    compiler = find_compiler("auto")
    verdict = check_targets(compiler, parse_targets(targets))
    return [t for t, why in verdict.items() if why is None]


def hip_build(work: Path, targets: list[str], runs: int) -> tuple[float, int]:
    project = work / f"hip-{len(targets)}"
    shutil.copytree(SAMPLES / "setuptools_hip", project)
    times = []
    for _ in range(runs):
        out = work / f"out-{len(targets)}"
        shutil.rmtree(out, ignore_errors=True)
        times.append(
            pip_wheel(project, out, "rocm-build-backend.targets=" + ";".join(targets), "rocm-build-backend.stale=clean")
        )
    wheel = next(out.glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        size = sum(i.file_size for i in zf.infolist() if i.filename.endswith(".so"))
    return statistics.median(times), size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--before", type=Path, metavar="TREE", help="another checkout's shim, side by side")
    ap.add_argument("--paired", type=int, default=0, metavar="N", help="with --before: N rounds of the two shims alone")
    ap.add_argument("--no-hip", action="store_true", help="only the overhead and the import")
    args = ap.parse_args()
    import compileall

    trees = {"through the shim (before)": args.before} if args.before else {}
    trees["through the shim"] = ROOT
    for tree in trees.values():
        compileall.compile_dir(str(tree / "rocm_build_backend"), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rows = overhead(args.runs, work, trees)
        pairs = paired(args.paired, work, args.before) if args.paired and args.before else None
        imp, setuptools_imp = import_time(args.runs * 3)
        if not args.no_hip:
            eight = accepted(OLD_DEFAULT)
            one_t, one_size = hip_build(work, ["gfx90a"], max(3, args.runs // 3))
            all_t, all_size = hip_build(work, eight, max(3, args.runs // 3))
    print(
        f"pure-Python sample, pip wheel --no-build-isolation, median of {args.runs} runs, the order turned "
        f"each run; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end"
    )
    base_w = statistics.median(w for w, _ in rows["setuptools alone"])
    base_c = statistics.median(c for _, c in rows["setuptools alone"])
    print(f"  {'':28} {'wall ms':>8} {'ratio':>6} {'CPU ms':>8} {'ratio':>6}")
    for label, values in rows.items():
        w, c = statistics.median(x for x, _ in values), statistics.median(y for _, y in values)
        print(f"  {label:28} {w * 1000:8.0f} {w / base_w:6.3f} {c * 1000:8.0f} {c / base_c:6.3f}")
    if pairs:
        print(
            f"the two shims alone, {args.paired} rounds side by side (this tree - before, median of each round's difference)"
        )
        for label, values in pairs.items():
            print(
                f"  {label:28} {statistics.median(w for w, _ in values) * 1000:8.0f}  "
                f"{'':6} {statistics.median(c for _, c in values) * 1000:8.0f}"
            )
        wall = [(a[0] - b[0]) * 1000 for a, b in zip(pairs["this tree"], pairs["before"])]
        cpu = [(a[1] - b[1]) * 1000 for a, b in zip(pairs["this tree"], pairs["before"])]
        print(
            f"  {'difference, paired':28} {statistics.median(wall):8.0f}  {'':6} {statistics.median(cpu):8.0f}  "
            f"(this tree faster in {sum(d < 0 for d in wall)} of {len(wall)} rounds)"
        )
    print(f"import rocm_build_backend      {imp:6.2f} ms  (setuptools.build_meta: {setuptools_imp:.1f} ms)")
    if args.no_hip:
        return
    print(
        f"HIP sample, one target vs the old eight-target default ({len(eight)} the compiler accepts: {' '.join(eight)})"
    )
    print(f"  gfx90a only          {one_t * 1000:8.0f} ms   .so {one_size:7d} bytes")
    print(f"  {len(eight)} targets            {all_t * 1000:8.0f} ms   .so {all_size:7d} bytes")
    print(
        f"  one target saves     {(1 - one_t / all_t) * 100:5.1f}% of the build time, {(1 - one_size / all_size) * 100:.1f}% of the .so"
    )


if __name__ == "__main__":
    main()
