"""What an install really put into the target environment, read back from it: ``install``'s
last step, after pip or uv said it was done.

``target_dirs`` finds the folders pip or uv install into for the user's install options
(``--target``, ``--prefix``, ``--root``, ``--user``; else the interpreter's environment);
``read_back`` reads, for each distribution ``install`` meant to install, the distribution of
that name installed there (its ``RECORD``, the files themselves; editable installs followed to
their sources) with the ``check --env`` reader, and says whether it is the version meant and
whether its device code loads on the devices; ``verify_installed`` does that for an install's
rows and hands the ones that do not load to the caller's ``reinstall`` (pip's or uv's way, from
``run.py`` and ``uv.py``), then reads back again. It runs no installer itself.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.gpu.programs import run_capped
from rocm_build_backend.wheel.check.environment import check_environment, distributions, site_dirs
from rocm_build_backend.wheel.install.result import InstallResult, Row

_ASK_TIMEOUT, _ASK_LIMIT = 30, 1 << 20  # seconds, bytes: an answer is a few lines
_PATHS = """import json, site, sys, sysconfig
prefix, user = sys.argv[1] or None, sys.argv[2] == "1"
if prefix:
    p = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix})
    dirs = [p["purelib"], p["platlib"]]
elif user:
    dirs = [site.getusersitepackages()]
else:
    p = sysconfig.get_paths()
    dirs = [p["purelib"], p["platlib"]]
print(json.dumps(dirs))
"""


def _option(args: Sequence[str], *names: str) -> str | None:
    """The value of the last of ``names`` in ``args`` (``--opt V`` or ``--opt=V``), or None."""
    found = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                found = args[i + 1]
            elif arg.startswith(name + "=") and name.startswith("--"):
                found = arg.split("=", 1)[1]
    return found


def target_dirs(install_args: Sequence[str], python: str) -> list[Path]:
    """The site-packages folders an install with ``install_args`` writes into (first: where a
    new distribution goes)."""
    target = _option(install_args, "--target", "-t")
    if target:
        return [Path(target).resolve()]
    prefix = _option(install_args, "--prefix") or ""
    root = _option(install_args, "--root")
    user = "--user" in install_args
    if not prefix and not root and not user:
        return site_dirs(python)[1] or [Path(p) for p in _ask(python, "", False)]
    dirs = [Path(p) for p in _ask(python, str(Path(prefix).resolve()) if prefix else "", user)]
    if root:
        dirs = [Path(root).resolve() / d.relative_to(d.anchor) for d in dirs]
    out: list[Path] = []
    for d in dirs:
        if d not in out:
            out.append(d)
    return out


def _ask(python: str, prefix: str, user: bool) -> list[str]:
    """Where ``python`` installs packages: asked isolated (``-I -S``: none of its ``.pth`` files
    runs), output and time capped like every interpreter query (``gpu.programs.run_capped``)."""
    try:
        ran = run_capped(
            [python, "-I", "-S", "-c", _PATHS, prefix, "1" if user else "0"],
            env=os.environ,
            timeout=_ASK_TIMEOUT,
            limit=_ASK_LIMIT,
        )
        ok = ran.returncode == 0 and not (ran.too_large or ran.timed_out)
        dirs = json.loads(ran.stdout.decode("utf-8", "replace")) if ok else None
    except (OSError, ValueError):
        dirs = None
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        raise RocmBuildBackendError(
            f"{python} could not say where it installs packages",
            hint="give the path of a Python interpreter with --python",
        )
    return [str(d) for d in dirs]


@dataclass
class Installed:
    """One distribution as found installed: its version, what its files hold, whether they load."""

    name: str
    version: str | None  # None: not installed there
    targets: list[str]
    status: str  # ok | fails | unknown | missing | other-version
    reason: str | None = None
    location: Path | None = None

    def describe(self) -> str:
        held = ", ".join(self.targets) or "no device code"
        return {"missing": "not installed", "other-version": f"{self.version} installed ({held})"}.get(
            self.status, f"{self.version} ({held})"
        )


def read_back(
    wanted: Sequence[tuple[str, str]], dirs: Sequence[Path], devices: Sequence[Any], *, generic_ok: bool | None
) -> dict[str, Installed]:
    """(name, version) -> what is installed of it in ``dirs``: the first folder holding it wins,
    as on ``sys.path``. Keyed by the canonical name."""
    report = check_environment("", devices, generic_ok=generic_ok, locations=[d for d in dirs if d.is_dir()])
    judged = {d.dist.dist_info: d for d in report.dists}
    found: dict[str, Any] = {}
    for location in dirs:
        if not location.is_dir():
            continue
        for dist in distributions(location):
            found.setdefault(str(canonicalize_name(dist.name)), dist)
    out: dict[str, Installed] = {}
    for name, version in wanted:
        key = str(canonicalize_name(name))
        if key not in found:
            out[key] = Installed(name, None, [], "missing", "not installed")
            continue
        dist = found[key]
        check = judged.get(dist.dist_info)
        targets = check.targets if check else []
        status, reason = (check.status, check.reason) if check else ("ok", None)
        if _normal(dist.version) != _normal(version):
            status, reason = "other-version", f"{dist.version} is installed, not {version}"
        out[key] = Installed(dist.name, dist.version, targets, status, reason, dist.location)
    return out


def _normal(version: str) -> str:
    try:
        return str(Version(version))
    except InvalidVersion:
        return version


def verify_installed(
    result: InstallResult,
    install_options: Sequence[str],
    python: str,
    generic_ok: bool | None,
    reinstall: Callable[[list[Row]], object],
) -> None:
    """Step 5: read back what is installed; reinstall (``reinstall(rows)``) the distributions
    that are missing, of another version, or whose installed files do not load where their
    checked wheel does; read back again. Fills ``result.where``, each row's ``installed`` and
    ``kept``, and ``result.unloaded``."""
    dirs = target_dirs(install_options, python)
    result.where = [str(d) for d in dirs[:1]]
    wrong = _read_back(result, dirs, generic_ok)
    if wrong:
        for row in wrong:
            row.kept = None if row.installed == "not installed" else row.installed
        reinstall(wrong)
        wrong = _read_back(result, dirs, generic_ok)
    result.unloaded = [r.name for r in wrong]


def _read_back(result: InstallResult, dirs: Sequence[Path], generic_ok: bool | None) -> list[Row]:
    found = read_back([(r.name, r.version) for r in result.rows], dirs, result.devices, generic_ok=generic_ok)
    wrong = []
    for row in result.rows:
        got = found[str(canonicalize_name(row.name))]
        row.installed = got.describe()
        if got.status != "ok":
            wrong.append(row)
    return wrong
