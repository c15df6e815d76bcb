"""`thin` and `split`: wheels whose device code is only what some GPUs load."""

from __future__ import annotations

import argparse
from pathlib import Path

from rocm_build_backend.cli import render
from rocm_build_backend.cli.common import (
    TARGETS_WHERE,
    AddVerb,
    JSON_HELP,
    print_json,
)


KEEP_LAYOUT = (
    "rewrite libraries in place only: they keep their size and layout (default: the freed "
    "bytes are cut out of each library's file, so the installed wheel shrinks too)"
)


def cmd_thin(args: argparse.Namespace) -> int:
    """Exit 0 written; 1 no code for a target, or a file kept whole; 2 a wheel thin does not
    take; 3 damaged."""
    from rocm_build_backend.gpu.targets import parse_targets
    from rocm_build_backend.wheel.thin.run import thin_wheel

    result = thin_wheel(
        Path(args.wheel),
        parse_targets(args.targets, where=TARGETS_WHERE),
        Path(args.outdir),
        force=args.force,
        keep_layout=args.keep_layout,
    )
    if args.json:
        print_json(result.to_json())
    else:
        print(render.thin(result))
    return result.exit_code


def cmd_split(args: argparse.Namespace) -> int:
    """Exit codes as for thin."""
    from rocm_build_backend.wheel.thin.split import split_wheel

    result = split_wheel(
        Path(args.wheel), Path(args.outdir), per=args.per, force=args.force, keep_layout=args.keep_layout
    )
    if args.json:
        print_json(result.to_json())
    else:
        print(render.split(result))
    return result.exit_code


def register(add: AddVerb) -> None:
    sp = add("thin", cmd_thin, "write a copy of a wheel whose GPU code is only what loads on the targets")
    sp.add_argument("wheel", metavar="WHEEL", help="the wheel to read (it is never changed)")
    sp.add_argument("--targets", required=True, help="the GPUs to keep code for (gfx942, sm_90, ...)")
    sp.add_argument("-o", "--outdir", default=".", metavar="DIR", help="where the new wheel goes (default: .)")
    sp.add_argument(
        "--force", action="store_true", help="replace an earlier thin result for other targets under the same name"
    )
    sp.add_argument("--keep-layout", action="store_true", help=KEEP_LAYOUT)
    sp.add_argument("--json", action="store_true", help=JSON_HELP.format(verb="thin"))

    sp = add("split", cmd_split, "write one thinned wheel per target (or AMD family), with a local version")
    sp.add_argument("wheel", metavar="WHEEL", help="the wheel to read (it is never changed)")
    sp.add_argument(
        "--per",
        choices=["target", "family"],
        default="target",
        help="one wheel per GPU target (default) or per AMD family",
    )
    sp.add_argument("-o", "--outdir", default=".", metavar="DIR", help="where the new wheels go (default: .)")
    sp.add_argument(
        "--force", action="store_true", help="replace earlier split results for other targets under the same names"
    )
    sp.add_argument("--keep-layout", action="store_true", help=KEEP_LAYOUT)
    sp.add_argument("--json", action="store_true", help=JSON_HELP.format(verb="split"))
