"""An install that checks every wheel against this machine's GPUs before it lands.

``rocm-build-backend install [pip arguments]``, in library form:

0. build through the shim: what pip would build from source for these arguments is read from
   its report (``pip install --dry-run --report``; not in a dry run, which builds nothing); when
   GPU targets are known, every such sdist is fetched and built through the shim for them
   (``sources.py``), its declared backend wrapped; a build that says no (a wheel without device
   code from a project with GPU switches among them) is refused, and nothing is installed;
1. collect: ``pip wheel --wheel-dir TMP <the user's arguments>`` resolves and collects every
   wheel, with the user's own index options and caches, the wheels built in step 0 given in
   place of what they were built from (a wheel built earlier from an sdist would otherwise come
   back from pip's wheel cache: the trap this command exists for);
2. check: each wheel against the devices (``check.check_wheels``: stamp, audited binaries);
3. rebuild: a wheel that does not load is built again from its sdist (``pip download --no-deps
   --no-binary :all: NAME==VERSION`` with the same index options) through the shim, and checked
   again; a wheel with no sdist, or whose rebuild still does not load, is refused with the reason;
4. install: ``pip install --no-deps --no-index`` of exactly the collected files, only when
   every wheel loads (a half-installed set of dependencies is worse than none);
5. read back: each distribution as installed in the target environment (``installed.py``: its
   RECORD and files). pip keeps an installed distribution of the same version (the wheel it
   was handed is skipped): one whose installed build does not load, or that is missing, is
   installed again with ``--force-reinstall --no-deps`` (and ``--upgrade`` into a ``--target``
   folder), and read back again; still not loading is exit 1.

Where each wheel came from: ``built`` (built in this run), ``cache`` (an earlier build from
pip's wheel cache), ``index`` (downloaded) or ``rebuilt``, told by pip's report, its cache
listing and the collected folder (``origin.py``), not by pip's output.
With uv (``install_with_uv``), which has no ``pip wheel``, a staging install stands for step 1
and the shim's per-project build settings for the cache bypass. Only the subprocess runner
touches the world; it is passed in. This module does not decide what loads (``check`` does)
and never installs a set with a refused wheel in it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from rocm_build_backend import progress
from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.wheel.check.wheels import check_wheels
from rocm_build_backend.wheel.install.args import SplitArgs, split_args
from rocm_build_backend.wheel.install.dry import DRY_REBUILD, ONLY_BINARY, DryRunCannotTell, no_wheel, refuse_sources
from rocm_build_backend.wheel.install.installed import verify_installed
from rocm_build_backend.wheel.install.origin import cached_before, origin_of, pip_cache_dir
from rocm_build_backend.wheel.install.result import InstallResult, Row, Runner, last_error
from rocm_build_backend.wheel.install.runner import bounded_run, probe_python
from rocm_build_backend.wheel.install.sources import ToBuild, build, build_all, fetch, pip_report, rest, settings
from rocm_build_backend.wheel.install.uv import install_with_uv

__all__ = [
    "InstallResult",
    "Row",
    "Runner",
    "SplitArgs",
    "collect",
    "install_inspected",
    "judge",
    "rebuild",
    "split_args",
]


# --------------------------------------------------------------------------- collecting


def _name_version(wheel: Path) -> tuple[str, str]:
    try:
        name, version, _, _ = parse_wheel_filename(wheel.name)
    except InvalidWheelFilename as exc:  # a legacy (non-PEP 440) version, made by an old pip
        raise RocmBuildBackendError(
            f"pip collected {wheel.name}, which is not a valid wheel name ({exc})",
            hint="a wheel's version must be a PEP 440 version; pin a version of that project that has one",
        ) from None
    return str(name), str(version)


def collect(
    split: SplitArgs,
    wheel_dir: Path,
    *,
    python: str,
    env: Mapping[str, str],
    run: Runner,
    dry_run: bool = False,
    from_source: Collection[str] = (),
) -> list[Row]:
    """Resolve and collect every wheel the install needs into ``wheel_dir`` (``pip wheel``);
    a dry run takes wheels only (``install.dry``). ``from_source``: the names of the projects
    pip builds from source here (its report), each ``built``, or ``cache`` when pip's wheel
    cache held the wheel before (``origin.py``); every other wheel is ``index``."""

    only = ONLY_BINARY if dry_run else []
    wanted = {str(canonicalize_name(n)) for n in from_source}
    cached = cached_before(python, pip_cache_dir(split.options, env), env) if wanted else {}
    argv = [python, "-m", "pip", "wheel", "--wheel-dir", str(wheel_dir), *split.options, *only, *split.requirements]
    proc = run(argv, env=dict(env), capture_output=True, text=True)
    output = (proc.stdout or "") + (proc.stderr or "")
    if proc.returncode != 0 and dry_run and no_wheel(output):
        raise DryRunCannotTell(
            f"a dry run builds nothing, and {no_wheel(output)} has no wheel pip could take "
            "without building one (from its sdist, or an earlier build in its cache)",
            hint="run without --dry-run to build and check it",
        )
    if proc.returncode != 0:
        raise RocmBuildBackendError(
            f"pip could not collect the wheels (exit {proc.returncode}): {last_error(proc)}",
            hint="the same arguments must work with pip wheel",
        )
    rows = []
    for wheel in sorted(wheel_dir.glob("*.whl")):
        name, version = _name_version(wheel)
        rows.append(Row(name, version, wheel, origin_of(wheel, name, wanted, cached)))
    return rows


# --------------------------------------------------------------------------- checking, rebuilding


def judge(rows: Sequence[Row], devices: Sequence[Any], *, generic_ok: bool | None) -> None:
    """Fill each row's targets, status and reason from the check of its wheel."""
    # stamp first: a wheel built through the shim says what it holds; one without a stamp is audited
    report = check_wheels([r.wheel for r in rows], devices, generic_ok=generic_ok, audit=False)
    for row, wc in zip(rows, report.wheels):
        row.status = wc.status
        row.targets = list(wc.facts.targets) if wc.facts is not None else []
        reasons = [v.reason for v in wc.verdicts if v.status != "ok" and v.reason]
        problems = list(wc.facts.problems) if wc.facts is not None else list(wc.problems)
        if wc.status != "ok" and not reasons and not devices:
            reasons = ["no GPU found to check against"]
        row.reason = "; ".join(reasons + problems) or None


def rebuild(row: Row, split: SplitArgs, out_dir: Path, *, python: str, env: Mapping[str, str], run: Runner) -> Row:
    """Build ``row``'s project again from its sdist (``pip download``) through the shim."""
    item = ToBuild(row.name, row.version, "", "archive", False)
    try:
        source = fetch(item, split, out_dir / "sdist", python=python, env=env, run=run)
    except RocmBuildBackendError as exc:
        # pip's resolver error text (pip 23.0 and 26.3: "Could not find a version that satisfies the
        # requirement", "No matching distribution found"): pip download has no report of a failed
        # resolve; it only picks the words of the reason, the exit status decides
        text = exc.message.lower()
        no_sdist = "no matching distribution" in text or "could not find a version" in text
        row.refused = True
        why = "it has no sdist to build from" if no_sdist else f"its rebuild failed: {exc.message}"
        row.reason = f"{row.reason or 'its device code does not load here'}; {why}"
        return row
    new = build(item, source, out_dir / "wheel", python=python, env=env, run=run, config=settings(split))
    if new.refused:
        row.refused, row.build_lines = True, new.build_lines
        row.reason = f"{row.reason or 'its device code does not load here'}; its rebuild failed, the build said:"
        return row
    return Row(
        row.name,
        row.version,
        new.wheel,
        "rebuilt",
        was=", ".join(row.targets) or "no device code",
        was_origin=row.origin,
    )


def _interpreter(python: str | None, split: SplitArgs, dry_run: bool) -> str:
    """The interpreter whose pip runs (a given one probed first: capped, isolated); a dry run
    refuses requirements it would have to build (``install.dry``)."""

    if dry_run:
        refuse_sources(split)
    return probe_python(python) if python else sys.executable


def install_inspected(
    args: Sequence[str],
    devices: Sequence[Any],
    *,
    work_dir: Path,
    generic_ok: bool | None = True,
    notes: Sequence[str] = (),
    dry_run: bool = False,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    run: Runner | None = None,
    tool: str = "pip",
) -> InstallResult:
    """Collect, check, rebuild what does not load, install. ``work_dir``: an empty folder.

    ``tool="uv"``: see ``install_with_uv``. ``run``: the subprocess runner (default
    ``runner.bounded_run``: output bounded, the process group stopped with this process)."""

    run = run or bounded_run
    env = dict(os.environ if env is None else env)
    split = split_args(args)
    if not split.requirements and not any(
        a in ("-r", "--requirement") or a.startswith("--requirement=") for a in split.options
    ):
        raise RocmBuildBackendError("nothing to install", hint="give requirements, e.g. install torch")
    python = _interpreter(python, split, dry_run)
    if tool == "uv":
        return install_with_uv(
            split,
            devices,
            work_dir=work_dir,
            generic_ok=generic_ok,
            notes=notes,
            dry_run=dry_run,
            python=python,
            env=env,
            run=run,
        )
    # what pip would build from source (a dry run builds nothing and takes wheels only)
    items = [] if dry_run else pip_report(split, work_dir, python=python, env=env, run=run)
    built = build_all(items, split, work_dir, python=python, env=env, run=run) if devices else []
    if any(r.refused for r in built):  # nothing is installed: the rest is not collected
        return InstallResult(built, [str(d) for d in devices], list(notes))
    progress.step("collecting wheels with pip", 0)
    by_shim = {canonicalize_name(r.name) for r in built}
    rows = collect(
        rest(split, built),
        work_dir / "collected",
        python=python,
        env=env,
        run=run,
        dry_run=dry_run,
        from_source=[i.name for i in items if canonicalize_name(i.name) not in by_shim],
    )
    progress.step("checking wheels against this machine's GPUs", 0, len(rows))
    for i, row in enumerate(rows):
        rows[i] = next((b for b in built if canonicalize_name(b.name) == canonicalize_name(row.name)), row)
    notes = [*notes, *(f"{r.name} {r.version} built from its sdist through rocm-build-backend" for r in built)]
    judge(rows, devices, generic_ok=generic_ok)
    for i, row in enumerate(rows):
        if row.status == "fails" and dry_run:  # what an install would do, without building
            row.refused, row.reason = True, f"{row.reason or 'it does not load here'}; {DRY_REBUILD}"
        elif row.status == "fails":
            new = rebuild(row, split, work_dir / "rebuilt" / row.name, python=python, env=env, run=run)
            if new is not row:
                judge([new], devices, generic_ok=generic_ok)
                if new.status != "ok":
                    new.refused = True
                    new.reason = f"rebuilt from its sdist, it still does not load: {new.reason}"
            rows[i] = new
        elif row.status == "unknown":
            row.refused = True
    result = InstallResult(rows, [str(d) for d in devices], list(notes), dry_run=dry_run)
    if dry_run or result.exit_code or not rows:
        return result
    progress.step("installing with pip", 0, len(rows))
    _pip_install(rows, split.install, python=python, env=env, run=run)
    result.installed = True
    verify_installed(
        result,
        split.install,
        python,
        generic_ok,
        lambda wrong: _pip_install(wrong, [*split.install, *_force(split.install)], python=python, env=env, run=run),
    )
    return result


def _pip_install(
    rows: Sequence[Row], options: Sequence[str], *, python: str, env: Mapping[str, str], run: Runner
) -> None:
    argv = [python, "-m", "pip", "install", "--no-deps", "--no-index", *options, *[str(r.wheel) for r in rows]]
    proc = run(argv, env=dict(env), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RocmBuildBackendError(
            f"pip install of the checked wheels failed (exit {proc.returncode}): {last_error(proc)}",
            hint="run the same pip install to see its whole output",
        )


def _force(options: Sequence[str]) -> list[str]:
    """What makes pip replace an installed distribution of the same version: --force-reinstall,
    and into a --target folder (where pip skips existing folders) --upgrade as well."""
    extra = ["--force-reinstall"]
    if any(o in ("-t", "--target") or o.startswith("--target=") for o in options) and not any(
        o in ("-U", "--upgrade") for o in options
    ):
        extra.append("--upgrade")
    return extra
