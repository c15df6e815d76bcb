"""``install --tool uv``: uv has no ``pip wheel``, so a staging install stands for the collect
step, the ``check --env`` reader checks it, and the shim's per-project build settings stand for
the cache bypass (``install_with_uv``). Only the subprocess runner touches the world.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Mapping, Sequence

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.wheel.check.environment import check_environment, distributions
from rocm_build_backend.wheel.install.args import SplitArgs
from rocm_build_backend.wheel.install.dry import DRY_REBUILD, ONLY_BINARY
from rocm_build_backend.wheel.install.installed import verify_installed
from rocm_build_backend.wheel.install.result import InstallResult, Row, Runner, last_error, shim_lines


def _uv_exe(env: Mapping[str, str]) -> str:
    exe = shutil.which("uv", path=env.get("PATH"))
    if not exe:
        raise RocmBuildBackendError("uv is not installed", hint="install uv, or leave out --tool uv")
    return exe


def _uv(argv: list[str], env: Mapping[str, str], run: Runner, what: str) -> "subprocess.CompletedProcess[str]":
    proc = run(argv, env=dict(env), capture_output=True, text=True)
    if proc.returncode != 0 and what:
        raise RocmBuildBackendError(
            f"uv could not {what} (exit {proc.returncode}): {last_error(proc)}",
            hint="the same arguments must work with uv pip install",
        )
    return proc


def _staged_rows(stage: Path, output: str, devices: Sequence[Any], generic_ok: bool | None, origin: str) -> list[Row]:
    report = check_environment("", devices, generic_ok=generic_ok, locations=[stage])
    judged = {d.dist.dist_info: d for d in report.dists}
    rows = []
    for dist in distributions(stage):
        # uv's output text, read because no interface says it: uv has no installation report
        # (``uv pip install --dry-run`` lists what it would install, not whether it builds it) and
        # no command that lists its cache. uv 0.13.9 prints "Built NAME==VERSION" for each build;
        # uv 0.5.0 prints no such line, and there every row reads cache/index.
        built = re.search(rf"Built {re.escape(dist.name)}==", output, re.IGNORECASE)
        row = Row(dist.name, dist.version, dist.dist_info, "built" if built else origin)
        check = judged.get(dist.dist_info)
        if check is not None:
            row.targets, row.status, row.reason = check.targets, check.status, check.reason
        else:
            row.status = "ok"
        rows.append(row)
    return rows


def install_with_uv(
    split: SplitArgs,
    devices: Sequence[Any],
    *,
    work_dir: Path,
    generic_ok: bool | None,
    notes: Sequence[str],
    dry_run: bool,
    python: str,
    env: Mapping[str, str],
    run: Runner,
) -> InstallResult:
    """The same with uv, which has no ``pip wheel``: it installs into a staging folder (with the
    user's options and uv's cache), that folder is checked with the ``check --env`` reader; a
    distribution that does not load is built again with the shim's own settings for it alone
    (``--config-settings-package NAME:rocm-build-backend.targets=<these GPUs>`` and
    ``--no-binary NAME``): uv keeps builds with other config settings apart in its cache, so the
    final ``uv pip install`` with the same settings gets exactly that build. The build runs in
    uv's cached copy of the sdist, where the shim cleans the first build's tree. Then what is
    installed is read back (``run.verify_installed``), with ``--reinstall-package`` for a
    distribution uv left in place. A dry run collects wheels only (``dry.ONLY_BINARY``)."""
    uv = _uv_exe(env)
    stage = work_dir / "staged"
    only = ONLY_BINARY if dry_run else []  # a dry run builds nothing
    proc = _uv(
        [uv, "pip", "install", "--python", python, "--target", str(stage), *split.options, *only, *split.requirements],
        env,
        run,
        "collect the packages",
    )
    rows = _staged_rows(stage, (proc.stdout or "") + (proc.stderr or ""), devices, generic_ok, "cache/index")
    extra: list[str] = []
    targets = env.get("ROCM_BUILD_BACKEND_TARGETS") or ";".join(map(str, devices))
    for i, row in enumerate(rows):
        if row.status == "unknown":
            row.refused = True
        if row.status != "fails":
            continue
        if dry_run:  # a dry run builds nothing: the rebuild is only named
            row.refused, row.reason = True, f"{row.reason}; {DRY_REBUILD}"
            continue
        # -C keys uv's cache: the rebuild for these targets is kept apart from the first build
        settings = [
            f"--config-settings-package={row.name}:rocm-build-backend.targets={targets}",
            "--no-binary",
            row.name,
        ]
        again = work_dir / "rebuilt" / row.name
        proc = _uv(
            [
                uv,
                "pip",
                "install",
                "--python",
                python,
                "--target",
                str(again),
                "--no-deps",
                *settings,
                *split.for_rebuild(),
                f"{row.name}=={row.version}",
            ],
            env,
            run,
            "",
        )
        if proc.returncode != 0:
            row.refused = True
            text = (proc.stdout or "") + (proc.stderr or "")
            # uv's resolver error text (uv 0.5.0 and 0.13.9: "No solution found", "NAME was not found"):
            # a failed resolve has no machine-readable form; it only picks the words of the reason
            no_sdist = "no solution" in text.lower() or "not found" in text.lower()
            row.build_lines = [] if no_sdist else shim_lines(text)
            failed = (
                "its rebuild failed, the build said:" if row.build_lines else f"its rebuild failed: {last_error(proc)}"
            )
            why = "it has no sdist to build from" if no_sdist else failed
            row.reason = f"{row.reason}; {why}"
            continue
        (new,) = [r for r in _staged_rows(again, "", devices, generic_ok, "rebuilt") if r.name == row.name] or [row]
        new.origin, new.was, new.was_origin = "rebuilt", ", ".join(row.targets), row.origin
        if new.status != "ok":
            new.refused = True
            new.reason = f"rebuilt from its sdist, it still does not load: {new.reason}"
        rows[i] = new
        extra += settings
    result = InstallResult(rows, [str(d) for d in devices], list(notes), dry_run=dry_run, tool="uv")
    if dry_run or result.exit_code or not rows:
        return result
    final = [uv, "pip", "install", "--python", python, *split.install, *split.options, *extra, *split.requirements]
    _uv(final, env, run, "install the checked packages")
    result.installed = True
    # uv keeps an installed distribution of the same version too: --reinstall-package replaces it
    verify_installed(
        result,
        split.install,
        python,
        generic_ok,
        lambda wrong: _uv(
            [*final, *[a for r in wrong for a in ("--reinstall-package", r.name)]],
            env,
            run,
            "reinstall the checked packages",
        ),
    )
    return result
