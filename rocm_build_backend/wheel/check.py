"""Will a wheel's device code load on these GPUs? ``rocm-build-backend check`` in library form.

A wheel's facts come from its stamp (``<name>-<version>.dist-info/rocm_build.json``, see
``docs/stamp.md``) cross-checked with an audit of the binaries it holds. When the two disagree
the binaries win and the disagreement is reported; an unstamped wheel is audited. The loader's
rules live in ``compat.py``: exact processor, xnack/sramecc modes, generic targets only from
ROCm 6.4 on.

A wheel *serves* a device when every file with device code has code that loads on it (a file's
``complete`` targets: those every container in it covers). A wheel with no device code serves
every device.

Verdicts are ``ok``, ``fails`` or ``unknown`` (no stamp and no readable binaries, a damaged
binary, no device to check against, generic code with an unknown ROCm version). The report's
exit code: 0 when every wheel loads on every device, 1 when at least one does not, 2 when some
answer is unknown and none fails.

The same reading code serves ``cache.py`` (unzipped wheels in uv's cache) and ``index.py``
(which trusts the stamp and audits only unstamped wheels).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from rocm_build_backend.errors import RocmBuildBackendError, UnknownTargetError, WheelError
from rocm_build_backend.gpu.targets import GpuTarget

if TYPE_CHECKING:  # pragma: no cover
    import zipfile

OK, FAILS, UNKNOWN = "ok", "fails", "unknown"

STAMP_NAME = "rocm_build.json"
KNOWN_SCHEMA = 1

# Members that can hold device code; anything else is not audited when the audit module is
# missing and the wheel has no stamp (a wheel without any of these is pure).
_BINARY_SUFFIXES = (".so", ".pyd", ".dll", ".dylib", ".hsaco", ".co", ".fatbin", ".cubin", ".o", ".bin", ".a")


# --------------------------------------------------------------------------------------------
# facts


@dataclass(frozen=True)
class DeviceFile:
    """One wheel member with device code: the targets in it and those every container covers."""

    path: str
    targets: tuple[str, ...]
    complete: tuple[str, ...]
    problems: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        out = {"targets": list(self.targets), "complete": list(self.complete)}
        if self.problems:
            out["problems"] = list(self.problems)
        return out


@dataclass
class WheelTargets:
    """What a wheel (or an unpacked wheel directory) holds for which GPU targets.

    ``files`` are the facts decisions use: the binaries when they were audited, else the stamp.
    ``source`` says which: ``"stamp+binaries"`` (both, compared), ``"stamp"``, ``"binaries"``,
    or ``None`` when nothing could be read (then ``known`` is False).
    ``mismatch`` lists each way the stamp disagrees with the binaries; ``problems`` what could
    not be read (a corrupt stamp, a damaged binary, a missing audit).
    """

    path: Path
    name: str | None = None
    version: str | None = None
    stamped: bool = False
    audited: bool = False
    files: list[DeviceFile] = field(default_factory=list)
    stamp_files: list[DeviceFile] | None = None
    mismatch: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    known: bool = True

    @property
    def source(self) -> str | None:
        if not self.known:
            return None
        if self.stamped and self.audited:
            return "stamp+binaries"
        return "stamp" if self.stamped else "binaries"

    @property
    def targets(self) -> list[str]:
        """Every target with code in some file (sorted, unique)."""
        return _sorted_names({t for f in self.files for t in f.targets})

    @property
    def complete(self) -> list[str]:
        """The targets every device file covers completely."""
        if not self.files:
            return []
        common = set(self.files[0].complete)
        for f in self.files[1:]:
            common &= set(f.complete)
        return _sorted_names(common)

    @property
    def has_device_code(self) -> bool:
        return bool(self.files)

    def verdict(self, device: GpuTarget | str, *, generic_ok: bool | None = True) -> tuple[str, str | None]:
        """(``ok`` | ``fails`` | ``unknown``, reason) for one device."""
        if not self.known:
            return UNKNOWN, "; ".join(self.problems) or "nothing readable says what this wheel holds"
        worst, reasons = OK, []
        for f in self.files:
            status, reason = _file_verdict(f, device, generic_ok)
            if status == FAILS:
                if worst != FAILS:
                    reasons = []
                worst = FAILS
                reasons.append(reason)
            elif status == UNKNOWN and worst != FAILS:
                worst = UNKNOWN
                reasons.append(reason)
        return worst, ("; ".join(r for r in reasons if r) or None)

    def serves(self, device: GpuTarget | str, *, generic_ok: bool | None = True) -> bool:
        return self.verdict(device, generic_ok=generic_ok)[0] == OK

    def to_dict(self) -> dict:
        return {
            "path": str(self.path),
            "name": self.name,
            "version": self.version,
            "stamped": self.stamped,
            "audited": self.audited,
            "source": self.source,
            "targets": self.targets,
            "complete": self.complete,
            "files": {f.path: f.to_dict() for f in self.files},
            "stamp_mismatch": list(self.mismatch),
            "problems": list(self.problems),
        }


@lru_cache(maxsize=4096)
def _name_key(name: str) -> tuple:
    from rocm_build_backend.gpu.targets import _sort_key, parse_target

    try:
        return (0, _sort_key(parse_target(name)), name)
    except UnknownTargetError:
        return (1, (), name)


def _sorted_names(names: Iterable[str]) -> list[str]:
    """Target names in the stable target order; names the table does not know go last."""
    return sorted(set(names), key=_name_key)


def _why_not(code: str, device: GpuTarget | str, generic_ok: bool) -> str | None:
    """compat.why_not, tolerant of target names the table does not know."""
    from rocm_build_backend.gpu.compat import why_not

    try:
        return why_not(code, device, generic_ok=generic_ok)
    except UnknownTargetError:
        dev = str(device).split(":")[0]
        proc = code.split(":")[0]
        if proc == dev:
            return None
        return f"{code} is for {proc}, the device is {dev}"


def _damaged(f: DeviceFile) -> str:
    more = f" (and {len(f.problems) - 1} more problems)" if len(f.problems) > 1 else ""
    return f"{f.path} could not be read completely: {f.problems[0]}{more}"


def _file_verdict(f: DeviceFile, device: GpuTarget | str, generic_ok: bool | None) -> tuple[str, str | None]:
    dev = str(device)
    if not f.complete:
        if f.problems:
            return UNKNOWN, _damaged(f)
        have = ", ".join(f.targets) or "no target"
        return FAILS, f"{f.path}: no target has code for all of its kernels (found {have})"
    reasons, needs_generic = [], []
    for code in f.complete:
        reason = _why_not(code, device, True)
        if reason is None:
            if not code.endswith("-generic") or generic_ok:
                if f.problems:
                    return UNKNOWN, _damaged(f)
                return OK, None
            needs_generic.append(code)
        else:
            reasons.append((code, reason))
    if needs_generic:
        gen = ", ".join(needs_generic)
        if generic_ok is None:
            return UNKNOWN, (
                f"{f.path} has only generic code ({gen}) for {dev}; it loads with ROCm 6.4 or newer, "
                "and this host's ROCm version is not known"
            )
        return FAILS, f"{f.path}: {_why_not(needs_generic[0], device, False)}"
    if f.problems:
        return UNKNOWN, _damaged(f)
    proc = dev.split(":")[0]
    close = [r for code, r in reasons if code.split(":")[0] == proc]
    if close:
        return FAILS, f"{f.path}: " + "; ".join(close)
    return FAILS, f"{f.path} has code for {', '.join(f.complete)}, not for {proc}"


# --------------------------------------------------------------------------------------------
# reading a wheel (zip) or an unpacked wheel (directory)


def _parse_metadata(text: str) -> dict[str, str]:
    """The first value of each core metadata header we need (Name, Version, Requires-Python)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        if line[:1] in " \t" or ":" not in line:
            continue
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("name", "version", "requires-python") and key not in out:
            out[key] = value.strip()
    return out


def _pick_dist_info(names: Iterable[str], where: str, hint_name: str | None = None) -> str:
    dirs = sorted({n.split("/", 1)[0] for n in names if "/" in n and n.split("/", 1)[0].endswith(".dist-info")})
    if not dirs:
        raise WheelError(f"{where} has no .dist-info directory", hint="is it a wheel?")
    if len(dirs) > 1 and hint_name:
        from packaging.utils import canonicalize_name

        want = canonicalize_name(hint_name)
        match = [d for d in dirs if canonicalize_name(d[: -len(".dist-info")].rsplit("-", 1)[0]) == want]
        if len(match) == 1:
            return match[0]
    if len(dirs) > 1:
        raise WheelError(f"{where} has {len(dirs)} .dist-info directories: {', '.join(dirs)}")
    return dirs[0]


@lru_cache(maxsize=4096)
def _norm_target(name: str) -> str:
    from rocm_build_backend.gpu.targets import parse_target

    try:
        return str(parse_target(name))
    except UnknownTargetError:
        return name.strip()


def stamp_files(stamp: object) -> tuple[list[DeviceFile] | None, list[str]]:
    """The per-file targets a stamp records, and the problems found reading it.

    Returns (None, problems) when the stamp cannot be used at all.
    """
    if not isinstance(stamp, dict):
        return None, ["the stamp is not a JSON object"]
    problems = []
    try:
        from rocm_build_backend.wheel.stamp import SCHEMA_VERSION, stamp_problems
    except ImportError:  # pragma: no cover - the stamp module ships with this one
        pass
    else:
        version = stamp.get("schema_version")
        if not (type(version) is int and version > SCHEMA_VERSION):
            shape = stamp_problems(stamp)
            if shape:
                return None, ["the stamp is not valid: " + "; ".join(shape)]
    version = stamp.get("schema_version")
    if not isinstance(version, int):
        return None, ["the stamp has no schema_version"]
    if version > KNOWN_SCHEMA:
        problems.append(f"the stamp's schema version {version} is newer than this tool's ({KNOWN_SCHEMA})")
    audit = stamp.get("audit")
    files = audit.get("files") if isinstance(audit, dict) else None
    if not isinstance(files, dict):
        return None, problems + ["the stamp has no audit.files table"]
    out = []
    for path, facts in sorted(files.items()):
        if not isinstance(facts, dict):
            return None, problems + [f"the stamp's entry for {path!r} is not an object"]
        targets, complete = facts.get("targets", []), facts.get("complete", [])
        if not (isinstance(targets, list) and isinstance(complete, list)) or not all(
            isinstance(t, str) for t in targets + complete
        ):
            return None, problems + [f"the stamp's entry for {path!r} has no list of target names"]
        out.append(
            DeviceFile(
                str(path),
                tuple(_sorted_names(_norm_target(t) for t in targets)),
                tuple(_sorted_names(_norm_target(t) for t in complete)),
            )
        )
    return out, problems


def _audit_module():
    try:
        from rocm_build_backend.binary import audit
    except ImportError:
        return None
    return audit


def _files_from_report(report) -> list[DeviceFile]:
    out = []
    for fr in getattr(report, "files", []) or []:
        targets = [_norm_target(str(t)) for t in (getattr(fr, "targets", None) or [])]
        complete = [_norm_target(str(t)) for t in (getattr(fr, "complete", None) or [])]
        problems = tuple(str(p) for p in (getattr(fr, "problems", None) or []))
        if not targets and not problems:
            continue
        out.append(DeviceFile(str(fr.path), tuple(_sorted_names(targets)), tuple(_sorted_names(complete)), problems))
    return sorted(out, key=lambda f: f.path)


def _audit_wheel(path: Path) -> tuple[list[DeviceFile] | None, list[str]]:
    audit = _audit_module()
    if audit is None:
        return None, ["no audit of the binaries is available"]
    try:
        report = audit.audit_wheel(path)
    except RocmBuildBackendError as exc:
        return None, [f"the binaries could not be audited: {exc.message}"]
    except (OSError, ValueError) as exc:
        return None, [f"the binaries could not be audited: {exc}"]
    problems = [str(p) for p in getattr(report, "problems", []) or []]
    if problems and not report.files:
        return None, [f"the binaries could not be audited: {'; '.join(problems)}"]
    return _files_from_report(report), []


def _audit_tree(root: Path, members: list[str]) -> tuple[list[DeviceFile] | None, list[str]]:
    """Audit an unpacked wheel (uv keeps wheels unzipped), file by file, without copying."""
    audit = _audit_module()
    if audit is None:
        return None, ["no audit of the binaries is available"]
    reports = []
    for member in members:
        try:
            report = audit.audit_file(root / member)
        except RocmBuildBackendError as exc:
            return None, [f"the binaries could not be audited: {exc.message}"]
        except (OSError, ValueError) as exc:
            return None, [f"the binaries could not be audited: {exc}"]
        report.path = member
        reports.append(report)

    class _Report:
        files = reports

    return _files_from_report(_Report), []


def _compare(stamp: list[DeviceFile], binaries: list[DeviceFile]) -> list[str]:
    """Each way the stamp's per-file targets differ from what the binaries hold."""
    out = []
    s = {f.path: f for f in stamp}
    b = {f.path: f for f in binaries}
    for path in sorted(set(s) | set(b)):
        if path not in b:
            if any(f.problems for f in binaries):
                continue
            out.append(f"the stamp lists {path} ({', '.join(s[path].targets)}), which has no device code")
        elif path not in s:
            out.append(f"{path} has device code for {', '.join(b[path].targets)} that the stamp does not list")
        elif set(s[path].targets) != set(b[path].targets) and not b[path].problems:
            out.append(
                f"{path}: the stamp says {', '.join(s[path].targets) or 'nothing'}, "
                f"the binaries hold {', '.join(b[path].targets) or 'nothing'}"
            )
        elif set(s[path].complete) != set(b[path].complete) and not b[path].problems:
            out.append(
                f"{path}: the stamp says every kernel has {', '.join(s[path].complete) or 'nothing'}, "
                f"the binaries have every kernel for {', '.join(b[path].complete) or 'nothing'}"
            )
    return out


def _take_stamp(wt: WheelTargets, raw: bytes) -> None:
    """Read a stamp's bytes into ``wt``: its files, or the problems that make it unusable."""
    try:
        stamp = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        wt.problems.append(f"the stamp {STAMP_NAME} is not valid JSON ({exc})")
        return
    files, problems = stamp_files(stamp)
    wt.problems.extend(problems)
    if files is not None:
        wt.stamped, wt.stamp_files = True, files


def facts_from_zip(zf: "zipfile.ZipFile", path: Path, *, audit: bool = True) -> WheelTargets:
    """Read a wheel already opened as a ZipFile (``index.py`` hashes and parses in one read)."""
    names = zf.namelist()
    hint = path.name.split("-", 1)[0] if path.name.endswith(".whl") else None
    dist_info = _pick_dist_info(names, path.name, hint)
    wt = WheelTargets(path=path)
    try:
        meta = _parse_metadata(zf.read(f"{dist_info}/METADATA").decode("utf-8", "replace"))
    except KeyError:
        raise WheelError(f"{path.name} has no {dist_info}/METADATA", hint="is it a wheel?") from None
    wt.name, wt.version = meta.get("name"), meta.get("version")
    stamp_name = f"{dist_info}/{STAMP_NAME}"
    if stamp_name in names:
        _take_stamp(wt, zf.read(stamp_name))
    if audit or not wt.stamped:
        binaries, problems = _audit_wheel(path)
        if binaries is None and not wt.stamped:
            # no audit: a wheel without any binary member is still known to be pure
            if not any(n.endswith(_BINARY_SUFFIXES) and not n.endswith("/") for n in names):
                binaries, problems = [], []
        _settle(wt, binaries, problems)
    else:
        wt.files = list(wt.stamp_files or [])
    return wt


def _settle(wt: WheelTargets, binaries: list[DeviceFile] | None, problems: list[str]) -> None:
    if binaries is not None:
        wt.audited = True
        wt.files = binaries
        if wt.stamped:
            wt.mismatch = _compare(wt.stamp_files or [], binaries)
    elif wt.stamped:
        wt.files = list(wt.stamp_files or [])
        if problems and "no audit" not in problems[0]:
            wt.problems.extend(problems)
    else:
        if not any("stamp" in p for p in wt.problems):
            wt.problems.append("the wheel has no stamp")
        wt.problems.extend(problems)
        wt.known = False


def facts_from_tree(root: Path, *, audit: bool = True) -> WheelTargets:
    """Read an unpacked wheel (uv keeps wheels unzipped in its cache)."""
    members = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            members.append(p.relative_to(root).as_posix())
    dist_info = _pick_dist_info(members, str(root))
    wt = WheelTargets(path=root)
    try:
        meta = _parse_metadata((root / dist_info / "METADATA").read_text("utf-8", "replace"))
    except OSError:
        raise WheelError(f"{root} has no {dist_info}/METADATA", hint="is it an unpacked wheel?") from None
    wt.name, wt.version = meta.get("name"), meta.get("version")
    stamp_path = root / dist_info / STAMP_NAME
    if stamp_path.is_file():
        try:
            raw = stamp_path.read_bytes()
        except OSError as exc:
            wt.problems.append(f"cannot read the stamp {STAMP_NAME} ({exc.strerror})")
        else:
            _take_stamp(wt, raw)
    if audit or not wt.stamped:
        binaries, problems = _audit_tree(root, [m for m in members if not m.startswith(dist_info + "/")])
        if binaries is None and not wt.stamped:
            if not any(m.endswith(_BINARY_SUFFIXES) for m in members):
                binaries, problems = [], []
        _settle(wt, binaries, problems)
    else:
        wt.files = list(wt.stamp_files or [])
    return wt


def wheel_targets(path: str | Path, *, audit: bool = True) -> WheelTargets:
    """The device targets of a wheel file (or an unpacked wheel directory).

    With ``audit=True`` the binaries are audited even when the wheel is stamped, and any
    disagreement lands in ``.mismatch``. Raises WheelError for a file that is not a wheel.
    """
    import zipfile

    path = Path(path)
    if path.is_dir():
        return facts_from_tree(path, audit=audit)
    try:
        with zipfile.ZipFile(path) as zf:
            return facts_from_zip(zf, path, audit=audit)
    except FileNotFoundError:
        raise WheelError(f"{path}: no such file", hint="check the path") from None
    except (zipfile.BadZipFile, EOFError) as exc:
        raise WheelError(f"{path} is not a readable wheel ({exc})", hint="rebuild or re-download it") from None
    except OSError as exc:
        raise WheelError(f"{path} cannot be read ({exc.strerror or exc})") from None


# --------------------------------------------------------------------------------------------
# the report


@dataclass
class DeviceVerdict:
    device: str
    status: str
    reason: str | None = None

    def to_dict(self) -> dict:
        return {"device": self.device, "status": self.status, "reason": self.reason}


@dataclass
class WheelCheck:
    path: Path
    status: str
    facts: WheelTargets | None
    verdicts: list[DeviceVerdict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        out = {"path": str(self.path), "status": self.status}
        if self.facts is not None:
            facts = self.facts.to_dict()
            facts.pop("path")
            out.update(facts)
            out["problems"] = list(self.facts.problems)
        else:
            out["problems"] = list(self.problems)
        out["devices"] = [v.to_dict() for v in self.verdicts]
        return out


@dataclass
class CheckReport:
    wheels: list[WheelCheck]
    devices: list[str]
    notes: list[str] = field(default_factory=list)
    generic_ok: bool | None = True

    @property
    def exit_code(self) -> int:
        statuses = {w.status for w in self.wheels}
        if FAILS in statuses:
            return 1
        if UNKNOWN in statuses:
            return 2
        return 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def to_dict(self) -> dict:
        return {
            "devices": list(self.devices),
            "generic_targets": {True: "load", False: "do not load", None: "unknown"}[self.generic_ok],
            "notes": list(self.notes),
            "wheels": [w.to_dict() for w in self.wheels],
            "exit_code": self.exit_code,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def to_text(self) -> str:
        lines = ["devices: " + (", ".join(self.devices) if self.devices else "none found")]
        lines += [f"note: {n}" for n in self.notes]
        for w in self.wheels:
            facts = w.facts
            if facts is not None and facts.known:
                what = ", ".join(facts.targets) if facts.has_device_code else "no device code"
                lines.append(f"{w.status:<8}{w.path.name}  ({facts.source}: {what})")
            else:
                lines.append(f"{w.status:<8}{w.path.name}")
            known = facts is not None and facts.known
            if known:
                for v in w.verdicts:
                    if v.status != OK and v.reason:
                        lines.append(f"        {v.device}: {v.reason}")
            problems = list(facts.problems) if facts is not None else list(w.problems)
            if w.status == UNKNOWN and not w.verdicts and known:
                problems.append("there is no device to check against")
            label = "warning" if known else "cannot tell"
            lines += [f"        {label}: {p}" for p in problems]
            if facts is not None and facts.mismatch:
                lines.append("        warning: the stamp disagrees with the binaries (the binaries are used):")
                lines += [f"          - {m}" for m in facts.mismatch]
        good = sum(w.status == OK for w in self.wheels)
        lines.append(
            f"{good} of {len(self.wheels)} wheel{'s' if len(self.wheels) != 1 else ''} "
            f"load{'s' if len(self.wheels) == 1 else ''} on every device"
        )
        return "\n".join(lines)


def check_wheels(
    paths: Iterable[str | Path],
    devices: Sequence[GpuTarget | str],
    *,
    generic_ok: bool | None = True,
    notes: Sequence[str] = (),
    audit: bool = True,
) -> CheckReport:
    """Check each wheel against each device (full target IDs, as detection reports them).

    ``generic_ok``: True when the HIP runtime is ROCm 6.4 or newer (generic code loads), False
    when older, None when not known (a wheel that has only generic code for a device is then
    ``unknown``). ``notes`` are lines the report repeats (detection's warnings, such as an
    HSA_OVERRIDE_GFX_VERSION in effect). A wheel that cannot be read is ``unknown``, not an error.
    """
    devs = [str(d) for d in devices]
    out = []
    for p in paths:
        p = Path(p)
        try:
            facts = wheel_targets(p, audit=audit)
        except RocmBuildBackendError as exc:
            out.append(WheelCheck(p, UNKNOWN, None, problems=[exc.message]))
            continue
        verdicts = [DeviceVerdict(d, *facts.verdict(d, generic_ok=generic_ok)) for d in devs]
        statuses = {v.status for v in verdicts}
        if not devs:
            status = OK if facts.known and not facts.has_device_code else UNKNOWN
        elif FAILS in statuses:
            status = FAILS
        elif UNKNOWN in statuses:
            status = UNKNOWN
        else:
            status = OK
        out.append(WheelCheck(p, status, facts, verdicts))
    return CheckReport(out, devs, list(notes), generic_ok)


def devices_from_detection(detection) -> tuple[list[GpuTarget], list[str]]:
    """The devices ``check``/``cache`` should test (those detection included) and its notes."""
    devices, notes = [], []
    for d in getattr(detection, "devices", []) or []:
        if getattr(d, "included", True):
            devices.append(d.target)
            if getattr(d, "physical", None) is not None and d.physical != d.target:
                notes.append(f"an override is in effect: the {d.physical} GPU loads code as {d.target}")
        else:
            notes.append(f"{d.target} is not checked: {getattr(d, 'reason', '') or 'left out by detection'}")
    warnings = [str(w) for w in getattr(detection, "warnings", []) or []]
    if any("OVERRIDE" in w for w in warnings):
        notes = [n for n in notes if not n.startswith("an override is in effect")]
    return devices, notes + [w for w in warnings if w not in notes]


def generic_ok_for(rocm_version: str | None) -> bool | None:
    """Whether generic targets load under this ROCm version (6.4 on); None when unknown."""
    if not rocm_version:
        return None
    parts = []
    for piece in str(rocm_version).split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            return None
        parts.append(int(digits))
    while len(parts) < 2:
        parts.append(0)
    return tuple(parts) >= (6, 4)


def host_rocm_version(*, root: Path = Path("/"), env: dict | None = None) -> str | None:
    """The ROCm version installed under ``root`` (``$ROCM_PATH`` or /opt/rocm), if it says."""
    import os

    env = os.environ if env is None else env
    bases = []
    for var in ("ROCM_PATH", "ROCM_HOME", "HIP_PATH"):
        if env.get(var):
            bases.append(Path(env[var]))
    bases.append(Path("/opt/rocm"))
    for base in bases:
        base = root / base.relative_to(base.anchor) if base.is_absolute() else root / base
        for rel in (".info/version", ".info/version-dev", ".info/version-hip-libraries"):
            try:
                text = (base / rel).read_text("utf-8").strip()
            except OSError:
                continue
            if text:
                return text.split("-")[0]
    return None

