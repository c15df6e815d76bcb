"""Hostile wheels against ``check``, ``index`` and ``cache list``: time and peak memory by input size.

Generators (each a wheel of a few KB to a few MB on disk):

- ``metadata-bomb``: METADATA of N MiB of zeros (deflate makes it about N KiB);
- ``stamp-bomb``: the stamp ``rocm_build.json`` inflating to N MiB;
- ``damaged``: N wheels whose METADATA deflate stream is overwritten (one bad wheel per copy).

Each row runs the CLI in a fresh process and reports wall time and that process's peak
resident memory (``ru_maxrss`` from ``wait4``). With the size limits (METADATA 16 MiB, stamp 1 MiB, counted as
they inflate) memory stays flat however far the member inflates, and time grows at most with
the bytes actually read.

    python bench/bench_wheel_hostile.py [--sizes 1,16,64,256,1024] [--dir DIR]

Prints a table; measures, asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))

from helpers import damage_member, make_wheel  # noqa: E402


def bomb(folder: Path, member: str, mib: int) -> Path:
    """A wheel whose ``member`` inflates to ``mib`` MiB (written in chunks, never held whole)."""
    whl = make_wheel(folder, "bomb", "1.0", device={"bomb/_k.so": ["gfx90a"]})
    name = f"bomb-1.0.dist-info/{member}"
    with zipfile.ZipFile(whl) as zf:
        members = [(i.filename, zf.read(i)) for i in zf.infolist() if i.filename != name]
    head = b"Metadata-Version: 2.1\nName: bomb\nVersion: 1.0\n\n" if member == "METADATA" else b"{"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in members:
            zf.writestr(n, d)
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(info, "w", force_zip64=True) as w:
            w.write(head)
            zero = bytes(1 << 20)
            for _ in range(mib):
                w.write(zero)
    return whl


def damaged(folder: Path, n: int) -> None:
    for i in range(n):
        whl = make_wheel(folder, f"bad{i}", "1.0", device={f"bad{i}/_k.so": ["gfx90a"]})
        damage_member(whl, f"bad{i}-1.0.dist-info/METADATA", "corrupt")


def run(args: list[str]) -> tuple[float, float, int]:
    """(seconds, peak MiB of that child process, exit code) of one CLI run."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "rocm_build_backend", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t, usage.ru_maxrss / 1024, proc.returncode


def pip_cache(root: Path, wheels: Path) -> Path:
    cache = root / "pip-cache"
    for i, whl in enumerate(sorted(wheels.glob("*.whl"))):
        folder = cache / "wheels" / "ab" / "cd" / "ef" / f"{i:056x}"
        folder.mkdir(parents=True)
        shutil.copy(whl, folder / whl.name)
    return cache


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,16,64,256,1024", help="inflated sizes in MiB")
    ap.add_argument("--dir", help="where to build the inputs (default: a temporary folder)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench-wheel-hostile-", dir=args.dir))
    print(f"{'generator':<16}{'size':>8}{'on disk':>10}{'verb':>8}{'seconds':>9}{'peak MiB':>10}{'exit':>6}")
    try:
        rows = [("metadata-bomb", "METADATA", s) for s in sizes] + [("stamp-bomb", "rocm_build.json", s) for s in sizes]
        for gen, member, size in rows:
            folder = work / f"{gen}-{size}"
            whl = bomb(folder / "wheels", member, size)
            disk = whl.stat().st_size
            cache = pip_cache(folder, folder / "wheels")
            for verb, cmd in (("check", ["check", "--targets", "gfx90a", whl]),
                              ("index", ["index", "--targets", "gfx90a", folder / "wheels", "-o", folder / "out"]),
                              ("cache", ["cache", "list", "--targets", "gfx90a", "--cache-dir", cache])):
                secs, peak, code = run([str(c) for c in cmd])
                print(f"{gen:<16}{size:>6}Mi{disk / 1024:>8.0f}Ki{verb:>8}{secs:>9.2f}{peak:>10.0f}{code:>6}")
            shutil.rmtree(folder)
        for n in (10, 100, 1000):
            folder = work / f"damaged-{n}"
            damaged(folder / "wheels", n)
            secs, peak, code = run(["index", "--targets", "gfx90a", str(folder / "wheels"), "-o", str(folder / "out")])
            print(f"{'damaged':<16}{n:>6}wh{'':>10}{'index':>8}{secs:>9.2f}{peak:>10.0f}{code:>6}")
            shutil.rmtree(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
