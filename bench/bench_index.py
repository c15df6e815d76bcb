"""How fast is ``rocm-build-backend index``? Against hashing the same bytes with sha256 alone.

Generates N wheels (default 2,000: 200 projects x 10 versions) with realistic metadata (a
summary, classifiers, Requires-Dist, a README-sized description, a stamp) and an incompressible
library member whose size follows a log-normal spread (median 256 KiB, up to 8 MiB). Targets:
a third fat (gfx90a, gfx942, gfx1100), a third single-target, a sixth pure, the rest two targets.

Rows, all with the page cache warm (every wheel was read once before timing):

- ``sha256 only``: read and hash every wheel (hashlib, one thread): the floor;
- ``index (in place)``: ``build_index`` with the wheels inside the output folder (linked where they are);
- ``index (hosted copy)``: the default, wheels copied into ``OUT/files/<hash>/`` (a clone where
  the filesystem can, else a plain copy);
- ``index again``: the same, nothing changed (facts from the state file, no hashing);
- ``create the files only``: writing the pages and ``.metadata`` files an index must hold,
  plainly, with no hashing: the second floor, which dominates on disks where creating a file
  costs more than hashing a small wheel.

Then one new wheel is added to folders of several sizes, and the pages rewritten are counted.

    python bench/bench_index.py [--wheels 2000] [--repeat 3] [--median-kib 256] [--dir DIR]

Prints tables; measures, asserts nothing.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
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
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from rocm_build_backend.wheel.index.run import build_index  # noqa: E402

TARGETS = ["gfx90a", "gfx942", "gfx1100"]
WORDS = (
    "kernel tensor fused attention matmul gemm conv reduce scan sort sparse dense batch "
    "stream graph launch device memory pool cache layout quant dequant rotary norm"
).split()


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _metadata(rng: random.Random, name: str, version: str) -> bytes:
    lines = [
        "Metadata-Version: 2.3",
        f"Name: {name}",
        f"Version: {version}",
        f"Summary: {' '.join(rng.choices(WORDS, k=8)).capitalize()} for AMD GPUs",
        "Author-email: Example Team <team@example.org>",
        "License-Expression: Apache-2.0",
        f"Requires-Python: >={rng.choice(['3.9', '3.10', '3.11'])}",
    ]
    lines += [
        f"Classifier: {c}"
        for c in (
            "Development Status :: 4 - Beta",
            "Environment :: GPU",
            "Intended Audience :: Science/Research",
            "Operating System :: POSIX :: Linux",
            "Programming Language :: C++",
            "Programming Language :: Python :: 3",
            "Topic :: Scientific/Engineering :: Artificial Intelligence",
        )
    ]
    lines += [
        f"Requires-Dist: {d}"
        for d in ("numpy>=1.24", "packaging", "torch>=2.3; extra == 'torch'", "pytest; extra == 'test'")
    ]
    lines += ["Provides-Extra: torch", "Provides-Extra: test", "Description-Content-Type: text/markdown", ""]
    body = "\n\n".join(" ".join(rng.choices(WORDS, k=60)) for _ in range(30))
    return ("\n".join(lines) + f"\n# {name}\n\n{body}\n").encode()


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
        },
        indent=2,
    ).encode()


MEDIAN = 256 << 10


def make_wheel(folder: Path, rng: random.Random, name: str, version: str, targets: list[str]) -> Path:
    dist = name.replace("-", "_")
    di = f"{dist}-{version}.dist-info"
    size = int(min(32 * MEDIAN, max(16 << 10, rng.lognormvariate(math.log(MEDIAN), 1.0))))
    member = f"{dist}/_C.so"
    files = {
        f"{dist}/__init__.py": f'__version__ = "{version}"\n'.encode(),
        member: rng.randbytes(size) if targets else b"",
        f"{di}/METADATA": _metadata(rng, name, version),
        f"{di}/WHEEL": b"Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n\n",
        f"{di}/rocm_build.json": _stamp(member, targets),
    }
    if not targets:
        del files[member]
    files[f"{di}/RECORD"] = (
        "\n".join([_record_line(n, d) for n, d in files.items()] + [f"{di}/RECORD,,"]) + "\n"
    ).encode()
    path = folder / f"{dist}-{version}-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for n, d in files.items():
            zf.writestr(n, d, compress_type=zipfile.ZIP_DEFLATED if n.endswith(("METADATA", "RECORD")) else None)
    return path


def _targets_for(rng: random.Random) -> list[str]:
    roll = rng.random()
    if roll < 1 / 3:
        return list(TARGETS)
    if roll < 2 / 3:
        return [rng.choice(TARGETS)]
    if roll < 5 / 6:
        return []
    return sorted(rng.sample(TARGETS, 2), key=TARGETS.index)


def generate(folder: Path, n: int, seed: int = 1) -> int:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    projects = max(1, n // 10)
    total = 0
    for i in range(n):
        name = f"gpu-ext-{i % projects:04d}"
        version = f"1.{i // projects}.0"
        total += make_wheel(folder, rng, name, version, _targets_for(rng)).stat().st_size
    return total


def sha256_only(folder: Path) -> None:
    for p in sorted(folder.glob("*.whl")):
        with open(p, "rb") as fh:
            hashlib.file_digest(fh, "sha256") if hasattr(hashlib, "file_digest") else hashlib.sha256(fh.read())


def timed(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    ap.add_argument("--median-kib", type=int, default=256, help="median size of a wheel's library member")
    args = ap.parse_args()
    global MEDIAN
    MEDIAN = args.median_kib << 10
    work = Path(tempfile.mkdtemp(prefix="bench-index-", dir=args.dir))
    try:
        out = work / "out"
        wheels = out / "wheels"  # inside the output: the in-place layout
        total = generate(wheels, args.wheels)
        print(f"{args.wheels} wheels, {total / 2**20:.0f} MiB in all (library median {args.median_kib} KiB)")
        sha256_only(wheels)  # warm the page cache

        def fresh(layout: str):
            def go():
                target = out if layout == "in place" else work / "hosted"
                for p in (target / t for t in TARGETS):
                    shutil.rmtree(p, ignore_errors=True)
                shutil.rmtree(work / "hosted", ignore_errors=True)
                for state in out.glob(".rocm-build-backend-index.sqlite3*"):  # the state: a fresh index
                    state.unlink()
                (out / "index.html").unlink(missing_ok=True)
                for m in wheels.glob("*.metadata"):
                    m.unlink()
                build_index(wheels, target)

            return go

        floor = timed(lambda: sha256_only(wheels), args.repeat)
        in_place = timed(fresh("in place"), args.repeat)
        hosted = timed(fresh("hosted copy"), args.repeat)
        build_index(wheels, out)  # the state the next row starts from
        again = timed(lambda: build_index(wheels, out), args.repeat)
        # the other floor: creating the files an index must hold (pages and .metadata), plainly
        produced = [
            (p.relative_to(out), p.read_bytes())
            for p in sorted(out.rglob("*"))
            if p.is_file() and (p.name.startswith("index.") or p.name.endswith(".metadata"))
        ]

        def plain_writes():
            dest = work / "plain"
            shutil.rmtree(dest, ignore_errors=True)
            for rel, data in produced:
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                (dest / rel).write_bytes(data)

        create = timed(plain_writes, args.repeat)
        print(f"{'run':<34}{'seconds':>9}{'x sha256':>10}")
        rows = (
            ("sha256 only", floor),
            (f"create the {len(produced)} files only", create),
            ("sha256 + create", floor + create),
            ("index (in place)", in_place),
            ("index (hosted copy)", hosted),
            ("index again (nothing changed)", again),
        )
        for label, secs in rows:
            print(f"{label:<34}{secs:>9.3f}{secs / floor:>10.2f}")

        print("\nadding one wheel to an indexed folder:")
        print(f"{'wheels':>8}{'pages written':>15}{'pages in index':>16}{'wheels read':>13}{'seconds':>9}")
        rng = random.Random(99)
        for n in (250, 500, 1000, args.wheels):
            folder = work / f"grow{n}"
            sub = folder / "wheels"
            sub.mkdir(parents=True)
            for p in sorted(wheels.glob("*.whl"))[:n]:
                os.link(p, sub / p.name)
            build_index(sub, folder)
            make_wheel(sub, rng, "gpu-ext-0000", "9.0.0", list(TARGETS))
            t = time.perf_counter()
            res = build_index(sub, folder)
            secs = time.perf_counter() - t
            pages = sum(1 for _ in folder.glob("*/simple/**/index.*"))
            print(f"{n:>8}{len(res.pages_written):>15}{pages:>16}{res.read:>13}{secs:>9.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
