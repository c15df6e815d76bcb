"""Benchmark: what ``plan`` turns on in the switch corpus, scored against its answer key.

    python bench/bench_switch_corpus.py [--tree DIR] [--out FILE] [--lines]

The corpus and the key are ``tests/switch_corpus.py``: 20 real sdists (19 GPU projects) pinned in
``tests/real_sdists*.json`` by name, version, file name and sha256, located through pip's
configured index and downloaded once into the test cache by ``tests/realinputs.py``. For each
project and each vendor it builds for, ``plan`` (in a child process, as ``plan --json`` computes
it) for ``sm_90`` and ``gfx942``; printed: per row the switches the key expects, those the plan
turns on (applied by the switch reader, or set by the project's profile), the ones it applies that
the key does not list (wrong), and the totals per vendor: recall and precision.

``--tree DIR``: plan with the ``rocm_build_backend`` package of another checkout (an older commit
extracted with ``git archive``), to compare before and after. ``--lines``: also print what the
plan says of each switch that turns a GPU build on. Reads sdists only; builds nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(tree: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(ROOT / "tests")])
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "switch_corpus.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        sys.exit(proc.stderr[-4000:])
    return json.loads(proc.stdout)


def table(data: dict, lines: bool) -> list[str]:
    out = [f"{'project':28} {'vendor':7} {'expected':>8} {'on':>3} {'applied':>7}  missed / wrong"]
    for r in data["rows"]:
        notes = ", ".join(
            [f"missed {m}" for m in r["missed"]]
            + [f"WRONG {w}" for w in r["wrong"]]
            + [f"TOUCHED {t}" for t in r["touched"]]
        )
        out.append(
            f"{r['project']:28} {r['vendor']:7} {r['expected']:>8} {len(r['found']):>3} {r['applied']:>7}  {notes}"
        )
        if lines:
            out += [f"    {line[:200]}" for line in r["lines"]]
    for vendor, t in list(data["totals"].items()) + [("all", data["all"])]:
        out.append(
            f"{vendor:7} recall {t['found']}/{t['expected']} = {t['recall']:.3f}   precision "
            f"{t['applied'] - t['wrong']}/{t['applied']} = {t['precision']:.3f}   left-alone touched {t['touched']}"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose package plans (default: this one)")
    ap.add_argument("--out", type=Path, help="also write the table to this file")
    ap.add_argument("--lines", action="store_true", help="print what the plan says of each GPU switch")
    args = ap.parse_args()
    text = "\n".join(table(run(args.tree.resolve()), args.lines)) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
