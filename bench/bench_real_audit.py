"""Benchmark: ``audit`` of real GPU wheels against inflating their members once.

    python bench/bench_real_audit.py [--rounds 5] [--cache DIR] [--profile] [--out FILE]

The wheels (pinned below by name, version, file name and sha256; 10 wheels, 0.92 GB, AMD and
NVIDIA, fetched once with ``pip download --no-deps NAME==VERSION`` through pip's configured
index into the cache folder, default ``~/.cache/rocm-build-backend-bench/real``).

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
import hashlib
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
    ("cupy-rocm-7-0", "14.2.0", "cupy_rocm_7_0-14.2.0-cp311-cp311-manylinux2014_x86_64.whl",
     "8e824c1c2fc386e72fe8ae69ab7c273326b17650160400f8f4ea2c932189ed1a"),
    ("cupy-rocm-5-0", "13.3.0", "cupy_rocm_5_0-13.3.0-cp311-cp311-manylinux2014_x86_64.whl",
     "00907762735d182737bee317f532dc381337fb8e978bd846acb268df463b2d7b"),
    ("bitsandbytes", "0.50.2", "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl",
     "55348a9a4a21bfd99cf8c7b32fe67b4030ae5c2a05738e03c1747f65fa6ec283"),
    ("cupy-cuda13x", "14.2.0", "cupy_cuda13x-14.2.0-cp311-cp311-manylinux2014_x86_64.whl",
     "f94843e54500a9c8c169135f79572bfaba946efe4f7178e834c227280c1b0c12"),
    ("cupy-cuda12x", "14.2.0", "cupy_cuda12x-14.2.0-cp311-cp311-manylinux2014_x86_64.whl",
     "5fe2366cc5c61a7ee4a527ce1e8951cb89092d0fb0b5830623cf114d1942c585"),
    ("cupy-cuda11x", "13.6.0", "cupy_cuda11x-13.6.0-cp311-cp311-manylinux2014_x86_64.whl",
     "6fbbc042580d3c6170a449a2643235bef16e74cc997a143767c47d4d6ce95ed2"),
    ("nvidia-cufft", "12.0.0.61", "nvidia_cufft-12.0.0.61-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
     "6c44f692dce8fd5ffd3e3df134b6cdb9c2f72d99cf40b62c32dde45eea9ddad3"),
    ("nvidia-cusparse", "12.6.3.3",
     "nvidia_cusparse-12.6.3.3-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
     "2b3c89c88d01ee0e477cb7f82ef60a11a4bcd57b6b87c33f789350b59759360b"),
    ("nvidia-curand-cu12", "10.3.10.19", "nvidia_curand_cu12-10.3.10.19-py3-none-manylinux_2_27_x86_64.whl",
     "49b274db4780d421bd2ccd362e1415c13887c53c214f0d4b761752b8f9f6aa1e"),
    ("torchao", "0.18.0", "torchao-0.18.0-cp310-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
     "6540b148e40ba81cbd4de86392225a076a1591146e9cebb099b3b234ba9feebe"),
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


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def fetch(cache: Path) -> list[Path]:
    """The pinned wheels, downloaded once with pip; each checked against its sha256."""
    cache.mkdir(parents=True, exist_ok=True)
    out = []
    for name, version, filename, sha256 in WHEELS:
        path = cache / filename
        if not path.exists():
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                            "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64",
                            "-d", str(cache), f"{name}=={version}"], check=True)
        if _sha256(path) != sha256:
            raise SystemExit(f"{path}: sha256 does not match the pin")
        out.append(path)
    return out


def env() -> dict[str, str]:
    """This checkout first on the path; bytecode used as an installed package has it."""
    e = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    e["PYTHONPATH"] = str(ROOT)
    return e


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_audit(wheel: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one ``audit`` command."""
    t, c = time.perf_counter(), _cpu()
    subprocess.run([sys.executable, "-m", "rocm_build_backend", "audit", str(wheel)],
                   stdout=subprocess.DEVNULL, env=env())  # exit 3 (cannot tell) is an answer too
    return time.perf_counter() - t, _cpu() - c


def run_inflate(wheels: list[Path]) -> tuple[float, float, float]:
    """(wall seconds of the command, its CPU seconds, seconds inflating inside it)."""
    t, c = time.perf_counter(), _cpu()
    res = subprocess.run([sys.executable, "-c", INFLATE, *map(str, wheels)],
                         capture_output=True, text=True, check=True, env=env())
    return time.perf_counter() - t, _cpu() - c, float(res.stdout)


def side_by_side(wheels: list[Path], rounds: int) -> dict[str, list[float]]:
    cupy = wheels[0]
    keys = ("audit1", "audit1_cpu", "floor1", "floor1_cpu", "floor1_in", "audit10", "audit10_cpu",
            "floor10", "floor10_cpu", "floor10_in", "python", "python_cpu")
    rows: dict[str, list[float]] = {k: [] for k in keys}

    def add(prefix: str, values: tuple[float, ...]) -> None:
        for suffix, v in zip(("", "_cpu", "_in"), values):
            rows[prefix + suffix].append(v)

    for w in wheels:  # warm: the page cache, bytecode
        run_audit(w)
    run_inflate(wheels)
    for i in range(rounds):
        for which in ([0, 1] if i % 2 == 0 else [1, 0]):
            if which == 0:
                add("audit1", run_audit(cupy))
                each = [run_audit(w) for w in wheels]
                add("audit10", (sum(x[0] for x in each), sum(x[1] for x in each)))
            else:
                add("floor1", run_inflate([cupy]))
                add("floor10", run_inflate(wheels))
        t, c = time.perf_counter(), _cpu()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        add("python", (time.perf_counter() - t, _cpu() - c))
    return rows


def profile_child(wheel: str) -> None:
    """One wheel in process: bytes inflated and read, seconds, targets (json on stdout)."""
    sys.path.insert(0, str(ROOT))
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
        "seconds": seconds, "members": len(infos), **counts,
        "usize": sum(i.file_size for i in infos),
        "device_usize": sum(i.file_size for i in infos if i.filename in libs),
        "device_files": len(libs), "targets": report.targets, "exit": report.exit_code,
    }
    print(json.dumps(out))


def profile(wheels: list[Path]) -> list[str]:
    lines = [f"{'wheel':<28} {'members':>7} {'inflated MiB':>12} {'audit inflated':>14} {'x':>5} "
             f"{'read MiB':>9} {'reads':>7} {'device files':>12} {'seconds':>8}"]
    for w in wheels:
        res = subprocess.run([sys.executable, __file__, "--profile-child", str(w)],
                             capture_output=True, text=True, check=True, env=env())
        d = json.loads(res.stdout)
        lines.append(f"{w.name.split('-')[0] + '-' + w.name.split('-')[1]:<28} {d['members']:>7} "
                     f"{d['usize'] / 2**20:>12.1f} {d['inflated'] / 2**20:>14.1f} "
                     f"{d['inflated'] / max(1, d['usize']):>5.2f} {d['read'] / 2**20:>9.1f} {d['reads']:>7} "
                     f"{d['device_files']:>12} {d['seconds']:>8.2f}")
    return lines


def report(rows: dict[str, list[float]], wheels: list[Path], rounds: int) -> list[str]:
    m = {k: statistics.median(v) for k, v in rows.items()}
    size = sum(w.stat().st_size for w in wheels)
    load = os.getloadavg()[0]
    return [
        f"median of {rounds} alternated rounds, {os.cpu_count()} cores, load average {load:.1f} at the end; "
        f"python -c pass: {m['python'] * 1000:.0f} ms wall, {m['python_cpu'] * 1000:.0f} ms CPU",
        f"{'':52} {'wall s':>7} {'CPU s':>7}",
        f"1. cupy-rocm-7-0 ({wheels[0].stat().st_size / 1e6:.0f} MB wheel)",
        f"   audit (one command)                              {m['audit1']:7.2f} {m['audit1_cpu']:7.2f}",
        f"   inflate every member once (one command)          {m['floor1']:7.2f} {m['floor1_cpu']:7.2f}"
        f"   (inflating inside it: {m['floor1_in']:.2f} s)",
        f"   ratio                                            {m['audit1'] / m['floor1']:7.2f} "
        f"{m['audit1_cpu'] / m['floor1_cpu']:7.2f}",
        f"2. {len(wheels)} real GPU wheels ({size / 1e9:.2f} GB)",
        f"   audit, {len(wheels)} commands                                 {m['audit10']:7.2f} {m['audit10_cpu']:7.2f}",
        f"   inflate every member once (one command)          {m['floor10']:7.2f} {m['floor10_cpu']:7.2f}"
        f"   (inflating inside it: {m['floor10_in']:.2f} s)",
        f"   ratio                                            {m['audit10'] / m['floor10']:7.2f} "
        f"{m['audit10_cpu'] / m['floor10_cpu']:7.2f}",
        "rounds (s): " + "; ".join(f"{k} " + " ".join(f"{x:.2f}" for x in v) for k, v in rows.items()),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "rocm-build-backend-bench" / "real")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--profile-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.profile_child:
        profile_child(args.profile_child)
        return 0
    wheels = fetch(args.cache)
    compileall.compile_dir(str(ROOT / "rocm_build_backend"), quiet=1)
    lines = profile(wheels) if args.profile else report(side_by_side(wheels, args.rounds), wheels, args.rounds)
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
