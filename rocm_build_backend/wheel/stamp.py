"""The wheel stamp: ``<name>-<version>.dist-info/rocm_build.json``: its record, its reading.

``make_stamp`` builds the record (pure); ``rewrite_wheel`` adds it to a built wheel (the
atomic rewrite itself lives in ``rewrite.py``), optionally renaming the wheel to a new
version (``label.local_version`` makes ``1.0+gfx942``); ``read_stamp`` reads it back and
``stamp_problems`` checks its shape. The format is described in ``docs/stamp.md`` and
``data/stamp.schema.json``.

It must not decide what a wheel's targets are when the stamp and the binaries disagree (that
is ``reader.py``), nor touch a wheel's bytes itself.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from rocm_build_backend.errors import RocmBuildBackendError, WheelError
from rocm_build_backend.gpu.targets import GpuTarget, parse_target, sort_targets
from rocm_build_backend.wheel.archive import MAX_MEMBERS, MAX_STAMP, dist_info_dir, open_wheel, read_named
from rocm_build_backend.wheel.rewrite import (  # noqa: F401  (re-exported: the documented import path)
    clean_stale_temps,
    rewrite_members,
    rewrite_metadata_dir,
    set_metadata_version,
)

__all__ = [
    "STAMP_NAME",
    "SCHEMA_VERSION",
    "GENERATOR",
    "Stamp",
    "audit_entries",
    "make_stamp",
    "stamp_problems",
    "stamp_bytes",
    "rewrite_wheel",
    "read_stamp",
    "stamp_targets",
    "clean_stale_temps",
    "rewrite_metadata_dir",
    "set_metadata_version",
]

STAMP_NAME = "rocm_build.json"
SCHEMA_VERSION = 1
MAX_FILE_PROBLEMS = 20  # problems a stamp keeps per file; the rest are counted
GENERATOR = "rocm-build-backend"

_TOOLCHAIN_KEYS = ("compiler", "version", "hip_version", "rocm_version")

Stamp = dict[str, Any]


# --------------------------------------------------------------------------- the record


def _ordered_targets(values: Iterable[object]) -> list[str]:
    """Target IDs in the stable sorted order, duplicates dropped; unparsable ones last, sorted."""
    known: list[GpuTarget] = []
    unknown: set[str] = set()
    for value in values:
        if isinstance(value, GpuTarget):
            known.append(value)
            continue
        try:
            known.append(parse_target(str(value)))
        except RocmBuildBackendError:
            unknown.add(str(value).strip().lower())
    return [str(t) for t in sort_targets(known)] + sorted(unknown - {""})


def make_stamp(
    *,
    requested: Iterable[object],
    source: str,
    audit_files: Mapping[str, Mapping[str, Any]],
    host_gpus: Iterable[object],
    toolchain: Mapping[str, object],
    version: str,
    enforced: Mapping[str, Any] | None = None,
    switches: Iterable[Mapping[str, Any]] = (),
) -> Stamp:
    """The stamp record for one wheel (pure: a function of its arguments only).

    ``requested``: the targets the build asked for (GpuTarget or str); ``source`` where they
    came from (``settings``, ``PYTORCH_ROCM_ARCH``, ``detected:<probe>``); ``audit_files``:
    wheel member -> ``{"targets": [...], "complete": [...]}`` for each file with device code,
    plus ``"problems": [...]`` for a file the audit could not read completely (kept, at most
    ``MAX_FILE_PROBLEMS``; other keys are dropped; ``complete`` defaults to ``targets``);
    ``host_gpus``: the build
    host's full target IDs; ``toolchain``: ``compiler`` (a name; a path is cut to its last
    part), ``version``, ``hip_version``, ``rocm_version`` (missing -> None; other keys are
    dropped); ``version``: rocm-build-backend's own version; ``switches``: the project's own
    switches the build turned on (``file``, ``line``, ``name``, ``given``).
    """
    files: dict[str, dict[str, list[str]]] = {}
    for member in sorted(audit_files):
        entry = audit_files[member]
        found = _ordered_targets(entry.get("targets", ()))
        complete = _ordered_targets(entry.get("complete", found))
        files[member] = {"targets": found, "complete": [t for t in complete if t in found]}
        problems = [str(p) for p in entry.get("problems", ())]
        if len(problems) > MAX_FILE_PROBLEMS:
            more = len(problems) - MAX_FILE_PROBLEMS + 1
            problems = problems[: MAX_FILE_PROBLEMS - 1] + [f"too many problems: {more} more not listed"]
        if problems:
            files[member]["problems"] = problems
    union: list[str] = _ordered_targets(t for f in files.values() for t in f["targets"])
    if files:
        common = set.intersection(*(set(f["complete"]) for f in files.values()))
        complete_all = [t for t in union if t in common]
    else:
        complete_all = []
    tool: dict[str, str | None] = {}
    for key in _TOOLCHAIN_KEYS:
        value = toolchain.get(key)
        value = None if value in (None, "") else str(value)
        if key == "compiler" and value:
            value = value.replace("\\", "/").rsplit("/", 1)[-1]
        tool[key] = value
    out: Stamp = {
        "schema_version": SCHEMA_VERSION,
        "generator": {"name": GENERATOR, "version": str(version)},
        "requested": {"targets": _ordered_targets(requested), "source": str(source)},
        "audit": {"targets": union, "complete": complete_all, "files": files},
        "host": {"gpus": _ordered_targets(host_gpus)},
        "toolchain": tool,
    }
    if enforced is not None:
        out["enforced"] = _enforced(enforced)
    applied = [
        {"file": str(s["file"]), "line": int(s["line"]), "name": str(s["name"]), "given": str(s["given"])}
        for s in switches
    ]
    if applied:
        out["switches"] = applied
    return out


def audit_entries(files: Iterable[Any]) -> dict[str, dict[str, list[str]]]:
    """``make_stamp``'s ``audit_files`` from an audit's file reports: every file with device
    code, and every file the audit could not read completely, with what it could not read
    (so a wheel built with ``verify = "warn"`` does not read as one without device code)."""
    out: dict[str, dict[str, list[str]]] = {}
    for f in files:
        problems = [str(p) for p in f.problems]
        problems += [f"{c.where}: cannot check its targets ({c.note})" for c in f.containers if not c.read]
        if f.targets or problems:
            entry = {"targets": list(f.targets), "complete": list(f.complete)}
            if problems:
                entry["problems"] = problems
            out[f.path] = entry
    return out


def _enforced(data: Mapping[str, Any]) -> dict[str, Any]:
    """The stamp's ``enforced`` object: counts, target lists in the stable order, source names."""

    def count(key: str) -> int:
        value = data.get(key, 0)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    whole = [
        {"sources": sorted(str(s) for s in w.get("sources", ())), "targets": _ordered_targets(w.get("targets", ()))}
        for w in data.get("left_whole", ())
        if isinstance(w, Mapping)
    ]
    out: dict[str, Any] = {
        "how": [str(line) for line in data.get("how", ())],
        "compiles": count("compiles"),
        "rewritten": count("rewritten"),
        "kept": count("kept"),
        "added": count("added"),
        "dropped": _ordered_targets(data.get("dropped", ())),
        "left_whole": whole,
        "left_whole_count": max(count("left_whole_count"), len(whole)),
        "refused": count("refused"),
    }
    exact = data.get("exact")
    if isinstance(exact, Mapping):
        found = exact.get("files")
        files: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        out["exact"] = {
            "ok": bool(exact.get("ok")),
            "files": {
                str(m): {"extra": _ordered_targets(f.get("extra", ())), "why": str(f.get("why", "unexplained"))}
                for m, f in sorted(files.items())
                if isinstance(f, Mapping)
            },
        }
    return out


def stamp_problems(data: object) -> list[str]:
    """What is wrong with a stamp's shape (the fields readers rely on); [] when it is fine.

    The full JSON Schema is ``data/stamp.schema.json``; this check needs no dependency.
    """

    def str_list(value: object) -> bool:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)

    if not isinstance(data, dict):
        return [f"the stamp is a JSON {type(data).__name__}, not an object"]
    problems = []
    version = data.get("schema_version")
    if type(version) is not int:
        return ["the stamp has no integer 'schema_version'"]
    if version != SCHEMA_VERSION:
        return [f"stamp schema version {version} is not {SCHEMA_VERSION}"]
    for key in ("generator", "requested", "audit", "host", "toolchain"):
        if not isinstance(data.get(key), dict):
            problems.append(f"'{key}' is missing or not an object")
    if problems:
        return problems
    if not str_list(data["requested"].get("targets")):
        problems.append("'requested.targets' is not a list of strings")
    if not isinstance(data["requested"].get("source"), str):
        problems.append("'requested.source' is not a string")
    audit = data["audit"]
    for key in ("targets", "complete"):
        if not str_list(audit.get(key)):
            problems.append(f"'audit.{key}' is not a list of strings")
    files = audit.get("files")
    if not isinstance(files, dict):
        problems.append("'audit.files' is not an object")
    else:
        for member, entry in files.items():
            if not (isinstance(entry, dict) and str_list(entry.get("targets")) and str_list(entry.get("complete"))):
                problems.append(f"'audit.files' entry {member!r} needs 'targets' and 'complete' lists")
                break
            if "problems" in entry and not str_list(entry["problems"]):
                problems.append(f"'audit.files' entry {member!r} has 'problems' that are not a list of strings")
                break
    if not str_list(data["host"].get("gpus")):
        problems.append("'host.gpus' is not a list of strings")
    for key in _TOOLCHAIN_KEYS:
        value = data["toolchain"].get(key, None)
        if value is not None and not isinstance(value, str):
            problems.append(f"'toolchain.{key}' is not a string or null")
    if "enforced" in data:
        enforced = data["enforced"]
        if not (
            isinstance(enforced, dict)
            and str_list(enforced.get("dropped"))
            and isinstance(enforced.get("left_whole"), list)
        ):
            problems.append("'enforced' needs a 'dropped' list and a 'left_whole' list")
    return problems


def stamp_bytes(stamp: Mapping[str, Any]) -> bytes:
    """The stamp as written into a wheel: indented JSON, UTF-8, a final newline."""
    return (json.dumps(stamp, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


# --------------------------------------------------------------------------- writing


def rewrite_wheel(
    wheel_path: str | os.PathLike[str],
    *,
    stamp: Mapping[str, Any] | None,
    new_version: str | None = None,
    extra_files: Mapping[str, bytes] | None = None,
    patch_files: Mapping[str, Callable[[bytes], bytes]] | None = None,
) -> Path:
    """Rewrite a wheel in place: stamp, optional new version, added and patched files, RECORD.

    - ``stamp``: written as ``.dist-info/rocm_build.json`` (replacing one already there);
      None keeps whatever stamp the wheel has.
    - ``new_version``: renames the ``.dist-info`` (and ``.data``) directory, sets METADATA
      ``Version:`` and renames the file; the old file is removed only after the new one exists.
    - ``extra_files``: archive path -> bytes; replaces a member of that name in place, or adds
      it before the ``.data``/``.dist-info`` members. Paths under the wheel's ``.dist-info``
      use its current name and follow the rename.
    - ``patch_files``: archive path -> function(old bytes) -> new bytes.

    Unchanged members are copied compressed as they are (inflated on the side to hash them and
    check their CRC), so a large extension module is not recompressed. Every member keeps its
    order, compression, date and external attributes (file mode); new members get mode 0644,
    deflate, and the date of the old RECORD (reproducible output). RECORD is rebuilt from
    the bytes written (sha256, urlsafe base64 without padding, size); signature files
    (RECORD.jws, RECORD.p7s) are dropped since they no longer match. The new wheel is written
    to a temporary file in the same folder and moved over with ``os.replace``: if this is
    interrupted the original is untouched, and a leftover temporary file is removed by the
    next rewrite in that folder. Returns the path of the rewritten wheel.
    """
    return rewrite_members(
        wheel_path,
        dist_info_files=None if stamp is None else {STAMP_NAME: stamp_bytes(stamp)},
        new_version=new_version,
        extra_files=extra_files,
        patch_files=patch_files,
    )


# --------------------------------------------------------------------------- reading


def read_stamp(wheel_path: str | os.PathLike[str]) -> Stamp | None:
    """The wheel's stamp, or None when it has none (a wheel not built through the shim).

    Raises WheelError for an unreadable wheel, a stamp that is not JSON, a stamp written by a
    newer schema version, or one whose shape is wrong.
    """
    path = Path(wheel_path)
    zf = open_wheel(path)
    try:
        with zf:
            names = zf.namelist()
            if len(names) > MAX_MEMBERS:
                raise WheelError(f"{path.name} has {len(names)} members, more than {MAX_MEMBERS}")
            dist_info = dist_info_dir(names, path.name)
            name = f"{dist_info}/{STAMP_NAME}"
            if name not in names:
                return None
            try:
                raw = read_named(zf, name, MAX_STAMP, "the stamp")
            except WheelError as exc:
                raise WheelError(
                    f"cannot read the stamp of {path.name}: {exc.message}",
                    hint="rebuild the wheel through rocm-build-backend",
                ) from None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise WheelError(f"cannot read the stamp of {path.name}: {exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WheelError(
            f"the stamp {name} in {path.name} is not valid JSON ({exc})",
            hint="rebuild the wheel through rocm-build-backend",
        ) from None
    if isinstance(data, dict) and type(data.get("schema_version")) is int and data["schema_version"] > SCHEMA_VERSION:
        raise WheelError(
            f"the stamp in {path.name} has schema version {data['schema_version']}; "
            f"this rocm-build-backend reads version {SCHEMA_VERSION}",
            hint="upgrade rocm-build-backend",
        )
    problems = stamp_problems(data)
    if problems:
        raise WheelError(
            f"the stamp {name} in {path.name} is not a valid rocm-build-backend stamp: " + "; ".join(problems),
            hint="rebuild the wheel through rocm-build-backend",
        )
    return cast(Stamp, data)  # stamp_problems found an object of the right shape


def stamp_targets(stamp: Mapping[str, Any]) -> list[str]:
    """The targets a stamp says the wheel was built for (requested)."""
    return list(stamp.get("requested", {}).get("targets", []))
