"""How ``rocm-build-backend index`` scales: 1,000, 10,000 and 100,000 wheels, side by side in one run.

Per size, in one process: the first run against its floor (hashing every wheel, then creating
every file the run created, plainly, in a fresh folder: measured right after it; three such
pairs up to 10,000 wheels, their median ratio, as file creation on a shared disk varies
twofold from one minute to the next), then adding
one wheel, removing one and a run with nothing changed, both ways an index is kept: a folder
mirrored (``index WHEEL_DIR OUT``: the folder is listed) and by name (``index --add WHEEL OUT``,
``--remove NAME==VERSION``: nothing is listed). Then the root pages of an index of 100,000
projects: their size, and the time to render and write them (once per run that adds or drops
a project).

Wheels are stamped (a third for gfx90a, gfx942 and gfx1100, a third for one of them, a sixth
pure, the rest for two), each a clone of one wheel's library bytes under its own name and
version (10 versions per project), written with stored members so that making 100,000 costs
seconds; their mtimes are an hour old (wheels built before the run that indexes them).

    python bench/bench_index_scale.py [--sizes 1000,10000,100000] [--repeat 3] [--dir DIR]
        [--out bench/results_index.txt]

Prints a table (and writes it to --out); measures, asserts nothing.
"""

from __future__ import annotations

import argparse
import base64
import gc
import hashlib
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from rocm_build_backend.wheel.index.pages import root_html, root_json  # noqa: E402
from rocm_build_backend.wheel.index.publish import publish  # noqa: E402
from rocm_build_backend.wheel.index.run import build_index  # noqa: E402
from rocm_build_backend.wheel.index.files import atomic_write  # noqa: E402

TARGETS = ["gfx90a", "gfx942", "gfx1100"]
LIBRARY = random.Random(0).randbytes(16 << 10)  # the one library every wheel carries a copy of
LIBRARY_RECORD = base64.urlsafe_b64encode(hashlib.sha256(LIBRARY).digest()).rstrip(b"=").decode()


def _targets(i: int) -> list[str]:
    roll = (i * 7919) % 6
    return [
        TARGETS,
        TARGETS,
        [TARGETS[i % 3]],
        [TARGETS[(i + 1) % 3]],
        [],
        sorted({TARGETS[i % 3], TARGETS[(i + 1) % 3]}),
    ][roll]


def _stamp(member: str, targets: list[str]) -> bytes:
    files = {member: {"targets": targets, "complete": targets}} if targets else {}
    return json.dumps(
        {
            "schema_version": 1,
            "generator": {"name": "rocm-build-backend", "version": "0.1.0"},
            "requested": {"targets": targets, "source": "settings"},
            "audit": {"targets": targets, "complete": targets, "files": files},
            "host": {"gpus": []},
            "toolchain": {
                "compiler": "hipcc",
                "version": "6.2.41133",
                "hip_version": "6.2.41133",
                "rocm_version": "6.2.0",
            },
        }
    ).encode()


def make_wheel(folder: Path, name: str, version: str, targets: list[str]) -> Path:
    """A valid stamped wheel: METADATA, WHEEL, stamp, RECORD and (with targets) the library."""
    dist = name.replace("-", "_")
    di = f"{dist}-{version}.dist-info"
    files = {f"{dist}/__init__.py": f'__version__ = "{version}"\n'.encode()}
    member = f"{dist}/_C.so"
    if targets:
        files[member] = LIBRARY
    files[f"{di}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Python: >=3.9\nSummary: a GPU extension\n\n"
    ).encode()
    files[f"{di}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n\n"
    )
    files[f"{di}/rocm_build.json"] = _stamp(member, targets)
    lines = []
    for n, d in files.items():
        digest = (
            LIBRARY_RECORD
            if d is LIBRARY
            else base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
        )
        lines.append(f"{n},sha256={digest},{len(d)}")
    files[f"{di}/RECORD"] = ("\n".join(lines + [f"{di}/RECORD,,"]) + "\n").encode()
    path = folder / f"{dist}-{version}-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for n, d in files.items():
            zf.writestr(zipfile.ZipInfo(n, (2024, 1, 1, 0, 0, 0)), d)
    return path


def generate(folder: Path, n: int) -> int:
    """``n`` wheels of ``n // 10`` projects; their total size."""
    folder.mkdir(parents=True, exist_ok=True)
    projects = max(1, n // 10)
    old = time.time() - 3600
    total = 0
    for i in range(n):
        p = make_wheel(folder, f"gpu-ext-{i % projects:06d}", f"1.{i // projects}.0", _targets(i))
        os.utime(p, (old, old))
        total += p.stat().st_size
    return total


def timed(fn, repeat: int = 1) -> float:
    runs = []
    for _ in range(repeat):
        settle()
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def settle() -> None:
    """Start a timed step with nothing of the last one still being written back (on a shared
    disk, another step's dirty pages would otherwise be paid for by this one)."""
    gc.collect()
    os.sync()


def made_files(out: Path) -> list[Path]:
    """Every file a run created in OUT (not its state or lock)."""
    return sorted(p for p in out.rglob("*") if p.is_file() and not p.name.startswith(".rocm-build-backend-index"))


def floor(wheels: Path, out: Path, dest: Path) -> tuple[float, float, int]:
    """(seconds to hash every wheel, seconds to create every file the run made, how many)."""
    listing = sorted(wheels.glob("*.whl"))
    for p in listing:  # warm, as the run found them
        p.read_bytes()

    def hash_all() -> None:
        for p in listing:
            with open(p, "rb") as fh:
                hashlib.file_digest(fh, "sha256")

    hashing = timed(hash_all)
    files = made_files(out)
    creating = 0.0
    for start in range(0, len(files), 5000):  # read a chunk (not timed), create it (timed)
        chunk = [(dest / p.relative_to(out), p.read_bytes()) for p in files[start : start + 5000]]
        settle()
        t = time.perf_counter()
        for path, data in chunk:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(data)
        os.sync()  # what it created, on the disk: as the run's own writes were when it was timed
        creating += time.perf_counter() - t
    return hashing, creating, len(files)


def as_publisher(out: Path, on: bool) -> None:
    """Let the bench time ``--add``/``--remove`` on the very index it built from a folder (a
    publish-mode index of the same wheels is the same pages, state and files)."""
    import sqlite3

    conn = sqlite3.connect(out / ".rocm-build-backend-index.sqlite3", isolation_level=None)
    conn.execute("PRAGMA locking_mode=EXCLUSIVE")
    conn.execute("UPDATE meta SET value=? WHERE key='mode'", ("publish" if on else "mirror",))
    conn.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES('options', ?)", (json.dumps([None, False, True, False]),)
    )
    conn.close()


def level(work: Path, n: int, repeat: int, first_repeat: int) -> dict[str, object]:
    base = work / str(n)
    wheels, out = base / "wheels", base / "out"
    t = time.perf_counter()
    size = generate(wheels, n)
    made = time.perf_counter() - t
    time.sleep(2.1)  # their ctimes, set by utime, out of the granularity window too
    row: dict[str, object] = {"wheels": n, "MiB": size / 2**20, "generate_s": made}
    pairs = []
    for k in range(first_repeat):  # the first run, then its floor right after, k times: medians
        if k:
            shutil.rmtree(out)
        settle()
        t = time.perf_counter()
        first = build_index(wheels, out, lists=False)
        os.sync()
        took = time.perf_counter() - t
        pairs.append((took, *floor(wheels, out, base / "floor")))
        shutil.rmtree(base / "floor")
    row["first_runs"] = [round(p[0], 2) for p in pairs]
    row["floors"] = [round(p[1] + p[2], 2) for p in pairs]
    row["ratio"] = statistics.median(p[0] / (p[1] + p[2]) for p in pairs)
    row["first_s"] = statistics.median(p[0] for p in pairs)
    row["hash_s"] = statistics.median(p[1] for p in pairs)
    row["create_s"] = statistics.median(p[2] for p in pairs)
    row["files"] = pairs[0][3]
    row["pages"] = sum(1 for _ in out.glob("*/simple/**/index.*"))
    row["root_bytes"] = max((out / idx / "simple" / "index.html").stat().st_size for idx in first.counts)
    row["unchanged_s"] = timed(lambda: build_index(wheels, out, lists=False), repeat)
    rng = random.Random(n)
    adds, removes, pub_adds, pub_removes = [], [], [], []
    extra = base / "extra"
    extra.mkdir()
    for k in range(repeat):
        whl = make_wheel(wheels, f"gpu-ext-{rng.randrange(max(1, n // 10)):06d}", f"9.{k}.0", TARGETS)
        settle()
        t = time.perf_counter()
        res = build_index(wheels, out, lists=False)
        adds.append(time.perf_counter() - t)
        assert res.wheels_added == [whl.name], res.wheels_added
        whl.unlink()
        settle()
        t = time.perf_counter()
        res = build_index(wheels, out, lists=False)
        removes.append(time.perf_counter() - t)
        assert res.wheels_removed == [whl.name], res.wheels_removed
        as_publisher(out, True)
        whl = make_wheel(extra, f"gpu-ext-{rng.randrange(max(1, n // 10)):06d}", f"8.{k}.0", TARGETS)
        settle()
        t = time.perf_counter()
        res = publish(out, add=[whl], lists=False)
        pub_adds.append(time.perf_counter() - t)
        assert res.wheels_added == [whl.name], res.wheels_added
        spec = f"{whl.name.split('-')[0].replace('_', '-')}=={whl.name.split('-')[1]}"
        settle()
        t = time.perf_counter()
        res = publish(out, remove=[spec], lists=False)
        pub_removes.append(time.perf_counter() - t)
        assert res.wheels_removed == [whl.name], res.wheels_removed
        as_publisher(out, False)
    build_index(wheels, out, lists=False)  # the fingerprints of the runs above settle
    row.update(
        add_s=statistics.median(adds),
        remove_s=statistics.median(removes),
        pub_add_s=statistics.median(pub_adds),
        pub_remove_s=statistics.median(pub_removes),
    )
    shutil.rmtree(base)
    return row


def roots(projects: int) -> dict[str, float]:
    """The root pages of one index of ``projects`` projects: bytes, and seconds to render and write."""
    names = [(f"gpu-ext-{i:06d}", f"gpu-ext-{i:06d}") for i in range(projects)]
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        html, js = root_html("gfx942", names), root_json(names)
        render = time.perf_counter() - t
        t = time.perf_counter()
        atomic_write(Path(tmp) / "index.html", html)
        atomic_write(Path(tmp) / "index.json", js)
        write = time.perf_counter() - t
    return {"projects": projects, "html_bytes": len(html), "json_bytes": len(js), "render_s": render, "write_s": write}


def table(rows: list[dict[str, object]], root: dict[str, float]) -> str:
    out = [
        f"{'wheels':>8}{'MiB':>7}{'first':>8}{'floor':>8}{'ratio':>7}{'hash':>7}{'create':>8}{'files':>8}"
        f"{'no-chg':>8}{'add':>7}{'remove':>8}{'--add':>7}{'--rm':>7}{'root KB':>9}"
    ]
    for r in rows:
        fl = float(r["hash_s"]) + float(r["create_s"])  # type: ignore[arg-type]
        out.append(
            f"{r['wheels']:>8}{r['MiB']:>7.0f}{r['first_s']:>8.2f}{fl:>8.2f}{float(r['ratio']):>7.2f}"
            f"{r['hash_s']:>7.2f}{r['create_s']:>8.2f}{r['files']:>8}{r['unchanged_s']:>8.3f}{r['add_s']:>7.3f}"
            f"{r['remove_s']:>8.3f}{r['pub_add_s']:>7.3f}{r['pub_remove_s']:>7.3f}{int(r['root_bytes']) / 1024:>9.0f}"
        )
    for r in rows:
        out.append(f"{r['wheels']:>8}: first runs {r['first_runs']} s, each with its floor {r['floors']} s")
    base = rows[0]
    for r in rows[1:]:
        out.append(
            f"{r['wheels']:>8} vs {base['wheels']}: add {float(r['add_s']) / float(base['add_s']):.2f}x, "
            f"--add {float(r['pub_add_s']) / float(base['pub_add_s']):.2f}x, "
            f"remove {float(r['remove_s']) / float(base['remove_s']):.2f}x, "
            f"--remove {float(r['pub_remove_s']) / float(base['pub_remove_s']):.2f}x, "
            f"no change {float(r['unchanged_s']) / float(base['unchanged_s']):.2f}x"
        )
    out.append(
        f"root pages of {root['projects']:,} projects: HTML {root['html_bytes'] / 2**20:.2f} MiB, JSON "
        f"{root['json_bytes'] / 2**20:.2f} MiB; rendered in {root['render_s']:.3f} s, written in {root['write_s']:.3f} s"
    )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--first-repeat",
        type=int,
        default=3,
        help="first runs (each with its floor) per size up to 10,000 wheels; 1 above",
    )
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    ap.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-index-scale-", dir=args.dir))
    rows = []
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            rows.append(level(work, n, args.repeat, args.first_repeat if n <= 10_000 else 1))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = table(rows, roots(100_000))
    header = (
        f"bench/bench_index_scale.py --sizes {args.sizes} --repeat {args.repeat} --first-repeat {args.first_repeat}; "
        "seconds, medians; floor = hash + create (the same process, right after each first run; ratio: median "
        "of the pairs); add/remove: a folder mirrored; --add/--rm: by name"
    )
    print(header + "\n" + text)
    if args.out:
        args.out.write_text(header + "\n" + text + "\n")


if __name__ == "__main__":
    main()
