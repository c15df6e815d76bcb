"""Reading a wheel's targets: its stamp first, an audit of its binaries when there is none.

``wheel_targets(path)`` reads a ``.whl`` (or an unpacked wheel folder, as uv keeps them) into a
``facts.WheelTargets``: the per-file targets its stamp records (``docs/stamp.md``) and, with
``audit=True`` or when the stamp is missing, what ``binary/audit.py`` finds in its binaries.
When the two disagree the binaries win and the disagreement is kept in ``.mismatch``.
``facts_from_zip`` reads a wheel already open (``index`` hashes and parses in one read);
``parse_metadata`` and ``pick_dist_info`` are the small readers ``index`` and ``cache`` share.

It decides no verdict (``facts.py``), builds no report (``check.py``) and writes nothing.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from packaging.utils import canonicalize_name

from rocm_build_backend.binary import audit
from rocm_build_backend.errors import RocmBuildBackendError, UnknownTargetError, WheelError
from rocm_build_backend.files import read_regular
from rocm_build_backend.gpu.targets import parse_target
from rocm_build_backend.wheel.archive import MAX_METADATA, MAX_STAMP, read_named
from rocm_build_backend.wheel.facts import DeviceFile, WheelTargets, sorted_names
from rocm_build_backend.wheel.stamp import SCHEMA_VERSION, stamp_problems

STAMP_NAME = "rocm_build.json"
KNOWN_SCHEMA = 1

# Members that can hold device code; anything else is not audited when the audit module is
# missing and the wheel has no stamp (a wheel without any of these is pure).
_BINARY_SUFFIXES = (".so", ".pyd", ".dll", ".dylib", ".hsaco", ".co", ".fatbin", ".cubin", ".o", ".bin", ".a")


def parse_metadata(text: str) -> dict[str, str]:
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


def pick_dist_info(names: Iterable[str], where: str, hint_name: str | None = None) -> str:
    dirs = sorted({n.split("/", 1)[0] for n in names if "/" in n and n.split("/", 1)[0].endswith(".dist-info")})
    if not dirs:
        raise WheelError(f"{where} has no .dist-info directory", hint="is it a wheel?")
    if len(dirs) > 1 and hint_name:
        want = canonicalize_name(hint_name)
        match = [d for d in dirs if canonicalize_name(d[: -len(".dist-info")].rsplit("-", 1)[0]) == want]
        if len(match) == 1:
            return match[0]
    if len(dirs) > 1:
        raise WheelError(f"{where} has {len(dirs)} .dist-info directories: {', '.join(dirs)}")
    return dirs[0]


@lru_cache(maxsize=4096)
def _norm_target(name: str) -> str:
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
    version = stamp.get("schema_version")
    if not (type(version) is int and version > SCHEMA_VERSION):
        shape = stamp_problems(stamp)
        if shape:
            return None, ["the stamp is not valid: " + "; ".join(shape)]
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
        unread = facts.get("problems", [])  # the audit could not read it (verify = "warn")
        out.append(
            DeviceFile(
                str(path),
                tuple(sorted_names(_norm_target(t) for t in targets)),
                tuple(sorted_names(_norm_target(t) for t in complete)),
                tuple(str(p) for p in unread) if isinstance(unread, list) else (),
            )
        )
    return out, problems


def _files_from_report(report: Any) -> list[DeviceFile]:
    out = []
    for fr in getattr(report, "files", []) or []:
        targets = [_norm_target(str(t)) for t in (getattr(fr, "targets", None) or [])]
        complete = [_norm_target(str(t)) for t in (getattr(fr, "complete", None) or [])]
        problems = tuple(str(p) for p in (getattr(fr, "problems", None) or []))
        if not targets and not problems:
            continue
        out.append(
            DeviceFile(
                str(fr.path),
                tuple(sorted_names(targets)),
                tuple(sorted_names(complete)),
                problems,
                _norm_modules(getattr(fr, "modules", None) or ()),
                _norm_modules(getattr(fr, "unread", None) or ()),
            )
        )
    return sorted(out, key=lambda f: f.path)


def _norm_modules(modules: Any) -> tuple[tuple[tuple[str, ...], int], ...]:
    return tuple((tuple(sorted_names(_norm_target(str(t)) for t in targets)), int(count)) for targets, count in modules)


def _audit_wheel(path: Path) -> tuple[list[DeviceFile] | None, list[str]]:
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


def read_metadata(zf: "zipfile.ZipFile", dist_info: str, where: str) -> bytes:
    """A wheel's METADATA bytes, at most ``MAX_METADATA``; WheelError when it cannot be read."""
    if f"{dist_info}/METADATA" not in zf.NameToInfo:
        raise WheelError(f"{where} has no {dist_info}/METADATA", hint="is it a wheel?")
    return read_named(zf, f"{dist_info}/METADATA", MAX_METADATA, "METADATA")


def facts_from_zip(
    zf: "zipfile.ZipFile", path: Path, *, audit: bool = True, metadata: bytes | None = None
) -> WheelTargets:
    """Read a wheel already opened as a ZipFile (``index.py`` hashes and parses in one read).

    ``metadata``: the METADATA bytes when the caller has read them already.
    """
    names = zf.namelist()
    hint = path.name.split("-", 1)[0] if path.name.endswith(".whl") else None
    dist_info = pick_dist_info(names, path.name, hint)
    wt = WheelTargets(path=path)
    if metadata is None:
        metadata = read_metadata(zf, dist_info, path.name)
    meta = parse_metadata(metadata.decode("utf-8", "replace"))
    wt.name, wt.version = meta.get("name"), meta.get("version")
    stamp_name = f"{dist_info}/{STAMP_NAME}"
    if stamp_name in names:
        try:
            raw = read_named(zf, stamp_name, MAX_STAMP, "the stamp")
        except WheelError as exc:
            wt.problems.append(f"the stamp cannot be used: {exc.message}")
        else:
            _take_stamp(wt, raw)
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


def read_regular_file(path: Path, limit: int, what: str) -> bytes:
    """A regular file's bytes, at most ``limit``; WheelError for a FIFO, a device, a symlink,
    a file larger than ``limit`` or one that cannot be read. Never blocks on a FIFO
    (``files.read_regular``)."""
    try:
        return read_regular(path, limit, follow=False)
    except OSError as exc:
        if os.path.islink(path):
            raise WheelError(f"{what} is not a regular file (a symlink)") from None
        if exc.strerror == "not a regular file":
            raise WheelError(f"{what} is not a regular file") from None
        if exc.errno == errno.EFBIG:
            raise WheelError(f"{what} is larger than the {limit} bytes allowed") from None
        raise WheelError(f"{what} cannot be read ({exc.strerror or exc})") from None


def facts_from_tree(root: Path, *, audit: bool = True) -> WheelTargets:
    """Read an unpacked wheel (uv keeps wheels unzipped in its cache)."""
    members = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            members.append(p.relative_to(root).as_posix())
    dist_info = pick_dist_info(members, str(root))
    wt = WheelTargets(path=root)
    metadata = root / dist_info / "METADATA"
    if not os.path.lexists(metadata):
        raise WheelError(f"{root} has no {dist_info}/METADATA", hint="is it an unpacked wheel?")
    raw_meta = read_regular_file(metadata, MAX_METADATA, f"{dist_info}/METADATA")
    meta = parse_metadata(raw_meta.decode("utf-8", "replace"))
    wt.name, wt.version = meta.get("name"), meta.get("version")
    stamp_path = root / dist_info / STAMP_NAME
    if os.path.lexists(stamp_path):
        try:
            raw = read_regular_file(stamp_path, MAX_STAMP, f"the stamp {STAMP_NAME}")
        except WheelError as exc:
            wt.problems.append(f"the stamp cannot be used: {exc.message}")
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
    path = Path(path)
    if path.is_dir():
        return facts_from_tree(path, audit=audit)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise WheelError(f"{path} is not a regular file", hint="give the path of a .whl file")
        with zipfile.ZipFile(path) as zf:
            return facts_from_zip(zf, path, audit=audit)
    except FileNotFoundError:
        raise WheelError(f"{path}: no such file", hint="check the path") from None
    except (zipfile.BadZipFile, EOFError) as exc:
        raise WheelError(f"{path} is not a readable wheel ({exc})", hint="rebuild or re-download it") from None
    except OSError as exc:
        raise WheelError(f"{path} cannot be read ({exc.strerror or exc})") from None
