"""The tables of an H200 run (``summary.md``) from its ``results.json``; used by run_h200.py.

python3 bench/h200/h200_summary.py results.json     # prints the tables again
"""

from __future__ import annotations

import json
import sys
from typing import Any


def summary(r: dict[str, Any]) -> str:
    """The tables of one run (summary.md), from its results."""
    lines = ["# H200 run", "", f"started {r['started']}", ""]
    rec = r.get("record", {})
    if isinstance(rec, dict) and "detect" in rec:
        lines += [
            "## Detection (NVML in process, then CUDA_VISIBLE_DEVICES)",
            "",
            "| CUDA_VISIBLE_DEVICES | answer |",
            "|---|---|",
        ]
        for label, d in rec["detect"].items():
            ans = ", ".join(d["ok"]["targets"]) + f" ({d['ok']['source']})" if "ok" in d else d["error"]
            lines.append(f"| {label} (`{d['value']}`) | {ans[:160]} |")
        lines.append("")
    tl = r.get("tools", {})
    if isinstance(tl, dict) and "error" not in tl:
        lines += ["## Pinned nvidia-smi, nvcc check, detection through the vendor registry", ""]
        for key, val in tl.items():
            if key.startswith("gpu.detect"):
                lines.append(f"- {key}: targets {val['json']['targets']}, source {val['json']['source']}")
            elif key.startswith("nvcc"):
                lines.append(
                    f"- {key}: " + (val["refused"] if "refused" in val else f"accepted by CUDA {val['version']}")
                )
            else:
                lines.append(f"- {key}: exit {val['rc']}, `{val['out'][:120]}`")
        lines.append("")
    rows = r.get("matrix", [])
    if isinstance(rows, list):
        lines += [
            "## One kernel, launched on the GPU",
            "",
            "| code in the binary | audit reads | rules predict | check (exit) | launch | rules |",
            "|---|---|---|---|---|---|",
        ]
        for row in rows:
            if "real" not in row:
                lines.append(f"| {row['code']} | build failed | | | | |")
                continue
            says = {0: "runs", 1: "does not"}.get(row["check_exit"], "cannot tell")
            lines.append(
                f"| {row['code']} | {' '.join(row['audit'])} | {row['predicted']} | "
                f"{says} ({row['check_exit']}) | {row['real']} | {'right' if row['prediction_right'] else 'WRONG'} |"
            )
        lines.append("")
    ts = r.get("torch_spellings", {})
    if isinstance(ts, dict) and "rows" in ts:
        lines += [
            f"## TORCH_CUDA_ARCH_LIST: ours against torch {ts['torch']}'s own parser",
            "",
            "| spelling | agree | torch | ours |",
            "|---|---|---|---|",
        ]
        for row in ts["rows"]:
            lines.append(f"| `{row['spelling']}` | {row['agree']} | {row['torch']} | {row['ours']} |")
        lines.append("")
    srows = r.get("samples", [])
    if isinstance(srows, list):
        lines += [
            "## Samples",
            "",
            "| sample | targets | build s | .so bytes | audit | check exit | run |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in srows:
            lines.append(
                f"| {row['sample']} | {row['build']} | {row.get('build_seconds')} | {row.get('so_bytes')} | "
                f"{' '.join(row.get('audit', []))} | {row.get('check_exit')} | {row.get('real', row.get('build_error', '')[:80])} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as fh:
        print(summary(json.load(fh)), end="")
