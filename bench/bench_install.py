"""What does ``rocm-build-backend install --dry-run`` add to the pip run it wraps?

Times, side by side, with warm caches (each command ran once before timing):

- ``pip wheel``: ``python -m pip wheel --wheel-dir TMP PIP_ARGS``, the resolve and download (or
  copy, or cache hit) that ``install`` starts with;
- ``install --dry-run``: ``python -m rocm_build_backend install --dry-run --targets T -- PIP_ARGS``
  (the same pip run, then every wheel checked; nothing rebuilt when every wheel loads).

The target (issue 13) is at most 10% more than ``pip wheel``. Two cases:

- a real GPU wheel from a local folder (``--wheels DIR``, e.g. one holding
  ``cupy_rocm_7_0-*.whl``; ``--download NAME`` fetches one with pip first): no stamp, so its
  binaries are audited;
- ``--stamp``: the same wheels with a stamp written from their audit, as a wheel built through
  the shim has: ``install`` reads the stamp and audits nothing.

    python bench/bench_install.py --wheels ~/.cache/wheels --req cupy-rocm-7-0 --targets gfx942
    python bench/bench_install.py --download cupy-rocm-7-0 --req cupy-rocm-7-0 --targets gfx942

Prints a table; asserts nothing.
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


def timed(argv: list[str], env: dict[str, str], repeat: int) -> tuple[float, subprocess.CompletedProcess[str]]:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)  # warm
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times), proc


def stamped_copies(links: Path, dest: Path) -> Path:
    """Copies of every wheel in ``links`` with a stamp from their audit (untimed)."""
    sys.path.insert(0, str(ROOT))
    from rocm_build_backend._version import __version__
    from rocm_build_backend.wheel.reader import wheel_targets
    from rocm_build_backend.wheel.stamp import make_stamp, rewrite_wheel

    dest.mkdir(parents=True, exist_ok=True)
    for wheel in sorted(links.glob("*.whl")):
        copy = dest / wheel.name
        shutil.copyfile(wheel, copy)
        facts = wheel_targets(copy)
        files = {f.path: {"targets": list(f.targets), "complete": list(f.complete)} for f in facts.files}
        stamp = make_stamp(
            requested=facts.targets,
            source="settings",
            audit_files=files,
            host_gpus=[],
            toolchain={},
            version=__version__,
        )
        rewrite_wheel(copy, stamp=stamp)
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheels", type=Path, help="a folder of wheels pip may install from (--find-links)")
    ap.add_argument("--download", nargs="*", default=[], help="pip download these (no deps) into the folder first")
    ap.add_argument("--req", action="append", default=[], help="a requirement to install (repeatable)")
    ap.add_argument("--targets", default="gfx942")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--stamp",
        action="store_true",
        help="serve copies of the wheels with a stamp written from their audit, as if built through the shim",
    )
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-install-"))
    links = args.wheels or work / "links"
    links.mkdir(parents=True, exist_ok=True)
    if args.download:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(links), *args.download], check=True
        )
    if args.stamp:
        links = stamped_copies(links, work / "stamped")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    pip_args = ["--no-index", "--find-links", str(links), "--no-deps", *args.req]
    if not args.req:
        ap.error("give --req")
    out = work / "out"
    pip = [sys.executable, "-m", "pip", "wheel", "--wheel-dir", str(out), *pip_args]
    ours = [
        sys.executable,
        "-m",
        "rocm_build_backend",
        "install",
        "--dry-run",
        "--targets",
        args.targets,
        "--",
        *pip_args,
    ]
    pip_s, pip_proc = timed(pip, env, args.repeat)
    ours_s, ours_proc = timed(ours, env, args.repeat)
    size = sum(p.stat().st_size for p in out.glob("*.whl")) / 2**20
    print(f"wheels: {', '.join(p.name for p in out.glob('*.whl'))} ({size:.1f} MiB)")
    print(f"{'pip wheel':<22}{pip_s:8.2f} s   exit {pip_proc.returncode}")
    print(
        f"{'install --dry-run':<22}{ours_s:8.2f} s   exit {ours_proc.returncode}   +{(ours_s / pip_s - 1) * 100:.0f}%"
    )
    print(ours_proc.stdout.strip())
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
