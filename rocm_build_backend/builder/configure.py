"""``configure``: make a project's ``pyproject.toml`` build through the shim.

Edits ``pyproject.toml`` with tomlkit (comments and layout stay), then re-reads the result with
tomllib and refuses, writing nothing, unless it parses and only ``[build-system]`` and
``[tool.rocm-build-backend]`` changed. The file is read as a regular file only (a folder, a FIFO,
a symlink to ``/dev/zero`` are refused, never replaced), at most 1 MiB, nesting bounded by
the parser's recursion (too deep: one error); it is replaced in one rename, with its mode, and
only while it still holds what was read (``files.replace_if_unchanged``). A command, never
imported by the build hooks: tomlkit is imported inside it. Builds nothing.
"""

from __future__ import annotations

import difflib
import errno
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from tomlkit.items import InlineTable

from rocm_build_backend._version import __version__
from rocm_build_backend.builder.needs import missing
from rocm_build_backend.builder.project import LEGACY, SHIM
from rocm_build_backend.errors import CANNOT_TELL, ConfigError, RocmBuildBackendError
from rocm_build_backend.files import kind_of, read_regular, replace_if_unchanged

REQUIREMENT = "rocm-build-backend"
PIN = f"{REQUIREMENT}=={__version__}"  # what configure adds: this exact version, never a later upload
HASH_NOTE = (
    f"{PIN} is pinned; to check its hash too, build with `uv build --build-constraints FILE "
    f"--require-hashes` (or PIP_BUILD_CONSTRAINT=FILE), FILE holding `{PIN} --hash=sha256:...` and "
    "every other build requirement with its hashes (docs/how-to/declare-safely.md)"
)
SCHEMA_VERSION = 1  # of Configured.to_json


class UnreadableFileError(RocmBuildBackendError):
    """A project file that exists but cannot be read: we cannot tell what it declares."""

    exit_code = CANNOT_TELL


MAX_PYPROJECT_BYTES = 1 << 20  # a pyproject.toml is a few KiB; refuse anything absurd
_TABLE = "rocm-build-backend"


@dataclass(frozen=True)
class Configured:
    """What ``configure`` did (or, with ``write=False``, would do) to one file."""

    file: Path
    changed: bool
    message: str
    before: str  # "" when the file did not exist
    after: str
    written: bool = False  # False with write=False, or when nothing changed
    wrapped: str | None = None  # the backend the shim now wraps; None when it already built through it
    added: tuple[str, ...] = ()  # requirements added to [build-system] requires
    notes: tuple[str, ...] = ()  # what to know: the pin, what an isolated build will lack

    def to_json(self) -> dict[str, Any]:
        """``configure --json``: schema ``data/schemas/configure.schema.json``, docs/json/configure.md."""
        return {
            "schema_version": SCHEMA_VERSION,
            "file": str(self.file),
            "changed": self.changed,
            "written": self.written,
            "wrapped": self.wrapped,
            "message": self.message,
            "diff": self.diff(),
            "requires_added": list(self.added),
            "notes": list(self.notes),
        }

    def diff(self) -> str:
        """A unified diff of the change ("" when nothing changes)."""
        name = self.file.name
        return "".join(
            difflib.unified_diff(
                _diff_lines(self.before),
                _diff_lines(self.after),
                fromfile=f"a/{name}" if self.before else "/dev/null",
                tofile=f"b/{name}",
            )
        )


def _diff_lines(text: str) -> list[str]:
    """Lines for a unified diff; a last line without a newline is marked the way git and patch expect."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def _read_text(file: Path) -> str:
    try:
        raw = read_regular(file, MAX_PYPROJECT_BYTES)
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise ConfigError(
                [f"{file} is too large ({MAX_PYPROJECT_BYTES} bytes at most)"],
                hint="give the pyproject.toml of a Python project",
            ) from None
        raise UnreadableFileError(f"cannot read {file}: {exc.strerror}", hint="check the file's permissions") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [f"{file} is not UTF-8 (byte {exc.start})"], hint="TOML files are UTF-8; fix the file"
        ) from None


def _parse(text: str, file: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            [f"cannot read {file}: {exc}"], hint="fix the TOML syntax, then run configure again"
        ) from None
    except RecursionError:
        raise ConfigError(
            [f"cannot read {file}: its arrays or tables are nested too deeply"],
            hint="a pyproject.toml nests a few levels; fix the file",
        ) from None
    return data


def _has_requirement(requires: list[Any]) -> bool:
    return _ours(requires) is not None


def _ours(requires: list[Any]) -> Requirement | None:
    """The requirement on this package in ``requires``, if any."""
    for item in requires:
        if not isinstance(item, str):
            continue
        try:
            name = Requirement(item).name
        except InvalidRequirement:
            continue
        if canonicalize_name(name) == REQUIREMENT:
            return Requirement(item)
    return None


def _expected(before: dict[str, Any], extra: list[str]) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The [build-system] and [tool.rocm-build-backend] the edit must produce, and the wrapped backend."""
    system = dict(before.get("build-system") or {})
    ours = dict((before.get("tool") or {}).get(_TABLE) or {})
    declared = system.get("build-backend")
    wrapped = declared if isinstance(declared, str) else LEGACY
    if "backend" in ours and ours["backend"] != wrapped:
        raise ConfigError(
            [f"[tool.rocm-build-backend] already wraps {ours['backend']!r}, while [build-system] declares {wrapped!r}"],
            hint=f'set build-backend = "{SHIM}" in [build-system] by hand, and keep the backend you mean',
        )
    requires = system.get("requires", ["setuptools>=40.8.0"] if wrapped == LEGACY else [])
    if not isinstance(requires, list):
        raise ConfigError(["[build-system] requires is not a list"], hint='write requires = ["..."]')
    system["requires"] = [*requires, *([] if _has_requirement(requires) else [PIN]), *extra]
    system["build-backend"] = SHIM
    ours["backend"] = wrapped
    if "backend-path" in system:
        ours["backend-path"] = system.pop("backend-path")
    return system, ours, wrapped


def _edit(text: str, system: dict[str, Any], ours: dict[str, Any], extra: list[str]) -> list[str]:
    """Candidate new texts, best first: the same document with the two tables edited."""
    try:
        import tomlkit
    except ImportError:
        raise RocmBuildBackendError(
            "configure needs tomlkit, which is not installed",
            hint="pip install tomlkit (a dependency of rocm-build-backend)",
        ) from None

    doc = tomlkit.parse(text)
    table = doc.get("build-system")
    if table is not None:
        if "requires" not in table:
            table["requires"] = system["requires"]
        else:
            if not _has_requirement(list(table["requires"])):
                table["requires"].append(PIN)
            for item in extra:
                table["requires"].append(item)
        table["build-backend"] = SHIM
        if "backend-path" in table:
            del table["backend-path"]
        return [_with_ours(doc, ours)]
    new = tomlkit.table()
    new.update(system)
    fresh = tomlkit.document()
    fresh["build-system"] = new
    first = tomlkit.dumps(fresh) + "\n" + _with_ours(doc, ours)
    doc.append("build-system", new)
    # first in the file where only tables follow; else last, where no header captures root-level keys
    return [first, _with_ours(doc, ours)]


def _with_ours(doc: Any, ours: dict[str, Any]) -> str:
    """DOC's text with our table: keys added to an existing one, else a new table at the end."""
    tool = doc.get("tool")
    if tool is not None and _TABLE in tool:
        for key, value in ours.items():
            if key not in tool[_TABLE]:
                tool[_TABLE][key] = value
        return str(tomlkit.dumps(doc))
    if isinstance(tool, InlineTable):  # tool = {black = {...}}: TOML allows no [tool.x] after it
        new = tomlkit.inline_table()
        new.update(ours)
        tool[_TABLE] = new
        return str(tomlkit.dumps(doc))
    # [tool.x] tables may be spread over the file (tomlkit cannot append to those): add ours last
    table = tomlkit.table()
    table.update(ours)
    tail = tomlkit.document()
    tail.append("tool", tomlkit.table(is_super_table=True))
    tail["tool"].append(_TABLE, table)
    text = str(tomlkit.dumps(doc)).rstrip("\n")
    return (text + "\n\n" if text else "") + str(tomlkit.dumps(tail))


def _others(data: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in data.items() if k != "build-system"}
    tool = {k: v for k, v in (out.get("tool") or {}).items() if k != _TABLE}
    out.pop("tool", None)
    if tool:
        out["tool"] = tool
    return out


def _checked(before: dict[str, Any], candidates: list[str], system: dict[str, Any], ours: dict[str, Any]) -> str | None:
    """The first candidate that parses and changes nothing but our two tables."""
    for text in candidates:
        try:
            after = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError):
            continue
        if (
            _others(after) == _others(before)
            and after.get("build-system") == system
            and (after.get("tool") or {}).get(_TABLE) == ours
        ):
            return text
    return None


def _write_atomically(file: Path, text: str, before: str | None) -> None:
    """Replace FILE with TEXT in one rename, keeping its mode, only while it still holds
    BEFORE (None: while it does not exist); on any failure the file is untouched."""
    mode = None
    if before is not None:
        try:
            mode = file.stat().st_mode & 0o7777
        except OSError:
            mode = None
    replace_if_unchanged(file, text.encode("utf-8"), None if before is None else before.encode("utf-8"), mode=mode)


def _regular_or_absent(file: Path, write: bool) -> bool:
    """Whether FILE exists; ConfigError for anything that is not a regular file (a folder, a
    FIFO, a device, and, when writing, a symlink: configure replaces files, not links)."""
    try:
        st = os.lstat(file)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise UnreadableFileError(
            f"cannot read {file}: {exc.strerror}", hint="check the folder's permissions"
        ) from None
    if stat.S_ISLNK(st.st_mode) and (write or not file.is_file()):
        raise ConfigError(
            [f"{file} is a symlink ({os.readlink(file)}); configure edits only a regular file"],
            hint="edit the file it points to by hand, or replace the link by a copy",
        )
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISLNK(st.st_mode):
        raise ConfigError(
            [f"{file} is {kind_of(st.st_mode)}, not a file; it is left as it is"],
            hint="give the folder of a Python project whose pyproject.toml is a file",
        )
    return True


def _new_file(extra: list[str]) -> str:
    requires = ", ".join(f'"{r}"' for r in ["setuptools>=40.8.0", PIN, *extra])
    return (
        f'[build-system]\nrequires = [{requires}]\nbuild-backend = "{SHIM}"\n\n[tool.{_TABLE}]\nbackend = "{LEGACY}"\n'
    )


def _new_text(file: Path, before: str, extra: list[str]) -> tuple[str, str]:
    """(new text, wrapped backend) for an existing pyproject.toml; ConfigError when it cannot be done safely."""
    data = _parse(before, file)
    system, ours, wrapped = _expected(data, extra)
    crlf = "\r\n" in before
    hint = (
        f'edit it by hand: build-backend = "{SHIM}", add "{PIN}" to requires, '
        f'and backend = "{wrapped}" under [tool.rocm-build-backend]'
    )
    try:
        edited = _edit(before, system, ours, extra)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:  # a layout tomlkit cannot edit
        raise ConfigError([f"cannot edit {file} safely ({type(exc).__name__}: {exc})"], hint=hint) from None
    candidates = [text.replace("\r\n", "\n").replace("\n", "\r\n") if crlf else text for text in edited]
    after = _checked(data, candidates, system, ours)
    if after is None:
        raise ConfigError(
            [f"editing {file} would change more than [build-system] and [tool.rocm-build-backend]"], hint=hint
        )
    return after, wrapped


def _notes(requires: list[Any], added: list[str], lacking: list[str]) -> tuple[str, ...]:
    """What the user should know about the edit: the pin and its hash, what an isolated build lacks."""
    own = _ours(requires)
    notes = [HASH_NOTE] if own is None else []
    if own is not None and not any(s.operator in ("==", "===") for s in own.specifier):
        notes.append(
            f"warning: requires lists '{own}' without an exact version: a later upload of that name "
            f"would run as the build backend; write {PIN}"
        )
    if "torch" in added:
        notes.append(
            "added torch to requires (setup.py imports it): an isolated build installs the torch your index "
            "serves, which may be another GPU vendor's build; for the torch installed here, build with "
            "--no-build-isolation, or point the frontend at that torch's index"
        )
    if lacking:
        notes.append(
            f"warning: setup.py imports {', '.join(lacking)}, which requires does not list: an isolated "
            "build will lack them; add their distributions to requires, or build with --no-build-isolation"
        )
    return tuple(notes)


def configure(path: Path, *, write: bool = True) -> Configured:
    """Make PATH build through the shim, wrapping its current backend; with ``write=False`` only say how.

    A project with only setup.py gets a pyproject.toml that wraps setuptools' legacy backend. The
    shim is added as an exact pin of this version, with the build requirements ``setup.py``
    shows it needs (``torch``); ``notes`` say how to check the pin's hash and what an isolated
    build will lack.
    """
    path = path.resolve()
    file = path / "pyproject.toml"
    verb = "updated" if write else "would update"
    if not _regular_or_absent(file, write):
        if not (path / "setup.py").is_file():
            raise ConfigError([f"{path} has no pyproject.toml or setup.py"], hint="give a Python project's folder")
        extra, lacking = missing(path, ["setuptools"])
        text = _new_file(extra)
        done = Configured(
            file,
            True,
            f"{'wrote' if write else 'would write'} {file}: builds through rocm-build-backend, wrapping {LEGACY}",
            "",
            text,
            written=write,
            wrapped=LEGACY,
            added=(PIN, *extra),
            notes=_notes([], extra, lacking),
        )
        if write:
            _write_atomically(file, text, None)
        return done
    before = _read_text(file)
    data = _parse(before, file)
    if (data.get("build-system") or {}).get("build-backend") == SHIM:
        return Configured(file, False, f"{file} already builds through rocm-build-backend", before, before)
    requires = (data.get("build-system") or {}).get("requires")
    requires = list(requires) if isinstance(requires, list) else []
    extra, lacking = missing(path, requires)
    after, wrapped = _new_text(file, before, extra)
    if write:
        _write_atomically(file, after, before)
    added = ([] if _has_requirement(requires) else [PIN]) + extra
    return Configured(
        file,
        True,
        f"{verb} {file}: builds through rocm-build-backend, wrapping {wrapped}",
        before,
        after,
        written=write,
        wrapped=wrapped,
        added=tuple(added),
        notes=_notes(requires, extra, lacking),
    )
