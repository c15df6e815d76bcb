"""Benchmark: ``audit`` of real GPU wheels against inflating their members once.

    python bench/bench_real_audit.py [--rounds 5] [--cache DIR] [--profile] [--out FILE]

The wheels (pinned below by name, version, file name and sha256; 10 wheels, 0.92 GB, AMD and
NVIDIA, each located through pip's configured index and downloaded once by
``tests/realinputs.py`` into the cache folder, default ``~/.cache/rocm-build-backend-bench/real``).

Two figures, each measured side by side in one run, the rows alternated ``--rounds`` times
(medians), page cache warm (each command ran once before):

1. ``audit`` of the cupy-rocm-7-0 wheel as a command (``python -m rocm_build_backend audit
   WHEEL``, interpreter start included) against one command that inflates every member of it
   once with ``zipfile`` (interpreter start included too; its in-process time is shown beside);
2. ``audit`` of each of the 10 wheels, as 10 commands one after the other, against one command
   that inflates every member of all 10 once.

``--profile``: per wheel, in process, the members, the bytes the libraries hold, the bytes
the audit inflated (zip members' deflate output) and read through its sources (every
``read`` the readers make), the audit's seconds and its targets; nothing timed side by side.
Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (distribution, version, file name, sha256)
WHEELS = [
    (
        "cupy-rocm-7-0",
        "14.2.0",
        "cupy_rocm_7_0-14.2.0-cp311-cp311-manylinux2014_x86_64.whl",
        "8e824c1c2fc386e72fe8ae69ab7c273326b17650160400f8f4ea2c932189ed1a",
    ),
    (
        "cupy-rocm-5-0",
        "13.3.0",
        "cupy_rocm_5_0-13.3.0-cp311-cp311-manylinux2014_x86_64.whl",
        "00907762735d182737bee317f532dc381337fb8e978bd846acb268df463b2d7b",
    ),
    (
        "bitsandbytes",
        "0.50.2",
        "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl",
        "55348a9a4a21bfd99cf8c7b32fe67b4030ae5c2a05738e03c1747f65fa6ec283",
    ),
    (
        "cupy-cuda13x",
        "14.2.0",
        "cupy_cuda13x-14.2.0-cp311-cp311-manylinux2014_x86_64.whl",
        "f94843e54500a9c8c169135f79572bfaba946efe4f7178e834c227280c1b0c12",
    ),
    (
        "cupy-cuda12x",
        "14.2.0",
        "cupy_cuda12x-14.2.0-cp311-cp311-manylinux2014_x86_64.whl",
        "5fe2366cc5c61a7ee4a527ce1e8951cb89092d0fb0b5830623cf114d1942c585",
    ),
    (
        "cupy-cuda11x",
        "13.6.0",
        "cupy_cuda11x-13.6.0-cp311-cp311-manylinux2014_x86_64.whl",
        "6fbbc042580d3c6170a449a2643235bef16e74cc997a143767c47d4d6ce95ed2",
    ),
    (
        "nvidia-cufft",
        "12.0.0.61",
        "nvidia_cufft-12.0.0.61-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "6c44f692dce8fd5ffd3e3df134b6cdb9c2f72d99cf40b62c32dde45eea9ddad3",
    ),
    (
        "nvidia-cusparse",
        "12.6.3.3",
        "nvidia_cusparse-12.6.3.3-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "2b3c89c88d01ee0e477cb7f82ef60a11a4bcd57b6b87c33f789350b59759360b",
    ),
    (
        "nvidia-curand-cu12",
        "10.3.10.19",
        "nvidia_curand_cu12-10.3.10.19-py3-none-manylinux_2_27_x86_64.whl",
        "49b274db4780d421bd2ccd362e1415c13887c53c214f0d4b761752b8f9f6aa1e",
    ),
    (
        "torchao",
        "0.18.0",
        "torchao-0.18.0-cp310-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "6540b148e40ba81cbd4de86392225a076a1591146e9cebb099b3b234ba9feebe",
    ),
]
INFLATE = """
import sys, time, zipfile
t = time.perf_counter()
for w in sys.argv[1:]:
    with zipfile.ZipFile(w) as zf:
        for info in zf.infolist():
            with zf.open(info) as f:
                while f.read(1 << 20):
                    pass
print(time.perf_counter() - t)
"""


def fetch(cache: Path) -> list[Path]:
    """The pinned wheels, each downloaded once through pip's configured index
    (``tests/realinputs.py``) and checked against its sha256."""
    sys.path.insert(0, str(ROOT / "tests"))
    from realinputs import CorpusError, pinned_file

    out = []
    for name, version, filename, sha256 in WHEELS:
        try:
            out.append(pinned_file({"name": name, "version": version, "filename": filename, "sha256": sha256}, cache))
        except CorpusError as exc:
            raise SystemExit(str(exc)) from None
    return out


def env(tree: Path = ROOT) -> dict[str, str]:
    """``tree`` first on the path (the commands also run in it: Python puts the current folder
    first); bytecode used, as an installed package has it."""
    e = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    e["PYTHONPATH"] = str(tree)
    return e


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_audit(wheel: Path, tree: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one ``audit`` command."""
    t, c = time.perf_counter(), _cpu()
    subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", "audit", str(wheel)],
        cwd=tree,
        stdout=subprocess.DEVNULL,
        env=env(tree),
    )  # exit 3 (cannot tell) is an answer too
    return time.perf_counter() - t, _cpu() - c


def run_inflate(wheels: list[Path]) -> tuple[float, float, float]:
    """(wall seconds of the command, its CPU seconds, seconds inflating inside it)."""
    t, c = time.perf_counter(), _cpu()
    res = subprocess.run(
        [sys.executable, "-c", INFLATE, *map(str, wheels)], capture_output=True, text=True, check=True, env=env()
    )
    return time.perf_counter() - t, _cpu() - c, float(res.stdout)


Rows = dict[str, list[tuple[float, ...]]]


def side_by_side(wheels: list[Path], trees: dict[str, Path], rounds: int) -> Rows:
    """Each round: the floors, then each tree's audits, in an order that turns every round."""
    rows: Rows = {}
    steps: list[tuple[str, object]] = [("floor", None)] + list(trees.items())
    for w in wheels:  # warm: the page cache, bytecode
        for tree in trees.values():
            run_audit(w, tree)
    run_inflate(wheels)
    for i in range(rounds):
        for label, tree in steps[i % len(steps) :] + steps[: i % len(steps)]:
            if tree is None:
                rows.setdefault("floor1", []).append(run_inflate(wheels[:1]))
                rows.setdefault("floor10", []).append(run_inflate(wheels))
            else:
                assert isinstance(tree, Path)
                rows.setdefault(f"{label}1", []).append(run_audit(wheels[0], tree))
                each = [run_audit(w, tree) for w in wheels]
                rows.setdefault(f"{label}10", []).append((sum(x[0] for x in each), sum(x[1] for x in each)))
        t, c = time.perf_counter(), _cpu()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        rows.setdefault("python", []).append((time.perf_counter() - t, _cpu() - c))
    return rows


def profile_child(wheel: str) -> None:
    """One wheel in process (the tree on PYTHONPATH): bytes inflated and read, seconds (json)."""
    from rocm_build_backend.binary import audit as audit_mod
    from rocm_build_backend.binary import budget as budget_mod

    counts = {"inflated": 0, "read": 0, "reads": 0}
    sources: list[object] = []
    real_member_source = audit_mod.member_source
    real_read = budget_mod.BudgetSource.read

    def member_source(*args: object) -> object:
        src = real_member_source(*args)  # type: ignore[arg-type]
        sources.append(src)
        return src

    def read(self: object, offset: int, n: int) -> bytes:
        data = real_read(self, offset, n)  # type: ignore[arg-type]
        counts["read"] += len(data)
        counts["reads"] += 1
        return data

    audit_mod.member_source = member_source  # type: ignore[assignment]
    budget_mod.BudgetSource.read = read  # type: ignore[method-assign]
    t = time.perf_counter()
    report = audit_mod.audit_wheel(wheel)
    seconds = time.perf_counter() - t
    counts["inflated"] = sum(getattr(s, "inflated", 0) for s in sources)
    with zipfile.ZipFile(wheel) as zf:
        infos = zf.infolist()
    libs = {f.path for f in report.device_files}
    out = {
        "seconds": seconds,
        "members": len(infos),
        **counts,
        "usize": sum(i.file_size for i in infos),
        "device_usize": sum(i.file_size for i in infos if i.filename in libs),
        "device_files": len(libs),
        "targets": report.targets,
        "exit": report.exit_code,
    }
    print(json.dumps(out))


def profile(wheels: list[Path], trees: dict[str, Path]) -> list[str]:
    lines = [
        f"{'wheel':<30} {'tree':<7} {'members':>7} {'MiB':>7} {'inflated':>9} {'x':>5} "
        f"{'read MiB':>9} {'reads':>7} {'files':>6} {'seconds':>8}"
    ]
    for w in wheels:
        for label, tree in trees.items():
            res = subprocess.run(
                [sys.executable, __file__, "--profile-child", str(w)],
                cwd=tree,
                capture_output=True,
                text=True,
                check=True,
                env=env(tree),
            )
            d = json.loads(res.stdout)
            lines.append(
                f"{'-'.join(w.name.split('-')[:2]):<30} {label:<7} {d['members']:>7} "
                f"{d['usize'] / 2**20:>7.1f} {d['inflated'] / 2**20:>9.1f} "
                f"{d['inflated'] / max(1, d['usize']):>5.2f} {d['read'] / 2**20:>9.1f} {d['reads']:>7} "
                f"{d['device_files']:>6} {d['seconds']:>8.2f}"
            )
    return lines


def report(rows: Rows, trees: dict[str, Path], wheels: list[Path], rounds: int) -> list[str]:
    def med(key: str, i: int) -> float:
        return statistics.median(r[i] for r in rows[key])

    size = sum(w.stat().st_size for w in wheels)
    out = [
        f"median of {rounds} rounds (order turned each round), {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f} at the end; python -c pass: {med('python', 0) * 1000:.0f} ms wall, "
        f"{med('python', 1) * 1000:.0f} ms CPU",
        f"{'':58} {'wall s':>7} {'CPU s':>7} {'x wall':>7} {'x CPU':>7}",
    ]
    for n, title in (
        ("1", f"1. cupy-rocm-7-0 ({wheels[0].stat().st_size / 1e6:.0f} MB wheel)"),
        ("10", f"2. {len(wheels)} real GPU wheels ({size / 1e9:.2f} GB)"),
    ):
        out.append(title)
        fw, fc = med("floor" + n, 0), med("floor" + n, 1)
        out.append(
            f"   {'inflate every member once (one command)':<55} {fw:7.2f} {fc:7.2f}"
            f"   (inflating inside it: {med('floor' + n, 2):.2f} s)"
        )
        for label in trees:
            what = f"audit ({label}), {'one command' if n == '1' else f'{len(wheels)} commands'}"
            w, c = med(label + n, 0), med(label + n, 1)
            out.append(f"   {what:<55} {w:7.2f} {c:7.2f} {w / fw:7.2f} {c / fc:7.2f}")
    out.append("rounds (wall s): " + "; ".join(f"{k} " + " ".join(f"{x[0]:.2f}" for x in v) for k, v in rows.items()))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "rocm-build-backend-bench" / "real")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--before", type=Path, metavar="TREE", help="another checkout of the project, measured side by side as 'before'"
    )
    ap.add_argument("--profile-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.profile_child:
        profile_child(args.profile_child)
        return 0
    wheels = fetch(args.cache)
    trees = {"before": args.before, "now": ROOT} if args.before else {"now": ROOT}
    for tree in trees.values():
        compileall.compile_dir(str(tree / "rocm_build_backend"), quiet=1)
    if args.profile:
        lines = profile(wheels, trees)
    else:
        lines = report(side_by_side(wheels, trees, args.rounds), trees, wheels, args.rounds)
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
