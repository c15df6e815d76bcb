"""`rocm-build-backend` and `python -m rocm_build_backend`: the only printer.

    targets                      the known GPU targets
    detect [--json]              this machine's GPUs and the targets a build would get
    plan [PATH] [--json]         what a build of PATH would get, without building
    build PATH [-o DIR] [-C ..]  build PATH's wheel through the shim, no build isolation
    configure PATH [--diff]      make PATH's pyproject.toml build through the shim
    audit PATH... [--json]       the GPU code wheels, .so files and code objects really hold
    check WHEEL... [--json]      will each wheel's GPU code load on this machine?
    cache list|purge             wheels in pip's and uv's caches made for other GPUs
    index WHEEL_DIR OUT_DIR      a static package index per GPU target
    install [--dry-run] -- PIP_ARGS...   pip install, every wheel checked against this machine's GPUs first
    check --env [PYTHON]         the installed distributions of an environment against this machine's GPUs
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from rocm_build_backend.errors import CANNOT_TELL, RocmBuildBackendError

EXIT_CODES = """exit codes, the same for every command:
  0  success, or yes (every wheel loads here, targets found, ...)
  1  a definite no: does not load, build refused, a problem found
  2  a usage or input error (bad option, unknown target, missing file)
  3  cannot tell: no GPU found, a file that cannot be read"""


def _print_json(data: Any) -> None:
    print(data if isinstance(data, str) else json.dumps(data, indent=2, sort_keys=False))


def _detect_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("detection from recorded data instead of this machine")
    from rocm_build_backend.gpu.vendor import vendors

    g.add_argument("--root", metavar="DIR", help="folder that stands for / in every sysfs read")
    for vendor in vendors():  # each vendor names the tool outputs it can replay
        for rec in vendor.recorded_outputs:
            g.add_argument(rec.option, metavar="FILE", dest=_dest(rec.option), help=rec.help)


def _dest(option: str) -> str:
    return "recorded_" + option.lstrip("-").replace("-", "_")


def _read(path: str, what: str) -> str:
    """A recorded tool output: a regular file, at most what a detection program may print."""
    from rocm_build_backend.gpu.files import read_small_text
    from rocm_build_backend.gpu.programs import OUTPUT_LIMIT

    try:
        return read_small_text(path, OUTPUT_LIMIT)
    except OSError as exc:
        raise RocmBuildBackendError(f"cannot read {what} {path}: {exc.strerror or exc}",
                                    hint="give the path of a file that holds the tool's output") from None


def _detection(args: argparse.Namespace, *, keep_features: bool = False) -> Any:
    from rocm_build_backend.gpu.detect import detect
    from rocm_build_backend.gpu.vendor import vendors

    recorded = {}
    for vendor in vendors():
        for rec in vendor.recorded_outputs:
            if getattr(args, _dest(rec.option), None):
                recorded[rec.probe] = _read(getattr(args, _dest(rec.option)), rec.option)
    kw: dict[str, Any] = {"keep_features": keep_features}
    if args.root:
        if not Path(args.root).is_dir():
            raise RocmBuildBackendError(f"--root {args.root} is not a folder", hint="give the folder that stands for /")
        kw["root"] = Path(args.root)
    if recorded or args.root:
        kw["recorded"] = recorded  # recorded data only: no live program runs
    return detect(**kw)


# ------------------------------------------------------------------------ commands

def cmd_targets(args: argparse.Namespace) -> int:
    from rocm_build_backend.gpu.targets import GpuTarget, sort_targets, table

    rows = sort_targets(GpuTarget(n) for n, r in table().items() if args.all or r.get("vendor") == "amd")
    if args.json:  # data/schemas/targets.schema.json, docs/json/targets.md
        columns = ("vendor", "family", "kind", "xnack", "sramecc", "generic", "kfd", "first_llvm", "products",
                   "verified")
        _print_json({"schema_version": 1, "targets": [
            {"name": t.processor, **{c: table()[t.processor].get(c) for c in columns}} for t in rows]})
        return 0
    for t in rows:
        r = table()[t.processor]
        print(f"{t.processor:<16} {r.get('kind', ''):<8} {r.get('family', '')}")
    return 0


def cmd_detect(args: argparse.Namespace) -> int:
    found = _detection(args, keep_features=args.features)
    if args.json:
        _print_json(found.to_json())
    else:
        print(found.to_text())
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


def cmd_plan(args: argparse.Namespace) -> int:
    from rocm_build_backend.build.project import plan_json, plan_project

    prepared, stale = plan_project(Path(args.path), _build_settings(args))
    clean = prepared.project.settings.stale == "clean"
    data = plan_json(prepared, stale)
    if args.json:
        _print_json(data)
        return 0
    for line in prepared.plan.summary():
        print(line)
    if prepared.compiler:
        print(f"compiler {prepared.compiler.describe()} accepts {' '.join(data['targets'])}")
    for tree in stale:
        if clean and tree.owned:
            print(f"stale build tree {tree.path} (built for {tree.built_for}): stale = \"clean\" will remove it")
        else:
            why = "" if tree.owned else ", and nothing proves a build of this project made it"
            print(f"warning: stale build tree {tree.path} (built for {tree.built_for}{why}) will stop the build")
    return 0


def _config_settings(items: Sequence[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise RocmBuildBackendError(f"-C {item}: expected KEY=VALUE",
                                        hint="e.g. -C rocm-build-backend.targets=gfx942")
        if key in out:
            out[key] = (out[key] if isinstance(out[key], list) else [out[key]]) + [value]
        else:
            out[key] = value
    return out


def _build_settings(args: argparse.Namespace) -> dict[str, Any]:
    """-C settings, with --targets as -C rocm-build-backend.targets (the same list, or an error)."""
    settings = _config_settings(args.config_setting)
    if args.targets is not None:
        key = "rocm-build-backend.targets"
        given = settings.get(key)
        if given is not None and given != args.targets:
            raise RocmBuildBackendError(f"--targets {args.targets} and -C {key}={given} disagree",
                                        hint="give the targets once")
        settings[key] = args.targets
    return settings


def cmd_build(args: argparse.Namespace) -> int:
    from rocm_build_backend.build.project import build_project

    wheel, stale = build_project(Path(args.path), Path(args.outdir) if args.outdir else None,
                                 _build_settings(args))
    for path, targets in stale:
        print(f"warning: {path} in the output folder was built for {' '.join(targets) or 'no GPU target'}",
              file=sys.stderr)
    print(wheel)
    return 0


def cmd_configure(args: argparse.Namespace) -> int:
    from rocm_build_backend.build.configure import configure

    if not Path(args.path).is_dir():
        raise RocmBuildBackendError(f"{args.path} is not a folder", hint="give the project's folder")
    result = configure(Path(args.path), write=not (args.diff or args.dry_run))
    if args.diff:
        sys.stdout.write(result.diff())
    else:
        print(result.message)
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from rocm_build_backend.binary.audit import audit_paths

    for path in args.paths:
        if not os.path.exists(path):
            raise RocmBuildBackendError(f"no such file or folder: {path}", hint="give wheels, .so files, code objects or folders")
    report = audit_paths([Path(p) for p in args.paths])
    if args.json:
        _print_json(report.to_json())
    else:
        print(report.to_text())
    return 0 if report.ok else 1


def _check_devices(args: argparse.Namespace) -> tuple[list[Any], list[str], bool | None]:
    """(devices, notes, generic_ok) for check: --targets, else this machine's GPUs."""
    from rocm_build_backend.wheel.check import devices_from_detection, generic_ok_for, host_rocm_version
    from rocm_build_backend.gpu.targets import parse_targets

    if getattr(args, "targets", None) is not None:
        from rocm_build_backend.wheel.index_plan import named_targets

        return parse_targets(named_targets(args.targets)), [], True
    found = _detection(args, keep_features=True)
    devices, notes = devices_from_detection(found)
    root = Path(args.root) if args.root else Path("/")
    return devices, list(notes), generic_ok_for(host_rocm_version(root=root))


def cmd_check_env(args: argparse.Namespace) -> int:
    from rocm_build_backend.wheel.environment import check_environment

    if args.wheels:
        raise RocmBuildBackendError("check --env takes no wheels", hint="check wheels and environments in two runs")
    devices, notes, generic_ok = _check_devices(args)
    from rocm_build_backend.wheel.environment import default_cache_path

    report = check_environment(args.env or None, devices, notes=notes, generic_ok=generic_ok,
                               cache_path=None if args.no_cache else default_cache_path())
    if args.json:
        _print_json(report.to_dict())
    else:
        print(report.to_text())
    return report.exit_code


def cmd_check(args: argparse.Namespace) -> int:
    from rocm_build_backend.wheel.check import check_wheels

    if args.env is not None:
        return cmd_check_env(args)
    if not args.wheels:
        args.check_parser.error("give the wheels to check, or --env")  # usage, exit 2, as before --env
    for path in args.wheels:
        if not os.path.exists(path):
            raise RocmBuildBackendError(f"no such wheel: {path}", hint="give the paths of .whl files")
    devices, notes, generic_ok = _check_devices(args)
    report = check_wheels([Path(p) for p in args.wheels], devices, notes=notes, generic_ok=generic_ok)
    if args.json:
        _print_json(report.to_json())
    else:
        print(report.to_text())
    return report.exit_code


def cmd_cache(args: argparse.Namespace) -> int:
    from rocm_build_backend.wheel.cache import list_cache, purge_cache
    from rocm_build_backend.gpu.targets import parse_targets

    if args.targets is not None:
        from rocm_build_backend.wheel.index_plan import named_targets

        targets = parse_targets(named_targets(args.targets))
    else:
        from rocm_build_backend.gpu.detect import require_targets

        targets = [d.target for d in _detection(args, keep_features=True).devices if d.included]
        if not targets:
            try:
                require_targets(_detection(args))
            except RocmBuildBackendError as exc:  # cache reads --targets, not the build settings
                exc.hint = "name the targets the cached wheels must load on: --targets gfx942"
                raise
    kw: dict[str, Any] = {"cache_dirs": [Path(d) for d in args.cache_dir] if args.cache_dir else None,
                          "tools": ("pip", "uv") if args.tool == "all" else (args.tool,)}
    if args.action == "list":
        result = list_cache(targets, **kw)
    else:
        result = purge_cache(targets, yes=args.yes, **kw)
    if args.json:
        _print_json(result.to_json())
    else:
        print(result.to_text())
    return result.exit_code


def cmd_index(args: argparse.Namespace) -> int:
    from rocm_build_backend.wheel.index import build_index
    from rocm_build_backend.gpu.targets import parse_targets

    from rocm_build_backend.wheel.index_plan import named_targets

    targets: Any = None
    if args.targets is not None:  # with --family, family names too: build_index parses them
        names = named_targets(args.targets)
        targets = names if args.family else parse_targets(names)
    result = build_index(Path(args.wheel_dir), Path(args.out_dir), targets=targets,
                         family=args.family, base_url=args.base_url)
    if args.json:
        _print_json(result.to_json())
    else:
        print(result.to_text())
    return result.exit_code


def cmd_thin(args: argparse.Namespace) -> int:
    """Exit 0 written; 1 no code for a target; 2 a wheel thin does not take; 3 damaged."""
    from rocm_build_backend.gpu.targets import parse_targets
    from rocm_build_backend.wheel.thin import thin_wheel

    result = thin_wheel(Path(args.wheel), parse_targets(args.targets), Path(args.outdir))
    if args.json:
        _print_json(result.to_json())
    else:
        print(result.to_text())
    return 0


def cmd_split(args: argparse.Namespace) -> int:
    """Exit codes as for thin."""
    from rocm_build_backend.wheel.split import split_wheel

    result = split_wheel(Path(args.wheel), Path(args.outdir), per=args.per)
    if args.json:
        _print_json(result.to_json())
    else:
        print(result.to_text())
    return 0
def cmd_install(args: argparse.Namespace) -> int:
    import tempfile

    from rocm_build_backend.wheel.install import install_inspected

    devices, notes, generic_ok = _check_devices(args)
    env = dict(os.environ)
    if args.root:  # builds through the shim see the same GPUs as the check
        env["ROCM_BUILD_BACKEND_SYSFS_ROOT"] = str(Path(args.root).resolve())
    with tempfile.TemporaryDirectory(prefix="rocm-build-backend-install-") as work:
        result = install_inspected(args.pip_args, devices, work_dir=Path(work), generic_ok=generic_ok, notes=notes,
                                   dry_run=args.dry_run, python=args.python, env=env, tool=args.tool)
        print(result.to_text())
    return result.exit_code


# -------------------------------------------------------------------------- parser

def parser() -> argparse.ArgumentParser:
    from rocm_build_backend._version import __version__

    p = argparse.ArgumentParser(
        prog="rocm-build-backend",
        description="Build GPU Python packages for the right GPU targets, and prove it.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"rocm-build-backend {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, func: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help, epilog=EXIT_CODES,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        sp.set_defaults(func=func)
        return sp

    sp = add("targets", cmd_targets, "list the known GPU targets")
    sp.add_argument("--all", action="store_true", help="include NVIDIA targets")
    sp.add_argument("--json", action="store_true")

    sp = add("detect", cmd_detect, "show this machine's GPUs and the targets a build would get")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--features", action="store_true", help="keep xnack/sramecc modes in the build targets")
    _detect_args(sp)

    sp = add("plan", cmd_plan, "show what a build would get, without building")
    sp.add_argument("path", nargs="?", default=".")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--targets", help="build for these targets (gfx90a;gfx942), as -C rocm-build-backend.targets=")
    sp.add_argument("-C", "--config-setting", action="append", metavar="KEY=VALUE")

    sp = add("build", cmd_build, "build a project's wheel through the shim (no build isolation)")
    sp.add_argument("path", nargs="?", default=".")
    sp.add_argument("-o", "--outdir", metavar="DIR", help="where the wheel goes (default: PATH/dist)")
    sp.add_argument("--targets", help="build for these targets (gfx90a;gfx942), as -C rocm-build-backend.targets=")
    sp.add_argument("-C", "--config-setting", action="append", metavar="KEY=VALUE")

    sp = add("configure", cmd_configure, "make a project's pyproject.toml build through the shim")
    sp.add_argument("path", nargs="?", default=".")
    sp.add_argument("--diff", action="store_true", help="show the change as a unified diff; write nothing")
    sp.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")

    sp = add("audit", cmd_audit, "list the GPU code that wheels, .so files and code objects hold")
    sp.add_argument("paths", nargs="+", metavar="PATH")
    sp.add_argument("--json", action="store_true")

    sp = add("check", cmd_check, "will each wheel's GPU code load on this machine's GPUs?")
    sp.add_argument("wheels", nargs="*", metavar="WHEEL")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--targets", help="check against these targets instead of this machine's GPUs")
    sp.add_argument("--env", nargs="?", const="", metavar="PYTHON",
                    help="check the installed distributions of PYTHON's environment (default: this one)")
    sp.add_argument("--no-cache", action="store_true",
                    help="with --env: audit every file again, and keep nothing (default: results are kept "
                         "per file, by size, mtime and inode, in $XDG_CACHE_HOME/rocm-build-backend)")
    sp.set_defaults(check_parser=sp)
    _detect_args(sp)

    sp = add("cache", cmd_cache, "find (and purge) cached wheels made for other GPUs")
    sp.add_argument("action", choices=["list", "purge"])
    sp.add_argument("--tool", choices=["pip", "uv", "all"], default="all")
    sp.add_argument("--cache-dir", metavar="DIR", action="append", help="a cache folder (default: pip's and uv's own)")
    sp.add_argument("--targets", help="the targets that fit (default: this machine's GPUs)")
    sp.add_argument("--yes", action="store_true", help="really remove (purge)")
    sp.add_argument("--json", action="store_true")
    _detect_args(sp)

    sp = add("install", cmd_install, "pip install, with every wheel checked against this machine's GPUs first")
    sp.add_argument("--dry-run", action="store_true", help="print the table; install nothing")
    sp.add_argument("--python", metavar="PYTHON", help="the interpreter whose pip collects and installs (default: this one)")
    sp.add_argument("--tool", choices=["pip", "uv"], default="pip", help="the installer that resolves and installs")
    sp.add_argument("--targets", help="check against these targets instead of this machine's GPUs")
    sp.add_argument("pip_args", nargs=argparse.REMAINDER, metavar="PIP_ARGS",
                    help="pip's arguments: requirements and index options (put them after --)")
    _detect_args(sp)

    sp = add("index", cmd_index, "write a static package index per GPU target")
    sp.add_argument("wheel_dir")
    sp.add_argument("out_dir")
    sp.add_argument("--targets", help="only these targets (with --family: targets or family names)")
    sp.add_argument("--family", action="store_true", help="group AMD targets by family (gfx94X-dcgpu, ...)")
    sp.add_argument("--base-url", help="where the wheels are served from (default: relative links)")
    sp.add_argument("--json", action="store_true")

    sp = add("thin", cmd_thin, "write a copy of a wheel whose GPU code is only what loads on the targets")
    sp.add_argument("wheel", metavar="WHEEL")
    sp.add_argument("--targets", required=True, help="the GPUs to keep code for (gfx942, sm_90, ...)")
    sp.add_argument("--outdir", default=".", metavar="DIR", help="where the new wheel goes (default: .)")
    sp.add_argument("--json", action="store_true")

    sp = add("split", cmd_split, "write one thinned wheel per target (or AMD family), with a local version")
    sp.add_argument("wheel", metavar="WHEEL")
    sp.add_argument("--per", choices=["target", "family"], default="target")
    sp.add_argument("--outdir", default=".", metavar="DIR", help="where the new wheels go (default: .)")
    sp.add_argument("--json", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except RocmBuildBackendError as exc:
        for line in exc.lines():
            print(line, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
