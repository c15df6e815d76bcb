"""Regenerate rocm_build_backend/data/gpu_targets.json from the AMD GPU target table.

Usage: python tools/gen_targets.py path/to/amdgpu-targets.csv

The CSV is the researched table (family, dGPU/APU, xnack/sramecc, generic target,
KFD gfx_target_version, products); the JSON keeps only what the package reads.
NVIDIA compute capabilities are data too: they are listed in NVIDIA_TARGETS below.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "rocm_build_backend" / "data" / "gpu_targets.json"

# Compute capabilities nvcc 12/13 name (sm_XY; "a" and "f" variants where they exist).
NVIDIA_TARGETS = {
    "sm_50": "Maxwell", "sm_52": "Maxwell", "sm_53": "Maxwell",
    "sm_60": "Pascal", "sm_61": "Pascal", "sm_62": "Pascal",
    "sm_70": "Volta", "sm_72": "Volta", "sm_75": "Turing",
    "sm_80": "Ampere", "sm_86": "Ampere", "sm_87": "Ampere", "sm_88": "Ampere",
    "sm_89": "Ada", "sm_90": "Hopper", "sm_100": "Blackwell", "sm_101": "Blackwell",
    "sm_103": "Blackwell", "sm_110": "Blackwell", "sm_120": "Blackwell", "sm_121": "Blackwell",
}


def _kind(raw: str, name: str) -> str:
    raw = raw.lower()
    if name.endswith("-generic"):
        return "generic"
    if raw.startswith("apu"):
        return "apu"
    if raw.startswith("dgpu"):
        return "dgpu"
    return "unknown"


def _flag(raw: str) -> bool | None:
    return {"yes": True, "no": False}.get(raw.strip().lower())


def main(csv_path: str) -> None:
    table: dict[str, dict] = {}
    with open(csv_path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            name = row["target"].strip()
            if not re.fullmatch(r"gfx[0-9a-z-]+", name) or name.endswith("-strict"):
                continue
            generic = row["generic_target"].strip()
            generic = generic.split()[0] if generic.startswith("gfx") else None
            kfd = row["kfd_gfx_target_version"].strip()
            table[name] = {
                "vendor": "amd",
                "family": row["generation_family"].strip(),
                "kind": _kind(row["dgpu_or_apu"], name),
                "xnack": _flag(row["xnack_feature_applies"]),
                "sramecc": _flag(row["sramecc_feature_applies"]),
                "generic": generic,
                "kfd": int(kfd) if kfd.isdigit() else None,
                "products": row["example_products"].strip(),
                "verified": "unverified" not in row["dgpu_or_apu"].lower(),
                "first_llvm": row["first_llvm_major"].strip(),
            }
    for name, family in NVIDIA_TARGETS.items():
        table[name] = {"vendor": "nvidia", "family": family, "kind": "dgpu"}
    OUT.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(table)} targets to {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
