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
    "sm_50": "Maxwell",
    "sm_52": "Maxwell",
    "sm_53": "Maxwell",
    "sm_60": "Pascal",
    "sm_61": "Pascal",
    "sm_62": "Pascal",
    "sm_70": "Volta",
    "sm_72": "Volta",
    "sm_75": "Turing",
    "sm_80": "Ampere",
    "sm_86": "Ampere",
    "sm_87": "Ampere",
    "sm_88": "Ampere",
    "sm_89": "Ada",
    "sm_90": "Hopper",
    "sm_100": "Blackwell",
    "sm_101": "Blackwell",
    "sm_103": "Blackwell",
    "sm_110": "Blackwell",
    "sm_120": "Blackwell",
    "sm_121": "Blackwell",
}
NVIDIA_PRODUCTS = {  # the products users name, for hints ("H100" -> sm_90); NVIDIA's CUDA GPUs list
    "sm_50": "GeForce GTX 750 Ti, GTX 750, Quadro K2200",
    "sm_52": "GeForce GTX 980 Ti, GTX 980, GTX 970, GTX TITAN X, Tesla M40, M60",
    "sm_53": "Jetson TX1, Jetson Nano",
    "sm_60": "Tesla P100",
    "sm_61": "GeForce GTX 1080 Ti, GTX 1080, GTX 1070, GTX 1060, TITAN Xp, Tesla P40, P4",
    "sm_62": "Jetson TX2",
    "sm_70": "Tesla V100, TITAN V",
    "sm_72": "Jetson AGX Xavier, Xavier NX",
    "sm_75": "Tesla T4, GeForce RTX 2080 Ti, RTX 2080, RTX 2070, RTX 2060, GTX 1660 Ti, GTX 1650, TITAN RTX, Quadro RTX 6000, Quadro RTX 8000",
    "sm_80": "A100, A800, A30",
    "sm_86": "A40, A10, A16, A2, RTX A6000, RTX A5000, RTX A4000, GeForce RTX 3090, RTX 3080, RTX 3070, RTX 3060",
    "sm_87": "Jetson AGX Orin, Orin NX, Orin Nano",
    "sm_89": "L4, L40, L40S, RTX 6000 Ada, GeForce RTX 4090, RTX 4080, RTX 4070, RTX 4060",
    "sm_90": "H100, H200, H800, H20, GH200",
    "sm_100": "B200, GB200",
    "sm_103": "B300, GB300",
    "sm_110": "Jetson Thor",
    "sm_120": "GeForce RTX 5090, RTX 5080, RTX 5070, RTX 5060, RTX PRO 6000 Blackwell",
    "sm_121": "DGX Spark (GB10)",
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
        if name in NVIDIA_PRODUCTS:
            table[name]["products"] = NVIDIA_PRODUCTS[name]
    OUT.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(table)} targets to {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
