"""Audit real, large binaries nobody here built: an installed PyTorch's torch/lib/*.so.

    python bench/bench_torch_audit.py [--out FILE.json]

For each shared library: the audit's targets (and the targets every fatbin covers) next to
`cuobjdump --list-elf --list-ptx`, and the time each took; then the same libraries in one
wheel-sized zip, audited in place, next to just reading the zip. Meant for a machine with a
CUDA build of PyTorch and cuobjdump (the lent GPU machine); prints a table, asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rocm_build_backend.binary.audit import audit_file, audit_wheel  # noqa: E402


def cuobjdump_targets(path: Path, exe: str) -> tuple[set[str], float, str]:
    t = time.perf_counter()
    proc = subprocess.run([exe, "--list-elf", "--list-ptx", str(path)], capture_output=True, text=True)
    took = time.perf_counter() - t
    found = set()
    for line in proc.stdout.splitlines():
        m = re.search(r"\.(sm_\d+[af]?)\.(cubin|ptx)\s*$", line)
        if m:
            arch = m.group(1)
            found.add(arch if m.group(2) == "cubin" else arch.replace("sm_", "compute_"))
    note = "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["failed"])[-1]
    return found, took, note


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import torch  # the installed PyTorch whose libraries are audited

    lib = Path(torch.__file__).parent / "lib"
    exe = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
    have_cuobjdump = os.path.exists(exe)
    rows = []
    audit_total = tool_total = 0.0
    for so in sorted(lib.glob("*.so*")):
        t = time.perf_counter()
        rep = audit_file(so)
        took = time.perf_counter() - t
        audit_total += took
        ours = set(rep.targets)
        theirs, ttook, note = cuobjdump_targets(so, exe) if have_cuobjdump else (set(), 0.0, "no cuobjdump")
        tool_total += ttook
        rows.append(
            {
                "file": so.name,
                "bytes": so.stat().st_size,
                "audit": sorted(ours),
                "complete": rep.complete,
                "cuobjdump": sorted(theirs),
                "agree": ours == theirs,
                "audit_s": took,
                "cuobjdump_s": ttook,
                "note": note,
                "problems": rep.problems,
            }
        )
    with tempfile.TemporaryDirectory() as tmp:
        wheel = Path(tmp) / "torch-0-cp311-cp311-linux_x86_64.whl"
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
            for so in sorted(lib.glob("*.so*")):
                zf.write(so, f"torch/lib/{so.name}")
        t = time.perf_counter()
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                with zf.open(info) as fh:
                    while fh.read(1 << 20):
                        pass
        read_s = time.perf_counter() - t
        t = time.perf_counter()
        wrep = audit_wheel(wheel)
        wheel_s = time.perf_counter() - t
        size = wheel.stat().st_size
    in_zip = {Path(f.path).name: sorted(f.targets) for f in wrep.files if f.targets}
    same = in_zip == {r["file"]: r["audit"] for r in rows if r["audit"]}
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), {len(rows)} files in torch/lib")
    print(f"{'file':<34} {'MB':>7} {'agree':>6} {'audit s':>8} {'cuobjdump s':>12}  targets")
    for r in rows:
        print(
            f"{r['file']:<34} {r['bytes'] / 1e6:7.1f} {str(r['agree']):>6} {r['audit_s']:8.3f} {r['cuobjdump_s']:12.3f}  "
            f"{' '.join(r['audit']) or '-'}  {r['note']}"
        )
    print(
        f"agree on {sum(r['agree'] for r in rows)}/{len(rows)} files; audit {audit_total:.2f} s, cuobjdump {tool_total:.2f} s"
    )
    print(
        f"zip of them: {size / 1e6:.0f} MB; audit_wheel {wheel_s:.2f} s vs reading it {read_s:.2f} s "
        f"({wheel_s / read_s:.2f}x); same targets as the files: {same}"
    )
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "torch": torch.__version__,
                    "cuda": torch.version.cuda,
                    "files": rows,
                    "zip_bytes": size,
                    "zip_audit_s": wheel_s,
                    "zip_read_s": read_s,
                    "zip_same": same,
                    "zip_targets": in_zip,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
