"""Hostile inputs against the wheel verbs: time and peak memory by input size.

Generators for ``check``, ``index`` and ``cache list`` (each a wheel of a few KB to a few MB):

- ``metadata-bomb``: METADATA of N MiB of zeros (deflate makes it about N KiB);
- ``stamp-bomb``: the stamp ``rocm_build.json`` inflating to N MiB;
- ``damaged``: N wheels whose METADATA deflate stream is overwritten (one bad wheel per copy).

With ``--new`` (``tests/hostile_gen.py``), the shapes of the verbs that write or run things:

- ``ccob-bomb``: a compressed bundle inflating to N MiB (``thin``, ``split``, ``index --split``);
- ``zeros-after-elf``: a real library followed by N MiB of zeros (``thin``, ``split``);
- ``deep-toml``: a pyproject.toml nesting arrays N deep (``configure``, ``plan``);
- ``spellings``: one library listed N times through symlinked folders (``check --env``);
- ``bad-variants``: N variant wheels of another shape beside a good one (``index --variants``);
- ``flood``: a ``--python`` that prints without end (``check --env``, ``install``), once.

Each row runs the CLI in a fresh process (``--repo``: the checkout whose code runs) and reports
wall time, that process's peak resident memory (``ru_maxrss`` from ``wait4``, children
included) and the exit status. With the limits (METADATA 16 MiB, stamp 1 MiB, a rewrite at
most 64x the wheel + 64 MiB, counted as they inflate) memory stays flat however far a member
inflates, and time grows at most with the bytes actually read. Rows past ``--timeout`` say so.

    python bench/bench_wheel_hostile.py [--sizes 1,16,64,256,1024] [--dir DIR] [--new] [--repo DIR]

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
sys.path.insert(0, str(REPO / "tests"))  # helpers, hostile_gen

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


CODE = REPO  # the checkout whose code runs (--repo)
TIMEOUT = 120.0
MEMORY = 4 << 30  # address space of each run: a run past it fails instead of swapping the machine


def _limit() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run(args: list[str], cwd: Path | None = None) -> tuple[float, float, int]:
    """(seconds, peak MiB of that child process and its children, exit code) of one CLI run;
    exit -9 when it ran past ``TIMEOUT``."""
    import signal

    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocm_build_backend", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(CODE)},
        cwd=cwd or CODE,  # not this folder: python -m puts the working folder first
        preexec_fn=_limit,
        start_new_session=True,
    )
    deadline = t + TIMEOUT
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.02)
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
    global CODE, TIMEOUT
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,16,64,256,1024", help="inflated sizes in MiB")
    ap.add_argument("--dir", help="where to build the inputs (default: a temporary folder)")
    ap.add_argument(
        "--new",
        action="store_true",
        help="the shapes of thin, split, configure, check --env, index --variants and install instead",
    )
    ap.add_argument("--repo", default=str(REPO), help="the checkout whose code runs (default: this one)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT)
    args = ap.parse_args()
    CODE, TIMEOUT = Path(args.repo).resolve(), args.timeout
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench-wheel-hostile-", dir=args.dir))
    if args.new:
        try:
            new_shapes(work, sizes)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    print(f"{'generator':<16}{'size':>8}{'on disk':>10}{'verb':>8}{'seconds':>9}{'peak MiB':>10}{'exit':>6}")
    try:
        rows = [("metadata-bomb", "METADATA", s) for s in sizes] + [("stamp-bomb", "rocm_build.json", s) for s in sizes]
        for gen, member, size in rows:
            folder = work / f"{gen}-{size}"
            whl = bomb(folder / "wheels", member, size)
            disk = whl.stat().st_size
            cache = pip_cache(folder, folder / "wheels")
            for verb, cmd in (
                ("check", ["check", "--targets", "gfx90a", whl]),
                ("index", ["index", "--targets", "gfx90a", folder / "wheels", "-o", folder / "out"]),
                ("cache", ["cache", "list", "--targets", "gfx90a", "--cache-dir", cache]),
            ):
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


# --------------------------------------------------------------------------- --new: the writers' shapes


def row(gen: str, size: str, disk: int, verb: str, result: tuple[float, float, int]) -> None:
    secs, peak, code = result
    said = "TIMEOUT" if code == -9 else str(code)
    print(f"{gen:<16}{size:>9}{disk / 1024:>9.0f}Ki{verb:>18}{secs:>9.2f}{peak:>10.0f}{said:>8}", flush=True)


def venv(folder: Path) -> tuple[Path, Path]:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True)
    (site,) = (folder / "lib").glob("python3*/site-packages")
    return folder / "bin" / "python", site


def new_shapes(work: Path, sizes: list[int]) -> None:
    import json

    import hostile_gen as G

    print(f"{'generator':<16}{'size':>9}{'on disk':>11}{'verb':>18}{'seconds':>9}{'peak MiB':>10}{'exit':>8}")
    for mib in sizes:
        for gen, make in (("ccob-bomb", G.ccob_bomb_wheel), ("zeros-after-elf", G.zeros_after_elf_wheel)):
            folder = work / f"{gen}-{mib}"
            whl = make(folder / "wheels", mib * G.MIB)
            verbs = [
                ("thin", ["thin", whl, "--targets", "gfx942", "--outdir", folder / "thin"]),
                ("split", ["split", whl, "--outdir", folder / "split"]),
            ]
            if gen == "ccob-bomb":  # beside a wheel that splits: the bomb is skipped, the other indexed
                G.fat_wheel(folder / "wheels")
                verbs.append(("index --split", ["index", "--split", folder / "wheels", "-o", folder / "index"]))
            for verb, cmd in verbs:
                row(gen, f"{mib}Mi", whl.stat().st_size, verb, run([str(c) for c in cmd]))
            shutil.rmtree(folder)
    for depth in (1000, 10_000, 100_000):
        folder = work / f"deep-{depth}"
        folder.mkdir()
        (folder / "pyproject.toml").write_text(G.deep_toml(depth, "array"))
        for verb in ("configure", "plan"):
            row("deep-toml", str(depth), (folder / "pyproject.toml").stat().st_size, verb, run([verb, str(folder)]))
        shutil.rmtree(folder)
    for n in (2000, 20_000, 200_000):
        folder = work / f"spell-{n}"
        python, site = venv(folder / "venv")
        G.spellings(site, n)
        disk = (next(site.glob("spelled-*.dist-info")) / "RECORD").stat().st_size
        row(
            "spellings",
            str(n),
            disk,
            "check --env",
            run(["check", "--env", str(python), "--targets", "gfx942", "--no-cache"]),
        )
        shutil.rmtree(folder)
    for n in (10, 100):
        folder = work / f"variants-{n}"
        data = G.variant_json("gfx942", {"amd": {"gfx_arch": ["gfx942"]}})
        code = (G.DATA / "amdgpu_gfx942_cov5.hsaco").read_bytes()
        G.variant_wheel(folder / "wheels", "good", "1.0", "gfx942", data, members={"good/k.hsaco": code})
        for i in range(n):
            bad = json.loads(json.dumps(data))
            bad["default-priorities"] = [i]
            G.variant_wheel(folder / "wheels", f"bad{i}", "1.0", "gfx942", bad, members={f"bad{i}/k.hsaco": code})
        disk = sum(p.stat().st_size for p in (folder / "wheels").iterdir())
        row(
            "bad-variants",
            str(n),
            disk,
            "index --variants",
            run(["index", "--variants", str(folder / "wheels"), "-o", str(folder / "out")]),
        )
        shutil.rmtree(folder)
    folder = work / "flood"
    flood = G.program(folder, "python3", G.FLOOD)
    row("flood", "-", flood.stat().st_size, "check --env", run(["check", "--env", str(flood), "--targets", "gfx942"]))
    row(
        "flood",
        "-",
        flood.stat().st_size,
        "install",
        run(["install", "--targets", "gfx942", "--dry-run", "--python", str(flood), "--", "pkg"]),
    )


if __name__ == "__main__":
    main()
