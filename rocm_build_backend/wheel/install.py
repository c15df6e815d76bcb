"""An install that checks every wheel against this machine's GPUs before it lands.

``rocm-build-backend install [pip arguments]``, in library form:

1. collect: ``pip wheel --wheel-dir TMP <the user's arguments>`` resolves and collects every
   wheel, with the user's own index options and caches (a wheel built earlier from an sdist
   comes back from pip's wheel cache: the trap this command exists for);
2. check: each wheel against the devices (``check.check_wheels``: stamp, audited binaries);
3. rebuild: a wheel that does not load is built again from its sdist, ``pip wheel --no-deps
   --no-cache-dir --no-binary NAME NAME==VERSION`` with the same index options (the cache is
   bypassed for that project only), and checked again; a wheel with no sdist, or whose rebuild
   still does not load, is refused with the reason;
4. install: ``pip install --no-deps --no-index`` of exactly the collected files, only when
   every wheel loads (a half-installed set of dependencies is worse than none).

Where each wheel came from: ``built`` (pip built it in this run: "Created wheel for"),
``cache`` (the same bytes sit in pip's wheel cache), ``index`` (downloaded) or ``rebuilt``.
With uv (``install_with_uv``), which has no ``pip wheel``, a staging install stands for step 1
and the shim's per-project build settings for the cache bypass. Only the subprocess runner
touches the world; it is passed in. This module does not decide what loads (``check`` does)
and never installs a set with a refused wheel in it.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rocm_build_backend.errors import CANNOT_TELL, DEFINITE_NO, RocmBuildBackendError

Runner = Callable[..., "subprocess.CompletedProcess[str]"]

# pip options that take a value (``--opt VALUE`` or ``--opt=VALUE``), for splitting arguments
_VALUE_OPTS = {
    "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-r", "--requirement",
    "-c", "--constraint", "-e", "--editable", "--cache-dir", "-C", "--config-settings",
    "--config-setting", "--global-option", "--build-option", "--no-binary", "--only-binary",
    "--platform", "--python-version", "--implementation", "--abi", "--progress-bar", "--proxy",
    "--retries", "--timeout", "--exists-action", "--trusted-host", "--cert", "--client-cert",
    "--log", "--keyring-provider", "--src", "--upgrade-strategy", "--target", "-t", "--prefix",
    "--root", "--python", "--group", "--use-feature", "--use-deprecated", "--resume-retries",
}
# options that only ``pip install`` knows: they go to the final install, not to ``pip wheel``
_INSTALL_ONLY = {
    "-t", "--target", "--prefix", "--root", "--user", "-U", "--upgrade", "--upgrade-strategy",
    "--force-reinstall", "-I", "--ignore-installed", "--no-warn-script-location",
    "--no-warn-conflicts", "--break-system-packages", "--no-compile", "--compile",
    "--require-virtualenv", "--python",
}
# options the single-project rebuild does not repeat (they name other projects or caches)
_NOT_FOR_REBUILD = {"-r", "--requirement", "-e", "--editable", "--cache-dir", "--no-binary", "--only-binary"}
_WHERE = {"cache": "from pip's wheel cache", "index": "from the index", "built": "built in this run",
          "cache/index": "from uv's cache or the index"}
_CREATED = re.compile(r"Created wheel for (\S+): filename=(\S+\.whl)")
_CACHED = re.compile(r"Using cached (\S+\.whl)(?!\s*\()")


@dataclass
class SplitArgs:
    """The user's pip arguments, sorted by where they go."""

    options: list[str] = field(default_factory=list)  # for pip wheel (index, build options)
    install: list[str] = field(default_factory=list)  # for the final pip install only
    requirements: list[str] = field(default_factory=list)  # positional requirement specifiers

    def for_rebuild(self) -> list[str]:
        out, skip = [], False
        for i, arg in enumerate(self.options):
            if skip:
                skip = False
                continue
            name = arg.split("=", 1)[0]
            if name in _NOT_FOR_REBUILD:
                skip = "=" not in arg and name in _VALUE_OPTS
                continue
            out.append(arg)
        return out


def split_args(args: Sequence[str]) -> SplitArgs:
    """Sort pip arguments: wheel options, install-only options, requirement specifiers."""
    out = SplitArgs()
    args = list(args)
    if args[:1] == ["--"]:
        args = args[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0] if arg.startswith("--") else arg
        takes = name in _VALUE_OPTS and "=" not in arg
        if takes and i + 1 >= len(args):
            raise RocmBuildBackendError(f"pip option {arg} needs a value", hint="see pip install --help")
        chunk = args[i:i + 2] if takes else [arg]
        if not arg.startswith("-"):
            out.requirements.append(arg)
        elif name in _INSTALL_ONLY:
            out.install.extend(chunk)
        else:
            out.options.extend(chunk)
        i += len(chunk)
    if name_conflict := [a for a in out.options if a in ("--dry-run", "--report")]:
        raise RocmBuildBackendError(f"{name_conflict[0]} is not a pip option here",
                                    hint="use rocm-build-backend install --dry-run to see the table")
    return out


@dataclass
class Row:
    """One distribution: its wheel, where it came from, what it holds, and the decision."""

    name: str
    version: str
    wheel: Path
    origin: str  # index | cache | built | rebuilt | local
    targets: list[str] = field(default_factory=list)
    status: str = "unknown"  # ok | fails | unknown
    reason: str | None = None
    refused: bool = False
    was: str | None = None  # what the first wheel held, when it was rebuilt
    was_origin: str | None = None  # where that first wheel came from

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "wheel": self.wheel.name, "origin": self.origin,
                "targets": list(self.targets), "status": self.status, "reason": self.reason,
                "refused": self.refused,
                "replaced": None if self.was is None else {"origin": self.was_origin, "targets": self.was}}


@dataclass
class InstallResult:
    rows: list[Row]
    devices: list[str]
    notes: list[str] = field(default_factory=list)
    installed: bool = False
    dry_run: bool = False

    @property
    def exit_code(self) -> int:
        if any(r.refused and r.status == "fails" for r in self.rows):
            return DEFINITE_NO
        if any(r.refused for r in self.rows):
            return CANNOT_TELL
        return 0

    def to_text(self) -> str:
        head = ("DISTRIBUTION", "FROM", "TARGETS", "LOADS HERE")
        body = []
        for r in self.rows:
            loads = {"ok": "yes", "fails": "no", "unknown": "cannot tell"}[r.status]
            body.append((f"{r.name} {r.version}", r.origin, ", ".join(r.targets) or "no device code", loads))
        widths = [max(len(x[i]) for x in [head, *body]) for i in range(3)]
        lines = ["devices: " + (", ".join(self.devices) or "none found")]
        lines += [f"note: {n}" for n in self.notes]
        for cells in [head, *body]:
            lines.append("  ".join(f"{c:<{widths[i]}}" for i, c in enumerate(cells[:3])) + "  " + cells[3])
        for r in self.rows:
            if r.was:
                where = _WHERE.get(r.was_origin or "", r.was_origin)
                lines.append(f"{r.name}: the wheel {where} held {r.was}; rebuilt from its sdist")
            if r.refused:
                lines.append(f"{r.name}: refused: {r.reason}")
        if self.dry_run:
            lines.append("dry run: nothing installed")
        elif self.installed:
            lines.append(f"installed {len(self.rows)} wheel{'s' if len(self.rows) != 1 else ''}")
        else:
            lines.append("nothing installed: " + ("a wheel was refused" if self.exit_code else "no wheels"))
        return "\n".join(lines)


# --------------------------------------------------------------------------- collecting


def _last_error(proc: "subprocess.CompletedProcess[str]") -> str:
    """The line of a tool's output that says what went wrong (its last error line, else its last line)."""
    lines = [ln.strip() for ln in ((proc.stdout or "") + "\n" + (proc.stderr or "")).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.lower().startswith(("error", "×", "cause:"))]
    return (errors or lines or ["no output"])[-1]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _pip_cache(split: SplitArgs, env: Mapping[str, str]) -> Path | None:
    opts = split.options
    for i, arg in enumerate(opts):
        if arg == "--no-cache-dir":
            return None
        if arg == "--cache-dir" and i + 1 < len(opts):
            return Path(opts[i + 1])
        if arg.startswith("--cache-dir="):
            return Path(arg.split("=", 1)[1])
    if env.get("PIP_NO_CACHE_DIR", "").lower() in ("1", "true", "yes", "on"):
        return None
    from rocm_build_backend.wheel.cache import default_cache_dirs

    return default_cache_dirs(env)["pip"]


def origin_of(wheel: Path, output: str, cache: Path | None) -> str:
    """``built`` when pip built it in this run, ``cache`` when the same bytes are in pip's
    wheel cache, else ``index``."""
    if any(m.group(2) == wheel.name for m in _CREATED.finditer(output)):
        return "built"
    if cache is not None and any(m.group(1) == wheel.name for m in _CACHED.finditer(output)):
        digest = _sha256(wheel)
        for hit in (cache / "wheels").rglob(wheel.name):
            if hit.is_file() and _sha256(hit) == digest:
                return "cache"
    return "index"


def _name_version(wheel: Path) -> tuple[str, str]:
    from packaging.utils import parse_wheel_filename

    name, version, _, _ = parse_wheel_filename(wheel.name)
    return str(name), str(version)


def collect(split: SplitArgs, wheel_dir: Path, *, python: str, env: Mapping[str, str], run: Runner) -> list[Row]:
    """Resolve and collect every wheel the install needs into ``wheel_dir`` (``pip wheel``)."""
    argv = [python, "-m", "pip", "wheel", "--wheel-dir", str(wheel_dir), *split.options, *split.requirements]
    proc = run(argv, env=dict(env), capture_output=True, text=True)
    output = (proc.stdout or "") + (proc.stderr or "")
    if proc.returncode != 0:
        raise RocmBuildBackendError(f"pip could not collect the wheels (exit {proc.returncode}): {_last_error(proc)}",
                                    hint="the same arguments must work with pip wheel")
    cache = _pip_cache(split, env)
    rows = []
    for wheel in sorted(wheel_dir.glob("*.whl")):
        name, version = _name_version(wheel)
        rows.append(Row(name, version, wheel, origin_of(wheel, output, cache)))
    return rows


# --------------------------------------------------------------------------- checking, rebuilding


def judge(rows: Sequence[Row], devices: Sequence[Any], *, generic_ok: bool | None) -> None:
    """Fill each row's targets, status and reason from the check of its wheel."""
    from rocm_build_backend.wheel.check import check_wheels

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
    """Build ``row``'s project again from its sdist, bypassing pip's cache for it alone."""
    out_dir.mkdir(parents=True, exist_ok=True)
    argv = [python, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "--no-binary", row.name,
            "--wheel-dir", str(out_dir), *split.for_rebuild(), f"{row.name}=={row.version}"]
    proc = run(argv, env=dict(env), capture_output=True, text=True)
    wheels = sorted(out_dir.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        output = (proc.stdout or "") + (proc.stderr or "")
        no_sdist = "no matching distribution" in output.lower() or "could not find a version" in output.lower()
        why = "it has no sdist to build from" if no_sdist else f"its rebuild failed: {_last_error(proc)}"
        row.refused = True
        row.reason = f"{row.reason or 'its device code does not load here'}; {why}"
        return row
    return Row(row.name, row.version, wheels[0], "rebuilt", was=", ".join(row.targets) or "no device code",
               was_origin=row.origin)


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
    run: Runner = subprocess.run,
    tool: str = "pip",
) -> InstallResult:
    """Collect, check, rebuild what does not load, install. ``work_dir``: an empty folder.

    ``tool="uv"``: see ``install_with_uv``."""
    python = python or sys.executable
    env = dict(os.environ if env is None else env)
    split = split_args(args)
    if not split.requirements and not any(a in ("-r", "--requirement") or a.startswith("--requirement=")
                                          for a in split.options):
        raise RocmBuildBackendError("nothing to install", hint="give requirements, e.g. install torch")
    if tool == "uv":
        return install_with_uv(split, devices, work_dir=work_dir, generic_ok=generic_ok, notes=notes,
                               dry_run=dry_run, python=python, env=env, run=run)
    rows = collect(split, work_dir / "collected", python=python, env=env, run=run)
    judge(rows, devices, generic_ok=generic_ok)
    for i, row in enumerate(rows):
        if row.status == "fails":
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
    argv = [python, "-m", "pip", "install", "--no-deps", "--no-index", *split.install, *[str(r.wheel) for r in rows]]
    proc = run(argv, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RocmBuildBackendError(f"pip install of the checked wheels failed (exit {proc.returncode}): "
                                    f"{_last_error(proc)}", hint="run the same pip install to see its whole output")
    result.installed = True
    return result


# --------------------------------------------------------------------------- with uv


def _uv_exe(env: Mapping[str, str]) -> str:
    import shutil

    exe = shutil.which("uv", path=env.get("PATH"))
    if not exe:
        raise RocmBuildBackendError("uv is not installed", hint="install uv, or leave out --tool uv")
    return exe


def _uv(argv: list[str], env: Mapping[str, str], run: Runner, what: str) -> "subprocess.CompletedProcess[str]":
    proc = run(argv, env=dict(env), capture_output=True, text=True)
    if proc.returncode != 0 and what:
        raise RocmBuildBackendError(f"uv could not {what} (exit {proc.returncode}): {_last_error(proc)}",
                                    hint="the same arguments must work with uv pip install")
    return proc


def _staged_rows(stage: Path, output: str, devices: Sequence[Any], generic_ok: bool | None, origin: str) -> list[Row]:
    from rocm_build_backend.wheel.environment import check_environment, distributions

    report = check_environment("", devices, generic_ok=generic_ok, locations=[stage])
    judged = {d.dist.dist_info: d for d in report.dists}
    rows = []
    for dist in distributions(stage):
        built = re.search(rf"Built {re.escape(dist.name)}==", output, re.IGNORECASE)
        row = Row(dist.name, dist.version, dist.dist_info, "built" if built else origin)
        check = judged.get(dist.dist_info)
        if check is not None:
            row.targets, row.status, row.reason = check.targets, check.status, check.reason
        else:
            row.status = "ok"
        rows.append(row)
    return rows


def install_with_uv(split: SplitArgs, devices: Sequence[Any], *, work_dir: Path, generic_ok: bool | None,
                    notes: Sequence[str], dry_run: bool, python: str, env: Mapping[str, str], run: Runner) -> InstallResult:
    """The same with uv, which has no ``pip wheel``: it installs into a staging folder (with the
    user's options and uv's cache), that folder is checked with the ``check --env`` reader; a
    distribution that does not load is built again with the shim's own settings for it alone
    (``--config-settings-package NAME:rocm-build-backend.targets=<these GPUs>`` and
    ``...stale=clean``, ``--no-binary NAME``): uv keeps builds with other settings apart in its
    cache, so the final ``uv pip install`` with the same settings gets exactly that build."""
    uv = _uv_exe(env)
    stage = work_dir / "staged"
    proc = _uv([uv, "pip", "install", "--python", python, "--target", str(stage), *split.options,
                *split.requirements], env, run, "collect the packages")
    rows = _staged_rows(stage, (proc.stdout or "") + (proc.stderr or ""), devices, generic_ok, "cache/index")
    extra: list[str] = []
    for i, row in enumerate(rows):
        if row.status == "unknown":
            row.refused = True
        if row.status != "fails":
            continue
        settings = [f"--config-settings-package={row.name}:rocm-build-backend.targets={','.join(map(str, devices))}",
                    f"--config-settings-package={row.name}:rocm-build-backend.stale=clean", "--no-binary", row.name]
        again = work_dir / "rebuilt" / row.name
        proc = _uv([uv, "pip", "install", "--python", python, "--target", str(again), "--no-deps", *settings,
                    *split.for_rebuild(), f"{row.name}=={row.version}"], env, run, "")
        if proc.returncode != 0:
            row.refused = True
            text = ((proc.stdout or "") + (proc.stderr or "")).lower()
            why = "it has no sdist to build from" if "no solution" in text or "not found" in text else "its rebuild failed"
            row.reason = f"{row.reason}; {why}"
            continue
        (new,) = [r for r in _staged_rows(again, "", devices, generic_ok, "rebuilt") if r.name == row.name] or [row]
        new.origin, new.was, new.was_origin = "rebuilt", ", ".join(row.targets), row.origin
        if new.status != "ok":
            new.refused = True
            new.reason = f"rebuilt from its sdist, it still does not load: {new.reason}"
        rows[i] = new
        extra += settings
    result = InstallResult(rows, [str(d) for d in devices], list(notes), dry_run=dry_run)
    if dry_run or result.exit_code or not rows:
        return result
    _uv([uv, "pip", "install", "--python", python, *split.install, *split.options, *extra, *split.requirements],
        env, run, "install the checked packages")
    result.installed = True
    return result
