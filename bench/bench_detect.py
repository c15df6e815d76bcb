"""How long does host GPU detection take? The KFD sysfs path against a live-style rocminfo run.

The machine is the same in every row: eight MI300X GPUs and two CPU nodes. The sysfs rows read
a fake KFD topology built from the captured MI300X and CPU ``properties`` files; the rocminfo
rows run a fake ``rocminfo`` program that prints the captured 8-GPU rocminfo output, so the
cost is a real process spawn plus parsing, as on a real machine (where rocminfo also has to
start the ROCm runtime, so real runs are slower still).

    python bench/bench_detect.py [--repeat N] [--hostile]

Prints one table; measures, asserts nothing. ``--hostile`` adds a second table: time and peak
memory of detection against hostile inputs of growing size (a detection program printing
megabytes or forever, a rocminfo paste of megabytes on one line), each in a fresh process.
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = REPO / "tests" / "data" / "detect"
sys.path.insert(0, str(REPO))

from rocm_build_backend.gpu import detect as D  # noqa: E402
from rocm_build_backend.gpu.amd.rocminfo import parse_rocminfo  # noqa: E402


def build_tree(root: Path) -> None:
    nodes = root / "sys" / "class" / "kfd" / "kfd" / "topology" / "nodes"
    cpu = (DATA / "cpu_node0.kfd-properties.txt").read_text()
    gpu = (DATA / "mi300x_gfx942.kfd-properties.txt").read_text()
    for node in range(10):
        (nodes / str(node)).mkdir(parents=True)
        (nodes / str(node) / "properties").write_text(cpu if node < 2 else gpu)


def fake_rocminfo(bindir: Path) -> None:
    bindir.mkdir()
    script = bindir / "rocminfo"
    cat = shutil.which("cat") or "cat"
    script.write_text(f'#!/bin/sh\nexec {cat} "{DATA / "mi300x_8gpu_xeon.rocminfo.txt"}"\n')
    script.chmod(0o755)


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def cold_sysfs(root: Path, env: dict[str, str]) -> tuple[float, float]:
    """In a fresh interpreter: (import of the module, first detect() incl. loading the table)."""
    code = (
        "import time; t0 = time.perf_counter()\n"
        "from rocm_build_backend.gpu.detect import detect\n"
        "t1 = time.perf_counter()\n"
        f"d = detect(root={str(root)!r}, env={{}})\n"
        "t2 = time.perf_counter()\n"
        "assert len(d.devices) == 8, d\n"
        "print(t1 - t0, t2 - t1)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    first, second = out.stdout.split()
    return float(first), float(second)


def cold_rows(sysfs: Path, pycache: Path) -> list[tuple[str, list[float]]]:
    # bytecode cached in a private folder, as an installed package has it; the first run fills it
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    runs = [cold_sysfs(sysfs, env) for _ in range(6)][1:]
    return [
        ("sysfs, 8 GPUs, first call in a fresh process", [r[1] for r in runs]),
        ("import rocm_build_backend.gpu.detect (fresh process)", [r[0] for r in runs]),
    ]


HOSTILE_CHILD = """
import resource, sys, time
from pathlib import Path
from rocm_build_backend.gpu.detect import detect
mode, arg = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if mode == "live":
    d = detect(root=Path(arg), env={"PATH": sys.argv[3]}, timeout=float(sys.argv[4]))
else:
    d = detect(recorded={"rocminfo": Path(arg).read_text()}, env={})
took = time.perf_counter() - t0
print(took, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, len(d.devices),
      d.seen.get("rocminfo", "")[:60].replace(" ", "_"))
"""


def hostile_rows(tmp: Path) -> list[tuple[str, str, float, float, str]]:
    """(generator, input size, seconds, peak MiB, what the probe said) per hostile input."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    empty = tmp / "hostile-root"
    (empty / "sys").mkdir(parents=True)
    rows = []
    yes, head = shutil.which("yes") or "yes", shutil.which("head") or "head"

    def child(*argv: str) -> tuple[float, float, str]:
        out = subprocess.run(
            [sys.executable, "-c", HOSTILE_CHILD, *argv],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        ).stdout.split()
        return float(out[0]), float(out[1]), out[3].replace("_", " ") if len(out) > 3 else ""

    for mib in (1, 3, 16, 64):
        bindir = tmp / f"bin{mib}"
        bindir.mkdir()
        script = bindir / "rocminfo"
        script.write_text(f"#!/bin/sh\n{yes} '  Name: gfx90a' | {head} -c {mib * 2**20}\n")
        script.chmod(0o755)
        rows.append(
            ("program prints 'Name: gfx90a' lines", f"{mib} MiB", *child("live", str(empty), str(bindir), "30"))
        )
    bindir = tmp / "binyes"
    bindir.mkdir()
    (bindir / "rocminfo").write_text(f"#!/bin/sh\nexec {yes} '  Name: gfx90a'\n")
    (bindir / "rocminfo").chmod(0o755)
    rows.append(("program prints them forever", "endless", *child("live", str(empty), str(bindir), "30")))
    real = " ".join((DATA / "mi300x_8gpu_xeon.rocminfo.txt").read_text().splitlines())
    for copies in (1, 8, 32, 100):
        path = tmp / f"paste{copies}.txt"
        path.write_text(real * copies)
        rows.append(
            (
                "rocminfo pasted on one line, recorded",
                f"{len(real) * copies / 2**20:.2f} MiB",
                *child("recorded", str(path)),
            )
        )
    return rows


def print_hostile(rows: list[tuple[str, str, float, float, str]]) -> None:
    print()
    print(f"{'hostile input':40} {'size':>10} {'seconds':>8} {'peak MiB':>9}  probe said")
    for name, size, took, peak, said in rows:
        print(f"{name:40} {size:>10} {took:>8.2f} {peak:>9.0f}  {said}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--hostile", action="store_true", help="also time hostile inputs (a minute or two)")
    args = parser.parse_args()
    hostile: list[tuple[str, str, float, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sysfs, empty, bindir = tmp / "sysfs", tmp / "empty", tmp / "bin"
        build_tree(sysfs)
        (empty / "sys").mkdir(parents=True)
        fake_rocminfo(bindir)
        env = {"PATH": str(bindir)}
        text = (DATA / "mi300x_8gpu_xeon.rocminfo.txt").read_text()

        def sysfs_detect():
            d = D.detect(root=sysfs, env={})
            assert d.source == "kfd" and len(d.devices) == 8

        def rocminfo_detect():
            d = D.detect(root=empty, env=env)
            assert d.source == "rocminfo" and len(d.devices) == 8

        def rocminfo_parse():
            assert len(parse_rocminfo(text).devices) == 8

        runs = max(20, args.repeat // 10)
        rows = [
            ("sysfs, 8 GPUs, in-process (warm)", timed(sysfs_detect, args.repeat)),
            *cold_rows(sysfs, tmp / "pycache"),
            ("rocminfo text, parse only", timed(rocminfo_parse, args.repeat)),
            ("fake rocminfo run + parse (live-style)", timed(rocminfo_detect, runs)),
        ]
        real = shutil.which("rocminfo")
        if real:

            def real_run():
                subprocess.run([real], capture_output=True, timeout=30, check=False)

            rows.append(("this machine's real rocminfo, run only", timed(real_run, 5)))
        if args.hostile:
            hostile = hostile_rows(tmp)

    base = statistics.median(rows[0][1])
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; median of the runs shown")
    print(f"{'path':50} {'runs':>5} {'median':>11} {'vs sysfs':>9}")
    for name, times in rows:
        med = statistics.median(times)
        print(f"{name:50} {len(times):>5} {med * 1000:>8.3f} ms {med / base:>8.1f}x")
    if hostile:
        print_hostile(hostile)


if __name__ == "__main__":
    main()
