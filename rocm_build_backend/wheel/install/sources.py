"""``install``'s sdists, built through the shim: what pip would build, fetched, built for the targets.

1. what pip would build: ``pip install --dry-run --ignore-installed --report FILE`` with the
   user's options and requirements (pip's public report, format version 1): every item whose
   ``download_info`` is not a wheel (an sdist archive, a folder, a VCS checkout) is ``ToBuild``;
2. fetched: a folder or a local archive as it is; an archive from an index with ``pip download
   --no-deps --no-binary :all: NAME==VERSION`` (the same index options), its sha256 checked
   against the report's; a direct URL or VCS reference with ``pip download --no-deps`` of it;
3. built: ``PYTHON -m rocm_build_backend build SOURCE -o DIR --json`` in the install's
   environment (the targets in ``ROCM_BUILD_BACKEND_TARGETS``), with the sdist's own declared
   backend wrapped, without build isolation: its build requirements must be installed in
   PYTHON's environment. A build that fails, or that made a wheel without device code of a
   project with GPU switches (the build's exit 1 naming the switch), is a refused row.

Only the runner it is handed runs anything; ``to_build`` is pure.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import unquote, urlparse

from rocm_build_backend import progress
from rocm_build_backend.errors import CANNOT_TELL, RocmBuildBackendError
from rocm_build_backend.files import read_regular
from rocm_build_backend.wheel.install.args import SplitArgs
from rocm_build_backend.wheel.install.dry import would_build
from rocm_build_backend.wheel.install.result import Row, Runner, last_error

_REPORT_LIMIT = 64 << 20  # bytes of pip's report
_SETTINGS = ("-C", "--config-settings", "--config-setting")  # given to the build, not to pip download
_NOT_DOWNLOAD = (*_SETTINGS, "--global-option", "--build-option")  # pip download has none of these
_ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip")


@dataclass(frozen=True)
class ToBuild:
    """One item of pip's report that pip would build from source."""

    name: str
    version: str
    url: str
    kind: str  # archive | dir | vcs
    direct: bool  # named by URL or path, not found through the index
    sha256: str | None = None
    vcs: str | None = None  # git+URL@commit, for kind vcs

    @property
    def local(self) -> Path | None:
        """The file or folder on this machine a ``file:`` URL names."""
        parsed = urlparse(self.url)
        return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def to_build(report: Mapping[str, Any]) -> list[ToBuild]:
    """The items of pip's installation report that are not wheels, in the report's order."""
    out = []
    for item in report.get("install") or []:
        info, meta = item.get("download_info") or {}, item.get("metadata") or {}
        url = str(info.get("url") or "")
        if urlparse(url).path.endswith(".whl") or not meta.get("name") or (info.get("dir_info") or {}).get("editable"):
            continue  # a wheel; an editable install stays pip's
        if "dir_info" in info:
            kind, vcs = "dir", None
        elif "vcs_info" in info:
            v = info["vcs_info"]
            kind, vcs = "vcs", f"{v.get('vcs', 'git')}+{url}@{v.get('commit_id', '')}"
        else:
            kind, vcs = "archive", None
        sha = ((info.get("archive_info") or {}).get("hashes") or {}).get("sha256")
        out.append(
            ToBuild(str(meta["name"]), str(meta.get("version", "")), url, kind, bool(item.get("is_direct")), sha, vcs)
        )
    return out


def pip_report(split: SplitArgs, work: Path, *, python: str, env: Mapping[str, str], run: Runner) -> list[ToBuild]:
    """What pip would build for this install (``pip install --dry-run --report``)."""
    path = work / "report.json"
    argv = [
        python,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--quiet",
        "--ignore-installed",
        "--report",
        str(path),
        *split.options,
        *split.requirements,
    ]
    proc = run(argv, env=dict(env), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RocmBuildBackendError(
            f"pip could not resolve the install (exit {proc.returncode}): {last_error(proc)}",
            hint="the same arguments must work with pip install",
        )
    try:
        report = json.loads(read_regular(path, _REPORT_LIMIT))
    except (OSError, ValueError) as exc:
        raise RocmBuildBackendError(
            f"cannot read pip's installation report: {exc}",
            hint="install needs pip 22.2 or later (pip install --report)",
        ) from None
    return to_build(report if isinstance(report, dict) else {})


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(item: ToBuild, split: SplitArgs, into: Path, *, python: str, env: Mapping[str, str], run: Runner) -> Path:
    """The sdist (or folder) pip would build ``item`` from, on this machine."""
    local = item.local
    if local is not None and (item.kind == "dir" or (item.direct and local.is_file())):
        return local
    into.mkdir(parents=True, exist_ok=True)
    what = item.vcs if item.kind == "vcs" else item.url if item.direct else f"{item.name}=={item.version}"
    argv = [
        python,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--dest",
        str(into),
        *_without(split.for_rebuild(), _NOT_DOWNLOAD),
        str(what),
    ]
    proc = run(argv, env=dict(env), capture_output=True, text=True)
    found = [p for p in into.iterdir() if p.is_file() and p.name.endswith(_ARCHIVES)]
    if proc.returncode != 0 or len(found) != 1:
        raise RocmBuildBackendError(
            f"pip could not download the sdist of {item.name} {item.version} "
            f"(exit {proc.returncode}): {last_error(proc)}",
            hint=f"pip download --no-deps --no-binary :all: {what} must work with the same index options",
        )
    if item.sha256 and _sha256(found[0]) != item.sha256:
        raise RocmBuildBackendError(
            f"the sdist pip downloaded for {item.name} {item.version} is not the file "
            "its resolution named (sha256 differs)",
            hint="the index changed while install ran: run it again",
        )
    return found[0]


def _without(args: Sequence[str], names: tuple[str, ...]) -> list[str]:
    """``args`` without the options ``names`` and their values."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in names:
            skip = True
        elif not arg.startswith(tuple(f"{n}=" for n in names if n.startswith("--"))):
            out.append(arg)
    return out


def settings(split: SplitArgs) -> list[str]:
    """The user's ``-C KEY=VALUE`` settings, as ``build`` takes them."""
    out = []
    for i, arg in enumerate(split.options):
        if arg in _SETTINGS and i + 1 < len(split.options):
            out += ["-C", split.options[i + 1]]
        elif arg.startswith(tuple(f"{n}=" for n in _SETTINGS if n.startswith("--"))):
            out += ["-C", arg.split("=", 1)[1]]
    return out


def _own_lines(stderr: str) -> list[str]:
    """The build command's own closing ``error:`` and ``hint:`` lines."""
    lines = [ln.rstrip() for ln in stderr.splitlines()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("error: "):
            return lines[i : i + 2] if i + 1 < len(lines) and lines[i + 1].startswith("hint: ") else lines[i : i + 1]
    return []


def build(
    item: ToBuild,
    source: Path,
    out: Path,
    *,
    python: str,
    env: Mapping[str, str],
    run: Runner,
    config: Sequence[str] = (),
) -> Row:
    """``item`` built from ``source`` through the shim (``config``: ``-C`` settings); a refused
    row when the build says no."""
    out.mkdir(parents=True, exist_ok=True)
    argv = [python, "-m", "rocm_build_backend", "build", str(source), "-o", str(out), "--json", *config]
    proc = run(argv, env=dict(env), capture_output=True, text=True)
    try:
        doc = json.loads(proc.stdout or "")
    except ValueError:
        doc = None
    wheel = Path(doc["wheel"]) if isinstance(doc, dict) and isinstance(doc.get("wheel"), str) else Path(source.name)
    row = Row(item.name, item.version, wheel, "built")
    if proc.returncode == 0 and doc is not None:
        return row
    own = _own_lines(proc.stderr or "")
    row.refused, row.status = True, "unknown" if proc.returncode == CANNOT_TELL else "fails"
    row.build_lines = own
    row.reason = (
        "built through rocm-build-backend for the targets, the build said:"
        if own
        else f"its build through rocm-build-backend failed: {last_error(proc)}"
    )
    # Python's own words for ``python -m`` of a module it cannot find (the exit status, 1, is a
    # refused build's too), only to say why in the row
    if "No module named rocm_build_backend" in (proc.stderr or ""):
        row.reason = f"rocm-build-backend is not installed in {python}'s environment, which builds {item.name}"
    return row


def build_all(
    items: Sequence[ToBuild], split: SplitArgs, work: Path, *, python: str, env: Mapping[str, str], run: Runner
) -> list[Row]:
    """Every sdist pip would build for this install (``pip_report``'s items), built through the
    shim (one row each)."""
    rows = []
    for i, item in enumerate(items):
        progress.step("building sdists through rocm-build-backend", i, len(items))
        folder = f"{i}-{re.sub(r'[^A-Za-z0-9_-]', '_', item.name)[:64]}"  # a name from the sdist's metadata
        source = fetch(item, split, work / "sdists" / folder, python=python, env=env, run=run)
        rows.append(
            build(item, source, work / "built" / folder, python=python, env=env, run=run, config=settings(split))
        )
    if items:
        progress.step("building sdists through rocm-build-backend", len(items), len(items))
    return rows


def rest(split: SplitArgs, built: Sequence[Row]) -> SplitArgs:
    """The install's arguments with the built wheels in place of what they were built from: the
    requirements that name a folder or an sdist give way to the wheels, which pip then takes."""
    kept = [r for r in split.requirements if not would_build(r)]
    return SplitArgs(list(split.options), list(split.install), kept + [str(r.wheel) for r in built])
