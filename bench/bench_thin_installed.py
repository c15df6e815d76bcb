"""What a thinned wheel installs to, per library and per shape of device code: the in-place
rewrite (``thin --keep-layout``) against the default, where thinned libraries are compacted.

    python bench/bench_thin_installed.py [--cache DIR] [--out FILE]

The real wheels of ``bench/bench_real_audit.py`` (pinned by sha256, fetched once through pip's configured index), each
thinned to one target of each vendor it holds code for. For every library with device code:
its shape (the device sections and the containers in them, from our audit), its size, its size
after the in-place rewrite and after compaction, and why a library stayed in place. Sizes are
the installed bytes (the member's uncompressed size). Asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_real_audit  # noqa: E402  (the pinned wheels)

TARGETS = {
    "cupy-rocm-7-0": ["gfx942"],
    "cupy-rocm-5-0": ["gfx908"],
    "bitsandbytes": ["gfx942", "sm_90"],
    "cupy-cuda13x": ["sm_90"],
    "cupy-cuda12x": ["sm_90"],
    "cupy-cuda11x": ["sm_90"],
    "nvidia-cufft": ["sm_90"],
    "nvidia-cusparse": ["sm_90"],
    "nvidia-curand-cu12": ["sm_90"],
    "torchao": ["sm_90", "sm_100"],
}


def _shape(report_file: object) -> str:
    kinds = collections.Counter((c.where, c.kind) for c in report_file.containers)  # type: ignore[attr-defined]
    return ", ".join(f"{where} {n} {kind}{'s' if n > 1 else ''}" for (where, kind), n in sorted(kinds.items()))


def one(wheel: Path, target: str, work: Path) -> list[str]:
    from rocm_build_backend.binary.audit import audit_wheel
    from rocm_build_backend.gpu.targets import parse_targets
    from rocm_build_backend.wheel.thin.run import thin_wheel

    shapes = {f.path: _shape(f) for f in audit_wheel(wheel).device_files}
    results = {}
    seconds = {}
    for keep in (True, False):
        out = work / ("keep" if keep else "compact")
        t = time.perf_counter()
        results[keep] = thin_wheel(wheel, parse_targets(target), out, keep_layout=keep)
        seconds[keep] = time.perf_counter() - t
        (out / wheel.name).unlink()
    lines = [
        f"== {wheel.name} --targets {target}: wheel {results[False].wheel_before / 2**20:.1f} MiB -> "
        f"{results[False].wheel_after / 2**20:.1f} MiB; installed {results[True].installed_before / 2**20:.1f} MiB "
        f"-> {results[True].installed_after / 2**20:.1f} MiB in place, "
        f"{results[False].installed_after / 2**20:.1f} MiB compacted; thin {seconds[True]:.1f} s in place, "
        f"{seconds[False]:.1f} s compacted"
    ]
    in_place = {m.name: m for m in results[True].members}
    for m in results[False].members:
        if m.action not in ("thinned", "kept-whole"):
            continue
        why = f" ({m.layout_reason})" if m.layout_reason else (f" (kept whole: {m.reason})" if m.reason else "")
        lines.append(
            f"  {m.name}: {shapes.get(m.name, '?')}; {m.size_before / 2**20:.2f} MiB -> "
            f"{in_place[m.name].size_after / 2**20:.2f} in place -> {m.size_after / 2**20:.2f} MiB "
            f"{m.layout or m.action}{why}"
        )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "rocm-build-backend-bench" / "real")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results_thin_installed.txt")
    args = ap.parse_args()
    wheels = bench_real_audit.fetch(args.cache)
    lines = [f"bench_thin_installed.py, {time.strftime('%Y-%m-%d', time.gmtime())}; MiB = 2^20 bytes"]
    for (name, *_rest), wheel in zip(bench_real_audit.WHEELS, wheels):
        for target in TARGETS.get(name, []):
            with tempfile.TemporaryDirectory() as tmp:
                lines += one(wheel, target, Path(tmp))
            print("\n".join(lines[-1:]), flush=True)
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
