"""What several verbs share: JSON printing, detection from this machine or recorded outputs,
-C settings, and the devices a wheel is checked against. Prints nothing but JSON on request.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rocm_build_backend.errors import RocmBuildBackendError

Command = Callable[[argparse.Namespace], int]
# the build settings every verb that detects honours, as a build reads them (builder/settings.py)
SYSFS_ENV, TARGETS_ENV = "ROCM_BUILD_BACKEND_SYSFS_ROOT", "ROCM_BUILD_BACKEND_TARGETS"
TARGETS_WHERE = " in --targets"  # errors name the option the user typed
JSON_HELP = "print the result as one JSON document on stdout (its fields: docs/json/{verb}.md)"
PATH_HELP = "the project's folder, which holds its pyproject.toml or setup.py (default: the current folder)"
SOURCE_HELP = (
    "the project's folder (default: the current folder), an sdist (.tar.gz, .zip), or NAME==VERSION "
    "(its sdist, through pip's configured index)"
)
C_HELP = (
    "a build setting, as a frontend passes it: -C rocm-build-backend.KEY=VALUE for this tool's settings "
    "(docs/reference/settings.md), any other KEY for the project's backend; repeatable"
)
AddVerb = Callable[[str, Command, str], argparse.ArgumentParser]  # name, function, help -> its parser


def print_json(data: dict[str, Any]) -> None:
    """A ``--json`` document: the plain data a result's ``to_json()`` returns, indented by 2."""
    print(json.dumps(data, indent=2, sort_keys=False))


def detect_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("detection from recorded data instead of this machine")
    from rocm_build_backend.gpu.vendor import vendors

    g.add_argument("--root", metavar="DIR", help="folder that stands for / in every sysfs read")
    for vendor in vendors():  # each vendor names the tool outputs it can replay
        for rec in vendor.recorded_outputs:
            g.add_argument(rec.option, metavar="FILE", dest=_dest(rec.option), help=rec.help)


def _dest(option: str) -> str:
    return "recorded_" + option.lstrip("-").replace("-", "_")


def read_recorded(path: str, what: str) -> str:
    """A recorded tool output: a regular file, at most what a detection program may print."""
    from rocm_build_backend.gpu.files import read_small_text
    from rocm_build_backend.gpu.programs import OUTPUT_LIMIT

    try:
        return read_small_text(path, OUTPUT_LIMIT)
    except OSError as exc:
        raise RocmBuildBackendError(
            f"cannot read {what} {path}: {exc.strerror or exc}",
            hint="give the path of a file that holds the tool's output",
        ) from None


def detection(args: argparse.Namespace, *, keep_features: bool = False) -> Any:
    from rocm_build_backend.gpu.detect import detect
    from rocm_build_backend.gpu.vendor import vendors

    recorded = {}
    for vendor in vendors():
        for rec in vendor.recorded_outputs:
            if getattr(args, _dest(rec.option), None):
                recorded[rec.probe] = read_recorded(getattr(args, _dest(rec.option)), rec.option)
    kw: dict[str, Any] = {"keep_features": keep_features}
    if args.root:
        if not Path(args.root).is_dir():
            raise RocmBuildBackendError(f"--root {args.root} is not a folder", hint="give the folder that stands for /")
        kw["root"] = Path(args.root)
    elif not recorded and (env_root := sysfs_root_from_env()) is not None:
        kw["root"] = env_root  # as a build sees the machine: that root, programs run live
        return detect(**kw)
    if recorded or args.root:
        kw["recorded"] = recorded  # recorded data only: no live program runs
    return detect(**kw)


def sysfs_root_from_env(env: Mapping[str, str] | None = None) -> Path | None:
    """``ROCM_BUILD_BACKEND_SYSFS_ROOT`` as a build reads it (the ``sysfs-root`` setting), when it
    names another folder than ``/``."""
    value = (os.environ if env is None else env).get(SYSFS_ENV, "").strip()
    if not value or Path(value) == Path("/"):
        return None
    if not Path(value).is_dir():
        raise RocmBuildBackendError(f"{SYSFS_ENV}={value} is not a folder", hint="give the folder that stands for /")
    return Path(value)


def targets_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """``ROCM_BUILD_BACKEND_TARGETS`` as a build reads it (the ``targets`` setting), unless ``auto``."""
    value = (os.environ if env is None else env).get(TARGETS_ENV, "").strip()
    return value if value and value.lower() != "auto" else None


def config_settings(items: Sequence[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise RocmBuildBackendError(
                f"-C {item}: expected KEY=VALUE", hint="e.g. -C rocm-build-backend.targets=gfx942"
            )
        if key in out:
            out[key] = (out[key] if isinstance(out[key], list) else [out[key]]) + [value]
        else:
            out[key] = value
    return out


def build_settings(args: argparse.Namespace) -> dict[str, Any]:
    """-C settings, with --targets as -C rocm-build-backend.targets (the same list, or an error)."""
    settings = config_settings(args.config_setting)
    if args.targets is not None:
        from rocm_build_backend.gpu.targets import parse_targets

        if args.targets.strip().lower() != "auto":  # an error names --targets, not the -C it becomes
            parse_targets(args.targets, where=TARGETS_WHERE)
        key = "rocm-build-backend.targets"
        given = settings.get(key)
        if given is not None and given != args.targets:
            raise RocmBuildBackendError(
                f"--targets {args.targets} and -C {key}={given} disagree", hint="give the targets once"
            )
        settings[key] = args.targets
    return settings


def check_devices(args: argparse.Namespace) -> tuple[list[Any], list[str], bool | None]:
    """(devices, notes, generic_ok) for check, cache and install: --targets, else
    ROCM_BUILD_BACKEND_TARGETS (as a build reads it), else this machine's GPUs (--root or the
    recorded outputs, else ROCM_BUILD_BACKEND_SYSFS_ROOT as a build reads it, else /)."""
    from rocm_build_backend.wheel.check.wheels import devices_from_detection, generic_ok_for, host_rocm_version
    from rocm_build_backend.gpu.targets import parse_targets

    given, notes, where = getattr(args, "targets", None), [], TARGETS_WHERE
    if given is None and not args.root and not any(getattr(args, _dest(r.option), None) for r in _recorded()):
        given, where = targets_from_env(), f" in {TARGETS_ENV}"
        if given is not None:
            notes.append(f"targets from {TARGETS_ENV}={given}")
    if given is not None:
        from rocm_build_backend.wheel.index.plan import named_targets

        return parse_targets(named_targets(given), where=where), notes, True
    found = detection(args, keep_features=True)
    devices, seen = devices_from_detection(found)
    root = Path(args.root) if args.root else (sysfs_root_from_env() or Path("/"))
    return devices, list(seen), generic_ok_for(host_rocm_version(root=root))


def _recorded() -> list[Any]:
    from rocm_build_backend.gpu.vendor import vendors

    return [rec for vendor in vendors() for rec in vendor.recorded_outputs]
