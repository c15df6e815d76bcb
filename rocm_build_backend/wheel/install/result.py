"""What ``install`` decided, per distribution (``Row``) and in all (``InstallResult``): the table,
the exit code, and the line of a tool's output that says what went wrong.

Pure: it runs nothing and reads no file.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rocm_build_backend.errors import CANNOT_TELL, DEFINITE_NO

Runner = Callable[..., "subprocess.CompletedProcess[str]"]

_WHERE = {"cache": "from pip's wheel cache", "index": "from the index", "built": "built in this run",
          "cache/index": "from uv's cache or the index"}


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
                lines += [f"  {line}" for line in r.build_lines]
            if r.kept:
                lines.append(f"{r.name}: {self.tool} kept the installed {r.kept}, which does not load here; "
                             "installed again")
        if self.dry_run:
            lines.append("dry run: nothing installed")
        elif self.installed:
            lines += self._read_back()
        else:
            lines.append("nothing installed: " + ("a wheel was refused" if self.exit_code else "no wheels"))
        return "\n".join(lines)


    def _read_back(self) -> list[str]:
        n = f"{len(self.rows)} wheel{'s' if len(self.rows) != 1 else ''}"
        lines = [f"read back from {', '.join(self.where)}:"] if self.where else []
        for r in self.rows:
            if r.installed is not None:
                lines.append(f"  {r.name} {r.installed}" + (": does not load here" if r.name in self.unloaded else ""))
        if self.unloaded:
            return lines + [f"installed {n}, but {', '.join(self.unloaded)} as installed does not load here"]
        return lines + [f"installed {n}; what is installed loads here"]


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


def _last_error(proc: "subprocess.CompletedProcess[str]") -> str:
    """The line of a tool's output that says what went wrong (its last error line, else its last line)."""
    lines = [ln.strip() for ln in ((proc.stdout or "") + "\n" + (proc.stderr or "")).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.lower().startswith(("error", "×", "cause:"))]
    return (errors or lines or ["no output"])[-1]
