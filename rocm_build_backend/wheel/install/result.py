"""What ``install`` decided, per distribution (``Row``) and in all (``InstallResult``): the rows as
JSON data, the exit code, and the line of a tool's output that says what went wrong.

Pure: it runs nothing, reads no file and writes no text (``cli/render.py`` lays out the table).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rocm_build_backend.errors import CANNOT_TELL, DEFINITE_NO

Runner = Callable[..., "subprocess.CompletedProcess[str]"]
SCHEMA_VERSION = 1  # of InstallResult.to_json: docs/json/install.md, data/schemas/install.schema.json


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
    build_lines: list[str] = field(default_factory=list)  # the shim's error/hint lines of a failed rebuild
    installed: str | None = None  # what was read back from the environment after the install
    kept: str | None = None  # what the installer left in place instead (before the reinstall)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "wheel": self.wheel.name,
            "origin": self.origin,
            "targets": list(self.targets),
            "status": self.status,
            "reason": self.reason,
            "refused": self.refused,
            "build_lines": list(self.build_lines),
            "replaced": None if self.was is None else {"origin": self.was_origin, "targets": self.was},
            "installed_as": self.installed,
            "kept": self.kept,
        }


@dataclass
class InstallResult:
    rows: list[Row]
    devices: list[str]
    notes: list[str] = field(default_factory=list)
    installed: bool = False
    dry_run: bool = False
    tool: str = "pip"
    where: list[str] = field(default_factory=list)  # the folders read back after the install
    unloaded: list[str] = field(default_factory=list)  # installed, and what is installed does not load

    @property
    def exit_code(self) -> int:
        if self.unloaded or any(r.refused and r.status == "fails" for r in self.rows):
            return DEFINITE_NO
        if any(r.refused for r in self.rows):
            return CANNOT_TELL
        return 0

    def to_json(self) -> dict[str, Any]:
        """The ``install --json`` document."""
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": self.tool,
            "devices": list(self.devices),
            "notes": list(self.notes),
            "distributions": [r.to_json() for r in self.rows],
            "dry_run": self.dry_run,
            "installed": self.installed,
            "read_back_from": list(self.where),
            "unloaded": list(self.unloaded),
            "exit_code": self.exit_code,
        }


_SHIM_LINE = re.compile(r"rocm-build-backend: ((?:error|hint): .*)$")


def shim_lines(text: str) -> list[str]:
    """The shim's own ``error:``/``hint:`` lines in a frontend's output (pip and uv indent and
    prefix a build's output), each once, in order."""
    out: list[str] = []
    for line in text.splitlines():
        m = _SHIM_LINE.search(line.rstrip())
        if m and m.group(1) not in out:
            out.append(m.group(1))
    return out


def last_error(proc: "subprocess.CompletedProcess[str]") -> str:
    """The line of a tool's output that says what went wrong (its last error line, else its last line).

    Only quoted in a message, never decided on: the tool's exit status decides."""
    lines = [ln.strip() for ln in ((proc.stdout or "") + "\n" + (proc.stderr or "")).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.lower().startswith(("error", "×", "cause:"))]
    return (errors or lines or ["no output"])[-1]
