"""What ``install`` decided, per distribution (``Row``) and in all (``InstallResult``): the rows as
JSON data, the exit code, and the line of a tool's output that says what went wrong.

Pure: it runs nothing, reads no file and writes no text (``cli/render.py`` lays out the table).
"""

from __future__ import annotations

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

    def to_json(self) -> dict[str, Any]:
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

    def to_json(self) -> dict[str, Any]:
        """The ``install --json`` document."""
        return {"schema_version": SCHEMA_VERSION, "devices": list(self.devices), "notes": list(self.notes),
                "distributions": [r.to_json() for r in self.rows], "dry_run": self.dry_run,
                "installed": self.installed, "exit_code": self.exit_code}


def _last_error(proc: "subprocess.CompletedProcess[str]") -> str:
    """The line of a tool's output that says what went wrong (its last error line, else its last line)."""
    lines = [ln.strip() for ln in ((proc.stdout or "") + "\n" + (proc.stderr or "")).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.lower().startswith(("error", "×", "cause:"))]
    return (errors or lines or ["no output"])[-1]
