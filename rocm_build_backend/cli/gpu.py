"""`targets` and `detect`: the GPU target table, and what this machine has."""

from __future__ import annotations

import argparse
import sys

from rocm_build_backend.cli import render
from rocm_build_backend.cli.common import (
    AddVerb,
    JSON_HELP,
    detect_args,
    detection,
    print_json,
)
from rocm_build_backend.errors import CANNOT_TELL, RocmBuildBackendError


def cmd_targets(args: argparse.Namespace) -> int:
    from rocm_build_backend.gpu.targets import GpuTarget, sort_targets, table
    from rocm_build_backend.gpu.vendor import vendor_names

    first = vendor_names()[0]  # without --all: the first vendor of the registry (docs/json/targets.md)
    rows = sort_targets(GpuTarget(n) for n, r in table().items() if args.all or r.get("vendor") == first)
    if args.json:  # data/schemas/targets.schema.json, docs/json/targets.md
        columns = (
            "vendor",
            "family",
            "kind",
            "xnack",
            "sramecc",
            "generic",
            "kfd",
            "first_llvm",
            "products",
            "verified",
        )
        print_json(
            {
                "schema_version": 1,
                "targets": [{"name": t.processor, **{c: table()[t.processor].get(c) for c in columns}} for t in rows],
            }
        )
        return 0
    for t in rows:
        r = table()[t.processor]
        print(f"{t.processor:<16} {r.get('kind', ''):<8} {r.get('family', '')}")
    return 0


def cmd_detect(args: argparse.Namespace) -> int:
    found = detection(args, keep_features=args.features)
    if args.json:
        print_json(found.to_json())
    else:
        print(render.detection(found))
    if found.targets:
        return 0
    if not args.json:
        from rocm_build_backend.gpu.detect import require_targets

        try:
            require_targets(found)
        except RocmBuildBackendError as exc:  # the table above already says what each probe saw
            if exc.hint:
                print(f"hint: {exc.hint}", file=sys.stderr)
    return CANNOT_TELL


def register(add: AddVerb) -> None:
    sp = add("targets", cmd_targets, "list the known GPU targets")
    sp.add_argument(
        "--all", action="store_true", help="include every vendor's targets, not only the first vendor's (AMD)"
    )
    sp.add_argument("--json", action="store_true", help=JSON_HELP.format(verb="targets"))

    sp = add("detect", cmd_detect, "show this machine's GPUs and the targets a build would get")
    sp.add_argument("--json", action="store_true", help=JSON_HELP.format(verb="detect"))
    sp.add_argument("--features", action="store_true", help="keep xnack/sramecc modes in the build targets")
    detect_args(sp)
