"""`audit`, `check` (wheels, or `--env`), `cache`, `index` and `install`: what wheels hold and
where they may go."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rocm_build_backend.cli import render
from rocm_build_backend.cli.common import (
    TARGETS_ENV,
    TARGETS_WHERE,
    AddVerb,
    JSON_HELP,
    check_devices,
    detect_args,
    detection,
    print_json,
    targets_from_env,
)
from rocm_build_backend.errors import RocmBuildBackendError


def cmd_audit(args: argparse.Namespace) -> int:
    from rocm_build_backend.binary.audit import audit_paths

    for path in args.paths:
        if not os.path.exists(path):
            raise RocmBuildBackendError(
                f"no such file or folder: {path}", hint="give wheels, .so files, code objects or folders"
            )
    report = audit_paths([Path(p) for p in args.paths])
    if args.json:
        print_json(report.to_json())
    else:
        print(render.audit(report))
    return report.exit_code


def cmd_check_env(args: argparse.Namespace) -> int:
    from rocm_build_backend.wheel.check.environment import check_environment

    if args.wheels:
        raise RocmBuildBackendError("check --env takes no wheels", hint="check wheels and environments in two runs")
    devices, notes, generic_ok = check_devices(args)
    from rocm_build_backend.wheel.check.environment import default_cache_path

    report = check_environment(
        args.env or None,
        devices,
        notes=notes,
        generic_ok=generic_ok,
        cache_path=None if args.no_cache else default_cache_path(),
        strict=args.strict,
    )
    if args.json:
        print_json(report.to_json())
    else:
        print(render.environment(report))
    return report.exit_code


def cmd_check(args: argparse.Namespace) -> int:
    from rocm_build_backend.wheel.check.wheels import check_wheels

    if args.env is not None:
        return cmd_check_env(args)
    if not args.wheels:
        args.check_parser.error("give the wheels to check, or --env")  # usage, exit 2, as before --env
    for path in args.wheels:
        if not os.path.exists(path):
            raise RocmBuildBackendError(f"no such wheel: {path}", hint="give the paths of .whl files")
    devices, notes, generic_ok = check_devices(args)
    report = check_wheels(
        [Path(p) for p in args.wheels], devices, notes=notes, generic_ok=generic_ok, strict=args.strict
    )
    if args.json:
        print_json(report.to_json())
    else:
        print(render.check(report))
    return report.exit_code


def cmd_cache(args: argparse.Namespace) -> int:
    from rocm_build_backend.wheel.cache.run import list_cache, purge_cache
    from rocm_build_backend.gpu.targets import parse_targets

    given = args.targets if args.targets is not None or args.root else targets_from_env()
    if given is not None:
        from rocm_build_backend.wheel.index.plan import named_targets

        targets = parse_targets(
            named_targets(given), where=TARGETS_WHERE if args.targets is not None else f" in {TARGETS_ENV}"
        )
    else:
        from rocm_build_backend.gpu.detect import require_targets

        targets = [d.target for d in detection(args, keep_features=True).devices if d.included]
        if not targets:
            try:
                require_targets(detection(args))
            except RocmBuildBackendError as exc:  # cache reads --targets, not the build settings
                exc.hint = "name the targets the cached wheels must load on: --targets gfx942"
                raise
    kw: dict[str, Any] = {
        "cache_dirs": [Path(d) for d in args.cache_dir] if args.cache_dir else None,
        "tools": ("pip", "uv") if args.tool == "all" else (args.tool,),
    }
    if args.action == "list":
        result = list_cache(targets, **kw)
        result.purge_args = (
            (["--targets", args.targets] if args.targets is not None else [])
            + (["--tool", args.tool] if args.tool != "all" else [])
            + [a for d in args.cache_dir or [] for a in ("--cache-dir", d)]
            + ([] if args.root is None else ["--root", args.root])
        )
    else:
        result = purge_cache(targets, yes=args.yes, **kw)
    if args.json:
        print_json(result.to_json())
    else:
        print(render.cache(result))
    return result.exit_code


def cmd_index(args: argparse.Namespace) -> int:
    from rocm_build_backend.errors import ConfigError
    from rocm_build_backend.gpu.targets import parse_targets
    from rocm_build_backend.wheel.index.plan import named_targets

    targets: Any = None
    if args.targets is not None:  # with --family, family names too: build_index parses them
        names = named_targets(args.targets)
        targets = names if args.family else parse_targets(names, where=TARGETS_WHERE)
    out, wheels = index_paths(args)
    if args.add or args.remove:
        from rocm_build_backend.wheel.index.publish import publish

        if args.base_url or args.split:
            raise ConfigError(
                [f"{'--base-url' if args.base_url else '--split'} does not go with --add/--remove"],
                hint="published wheels are hosted in OUT_DIR/files/; split them first "
                "(rocm-build-backend split WHEEL) and add the split wheels",
            )
        result = publish(
            Path(out),
            add=wheels,
            remove=args.remove or [],
            targets=targets,
            family=args.family,
            variants=args.variants,
            lists=args.json,
        )
    else:
        from rocm_build_backend.wheel.index.run import build_index

        result = build_index(
            Path(wheels[0]),
            Path(out),
            targets=targets,
            family=args.family,
            base_url=args.base_url,
            variants=args.variants,
            split=args.split,
            lists=args.json,
        )
    if args.json:
        print_json(result.to_json())
    else:
        print(render.index(result))
    return result.exit_code


def index_paths(args: argparse.Namespace) -> tuple[str, list[str]]:
    """``index``'s (output folder, wheel paths): WHEEL_DIR -o OUT; --add WHEEL... -o OUT;
    --remove NAME==VERSION -o OUT."""
    paths = list(args.paths)
    want = "WHEEL... " if args.add else "" if args.remove else "WHEEL_DIR "
    if args.outdir is None:
        args.index_parser.error(f"give the output folder: {want}-o/--outdir DIR")  # usage, exit 2
    if args.add and not paths:
        args.index_parser.error("--add needs the wheels (or folders of them) to add: --add WHEEL... -o DIR")
    if args.remove and not args.add and paths:
        args.index_parser.error(f"--remove takes NAME==VERSION and -o DIR, not {paths[0]}")
    if not (args.add or args.remove) and len(paths) != 1:
        raise RocmBuildBackendError(
            f"index takes one WHEEL_DIR, not {len(paths)} paths: {' '.join(paths[:3])}",
            hint="to add single wheels: rocm-build-backend index --add WHEEL... -o OUT_DIR",
        )
    return str(args.outdir), paths


def cmd_install(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

    from rocm_build_backend import files
    from rocm_build_backend.builder.interrupt import terminated_as_exit
    from rocm_build_backend.wheel.install.run import install_inspected

    devices, notes, generic_ok = check_devices(args)
    env = dict(os.environ)
    if args.root:  # builds through the shim see the same GPUs as the check
        env["ROCM_BUILD_BACKEND_SYSFS_ROOT"] = str(Path(args.root).resolve())
    if devices:  # and build for them, whatever named them (--targets, recorded outputs, detection)
        env["ROCM_BUILD_BACKEND_TARGETS"] = args.targets or targets_from_env() or build_targets(devices)
    top = Path(tempfile.gettempdir())
    files.remove_leftovers(top, files.leftover_pattern(_INSTALL_WORK, ""))  # what killed runs left
    work = files.temp_folder(top, _INSTALL_WORK)
    try:
        with terminated_as_exit():  # SIGTERM ends the run as Ctrl-C does: the folder goes
            result = install_inspected(
                args.pip_args,
                devices,
                work_dir=work,
                generic_ok=generic_ok,
                notes=notes,
                dry_run=args.dry_run,
                python=args.python,
                env=env,
                tool=args.tool,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print_json(result.to_json())
    else:
        print(render.install(result))
    return result.exit_code


_INSTALL_WORK = "rocm-build-backend-install-"  # + <pid>-<random>: a later run removes a killed run's


def build_targets(devices: list[Any]) -> str:
    """The targets a build for these devices gets: each processor once (features dropped, as
    detection gives a build), in the stable order."""
    from rocm_build_backend.gpu.targets import GpuTarget, join_targets, sort_targets

    return join_targets(sort_targets({GpuTarget(str(d).split(":", 1)[0]) for d in devices}), ";")


def register(add: AddVerb) -> None:
    sp = add("audit", cmd_audit, "list the GPU code that wheels, .so files and code objects hold")
    sp.add_argument("paths", nargs="+", metavar="PATH", help="wheels, shared libraries (.so) or code objects to read")
    sp.add_argument("--json", action="store_true", help=JSON_HELP.format(verb="audit"))

    sp = add("check", cmd_check, "will each wheel's GPU code load on this machine's GPUs?")
    sp.add_argument("wheels", nargs="*", metavar="WHEEL", help="the wheels to check (none: give --env)")
    sp.add_argument("--json", action="store_true", help=JSON_HELP.format(verb="check"))
    sp.add_argument("--targets", help="check against these targets instead of this machine's GPUs")
    sp.add_argument(
        "--env",
        nargs="?",
        const="",
        metavar="PYTHON",
        help="check the installed distributions of PYTHON's environment (default: this one)",
    )
    sp.add_argument(
        "--no-cache",
        action="store_true",
        help="with --env: audit every file again, and keep nothing (default: results are kept "
        "per file, by size, mtime and inode, in $XDG_CACHE_HOME/rocm-build-backend)",
    )
    sp.add_argument(
        "--strict",
        action="store_true",
        help="every kernel module must have code for the GPU (default: on NVIDIA GPUs, a library's "
        "modules for other GPUs are allowed, as CUDA loads and launches them only where they fit)",
    )
    sp.set_defaults(check_parser=sp)
    detect_args(sp)

    sp = add("cache", cmd_cache, "find (and purge) cached wheels made for other GPUs")
    sp.add_argument(
        "action", choices=["list", "purge"], help="list the cached wheels made for other GPUs, or purge them"
    )
    sp.add_argument("--tool", choices=["pip", "uv", "all"], default="all", help="whose cache to read (default: all)")
    sp.add_argument("--cache-dir", metavar="DIR", action="append", help="a cache folder (default: pip's and uv's own)")
    sp.add_argument("--targets", help="the targets that fit (default: this machine's GPUs)")
    sp.add_argument("--yes", action="store_true", help="really remove (purge)")
    sp.add_argument("--json", action="store_true", help=JSON_HELP.format(verb="cache"))
    detect_args(sp)

    sp = add("install", cmd_install, "pip install, with every wheel checked against this machine's GPUs first")
    sp.add_argument("--dry-run", action="store_true", help="print the table; install nothing")
    sp.add_argument(
        "--python", metavar="PYTHON", help="the interpreter whose pip collects and installs (default: this one)"
    )
    sp.add_argument("--tool", choices=["pip", "uv"], default="pip", help="the installer that resolves and installs")
    sp.add_argument("--targets", help="check against these targets instead of this machine's GPUs")
    sp.add_argument("--json", action="store_true", help="print the table as JSON")
    sp.add_argument(
        "pip_args",
        nargs=argparse.REMAINDER,
        metavar="PIP_ARGS",
        help="pip's arguments: requirements and index options (put them after --)",
    )
    detect_args(sp)

    sp = add("index", cmd_index, "write a static package index per GPU target")
    sp.usage = (
        "%(prog)s [options] WHEEL_DIR -o OUT_DIR\n       %(prog)s [options] --add WHEEL... -o OUT_DIR\n"
        "       %(prog)s [options] --remove NAME==VERSION -o OUT_DIR"
    )
    sp.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="WHEEL_DIR: OUT_DIR lists exactly the wheels of WHEEL_DIR; with --add: the wheels (or "
        "folders of them) to add.",
    )
    sp.add_argument("-o", "--outdir", metavar="DIR", help="where the index goes")
    sp.set_defaults(index_parser=sp)
    sp.add_argument(
        "--add",
        action="store_true",
        help="add the wheels given (copied into OUT_DIR/files/) and keep everything else: "
        "for many jobs publishing into one OUT_DIR",
    )
    sp.add_argument(
        "--remove",
        action="append",
        metavar="NAME==VERSION",
        help="remove every wheel of that version (exactly; repeatable)",
    )
    sp.add_argument(
        "--targets",
        help="the indexes to write (with --family: targets or family names); every index "
        "OUT_DIR already holds is kept up to date too; exit 1 if one has nothing to serve",
    )
    sp.add_argument("--family", action="store_true", help="group AMD targets by family (gfx94X-dcgpu, ...)")
    sp.add_argument("--base-url", help="where the wheels are served from (default: relative links)")
    sp.add_argument(
        "--variants",
        action="store_true",
        help="also write OUT/variants/simple/: every variant wheel and its <name>-<version>-variants.json",
    )
    sp.add_argument(
        "--split",
        action="store_true",
        help="split wheels with code for several targets per target on the way in; index the split wheels",
    )
    sp.add_argument("--json", action="store_true", help=JSON_HELP.format(verb="index"))
