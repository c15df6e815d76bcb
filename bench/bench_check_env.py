"""How fast is ``rocm-build-backend check --env``? Against reading the files with device code once.

Builds (or reuses) an environment holding real GPU wheels, then times, with the page cache warm
(every timed step ran once before):

- ``read once``: read every file the check found device code in, whole, in 1 MiB chunks: the
  floor a check that opens the binaries cannot beat by much;
- ``check --env (library)``: ``check_environment`` in this process (RECORD files, name/size/
  magic filter, audit of what is left, verdicts);
- ``check --env (command)``: ``python -m rocm_build_backend check --env PYTHON --no-cache`` as a
  job would run it, interpreter start included;
- each again with the results of an earlier run kept (``--no-cache`` left out): an environment
  that has not changed is only stat()ed, not read.

The target (issue 13) is ``check --env`` at most 2x ``read once``. Two ways to get the
environment:

    python bench/bench_check_env.py --python /path/to/venv/bin/python   # an existing one
    python bench/bench_check_env.py --wheel cupy_rocm_7_0-...whl ...     # a venv made here
    python bench/bench_check_env.py --download cupy-rocm-7-0 cupy-cuda13x  # pip download first

``--targets`` gives the devices (default: this machine's, as ``check`` detects them; with no GPU
the check still does all its reading, and says "cannot tell"). Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rocm_build_backend.wheel.check.environment import check_environment  # noqa: E402


def make_env(wheels: list[Path], where: Path) -> str:
    """A venv (no pip) with ``wheels`` unpacked into it by pip, without dependencies."""
    venv = where / "venv"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--no-cache-dir",
            "--upgrade",
            "--target",
            site,
            *map(str, wheels),
        ],
        check=True,
    )
    return str(python)


def download(names: list[str], where: Path) -> list[Path]:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(where), *names], check=True)
    return sorted(where.glob("*.whl"))


def read_once(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        with open(p, "rb") as fh:
            while chunk := fh.read(1 << 20):
                total += len(chunk)
    return total


def timed(fn, repeat: int) -> tuple[float, object]:
    fn()  # warm
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", help="an environment's interpreter to check")
    ap.add_argument("--wheel", action="append", type=Path, default=[], help="a wheel to put into a new venv")
    ap.add_argument("--download", nargs="*", default=[], help="project names to pip download first")
    ap.add_argument("--dir", type=Path, help="where the venv and downloads go (default: a temp folder)")
    ap.add_argument("--targets", help="devices to check against (default: this machine's)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    args = ap.parse_args()

    work = args.dir or Path(tempfile.mkdtemp(prefix="bench-check-env-"))
    python = args.python
    if python is None:
        wheels = list(args.wheel) + (download(args.download, work / "wheels") if args.download else [])
        if not wheels:
            ap.error("give --python, --wheel or --download")
        python = make_env(wheels, work)

    if args.targets:
        from rocm_build_backend.gpu.targets import parse_targets

        devices: list = parse_targets(args.targets)
    else:
        from rocm_build_backend.gpu.amd.detect import detect
        from rocm_build_backend.wheel.check.wheels import devices_from_detection

        devices, _ = devices_from_detection(detect(keep_features=True))

    lib_s, report = timed(lambda: check_environment(python, devices), args.repeat)
    cache = work / "cache" / "check-env.json"
    kept_s, _ = timed(lambda: check_environment(python, devices, cache_path=cache), args.repeat)
    files = [Path(d.dist.location) / rel for d in report.dists for rel in d.files]
    read_s, nbytes = timed(lambda: read_once(files), args.repeat)
    cmd = [sys.executable, "-m", "rocm_build_backend", "check", "--env", python, "--json"]
    if args.targets:
        cmd += ["--targets", args.targets]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(work / "xdg")}
    cli_s, proc = timed(
        lambda: subprocess.run([*cmd, "--no-cache"], capture_output=True, text=True, env=env), args.repeat
    )
    cli_kept_s, _ = timed(lambda: subprocess.run(cmd, capture_output=True, text=True, env=env), args.repeat)

    s = report.scanned
    print(f"environment: {report.python}")
    print(
        f"  {s['distributions']} distributions, {s['files']} files in RECORD, {s['opened']} opened, "
        f"{s['audited']} audited; {len(files)} files with device code, {nbytes / 2**20:.1f} MiB"
    )
    for d in report.dists:
        print(f"  {d.dist.name} {d.dist.version}: {len(d.files)} files, {len(d.targets)} targets, {d.status}")
    print(f"{'read once':<26}{read_s * 1000:9.1f} ms   1.00x")
    for label, took in (
        ("check --env (library)", lib_s),
        ("  results kept", kept_s),
        ("check --env (command)", cli_s),
        ("  results kept", cli_kept_s),
    ):
        print(f"{label:<26}{took * 1000:9.1f} ms  {took / read_s:5.2f}x")
    print(f"exit {proc.returncode}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "python": report.python,
                    "scanned": s,
                    "device_files": len(files),
                    "device_bytes": nbytes,
                    "read_once_s": read_s,
                    "check_library_s": lib_s,
                    "check_library_kept_s": kept_s,
                    "check_command_s": cli_s,
                    "check_command_kept_s": cli_kept_s,
                    "exit_code": proc.returncode,
                    "report": json.loads(proc.stdout) if proc.stdout else None,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
