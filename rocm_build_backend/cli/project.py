"""`plan`, `build` and `configure`: a project through the shim, from the command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rocm_build_backend.cli.common import (
    AddVerb,
    C_HELP,
    JSON_HELP,
    PATH_HELP,
    SOURCE_HELP,
    build_settings,
    print_json,
)
from rocm_build_backend.errors import ConfigError, RocmBuildBackendError


def cmd_plan(args: argparse.Namespace) -> int:
    from rocm_build_backend.builder.project import plan_json, plan_project
    from rocm_build_backend.builder.sdist import source
    from rocm_build_backend.builder.settings import PLAN_HINT, SETTINGS_HINT

    try:
        with source(args.path, None) as src:  # an sdist is unpacked for the plan as for the build
            prepared, stale = plan_project(src.folder, build_settings(args))
    except ConfigError as exc:  # not "run plan" to the user running plan
        exc.hint = SETTINGS_HINT if exc.hint == f"{SETTINGS_HINT}; {PLAN_HINT}" else exc.hint
        raise
    clean = prepared.project.settings.stale == "clean"
    data = plan_json(prepared, stale)
    if args.json:
        print_json(data)
    else:
        _print_plan(prepared, stale, data, clean)
    if prepared.compiler_problem is not None:  # the plan is shown; the check's verdict decides the exit
        raise prepared.compiler_problem
    return 0


def _print_plan(prepared: Any, stale: list[Any], data: dict[str, Any], clean: bool) -> None:
    for line in prepared.plan.summary():
        print(line)
    if prepared.compiler:
        print(f"compiler {prepared.compiler.describe()} accepts {' '.join(data['targets'])}")
    for tree in stale:
        if clean and tree.owned:
            print(f'stale build tree {tree.path} (built for {tree.built_for}): stale = "clean" will remove it')
        else:
            why = "" if tree.owned else ", and nothing proves a build of this project made it"
            print(f"warning: stale build tree {tree.path} (built for {tree.built_for}{why}) will stop the build")


def cmd_build(args: argparse.Namespace) -> int:
    """Exit 0 built; 1 refused (stale tree, compiler, missing target), failed, or a wheel without
    device code from a project with GPU switches; 2 a bad setting or sdist; 3 no GPU found (the
    hook's own code, see ``builder.project.failed``); 128 + N stopped by signal N (130 SIGINT,
    143 SIGTERM), once the build's processes have ended."""
    from rocm_build_backend.builder.project import build_project
    from rocm_build_backend.builder.sdist import source

    with source(args.path, Path(args.outdir) if args.outdir else None) as src:
        built = build_project(src.folder, src.outdir, build_settings(args), echo=not args.quiet)
        if src.folder != Path(args.path):  # an sdist, or NAME==VERSION: name what was given
            built.project = src.sdist or Path(args.path)
    for path, targets in built.stale:
        print(
            f"warning: {path} in the output folder was built for {' '.join(targets) or 'no GPU target'}",
            file=sys.stderr,
        )
    if args.json:
        print_json(built.to_json())
    else:
        print(built.wheel)
    if built.finding is not None:
        if not args.json:
            built.finding.hint = f"{built.finding.hint} (the wheel is in {built.wheel.parent})"
        raise built.finding
    return 0


def cmd_configure(args: argparse.Namespace) -> int:
    from rocm_build_backend.builder.configure import configure

    if not Path(args.path).is_dir():
        raise RocmBuildBackendError(f"{args.path} is not a folder", hint="give the project's folder")
    result = configure(Path(args.path), write=not (args.diff or args.dry_run))
    if args.json:
        print_json(result.to_json())
    elif args.diff:
        sys.stdout.write(result.diff())
    else:
        from rocm_build_backend.binary.printable import printable

        print(printable(result.message))  # names the backend the file declares
    if not args.json:
        for note in result.notes:  # the pin and its hash, what an isolated build lacks: stderr
            print(note if note.startswith("warning:") else f"note: {note}", file=sys.stderr)
    return 0


def register(add: AddVerb) -> None:
    sp = add("plan", cmd_plan, "show what a build would get, without building")
    sp.add_argument("path", nargs="?", default=".", help=SOURCE_HELP)
    sp.add_argument("--json", action="store_true", help=JSON_HELP.format(verb="plan"))
    sp.add_argument("--targets", help="build for these targets (gfx90a;gfx942), as -C rocm-build-backend.targets=")
    sp.add_argument("-C", "--config-setting", action="append", metavar="KEY=VALUE", help=C_HELP)

    sp = add("build", cmd_build, "build a project's wheel through the shim (no build isolation)")
    sp.add_argument("path", nargs="?", default=".", help=SOURCE_HELP)
    sp.add_argument(
        "-o",
        "--outdir",
        metavar="DIR",
        help="where the wheel goes (default: PATH/dist; beside an sdist; ./dist for NAME==VERSION)",
    )
    sp.add_argument("--targets", help="build for these targets (gfx90a;gfx942), as -C rocm-build-backend.targets=")
    sp.add_argument("-C", "--config-setting", action="append", metavar="KEY=VALUE", help=C_HELP)
    sp.add_argument("--json", action="store_true", help="print what was built as JSON (the build log stays on stderr)")

    sp = add("configure", cmd_configure, "make a project's pyproject.toml build through the shim")
    sp.add_argument("path", nargs="?", default=".", help=PATH_HELP)
    sp.add_argument("--diff", action="store_true", help="show the change as a unified diff; write nothing")
    sp.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")
    sp.add_argument("--json", action="store_true", help="print what changed (or would change) as JSON")
