"""What ``cache list`` and ``cache purge`` found and did: one entry per cached wheel, one report.

``CacheEntry`` is a cached wheel (where, what it holds, its verdict, what purging removes and
what happened); ``CacheReport`` gathers them with the caches read, as JSON data and an exit
code (0 when no misfit is left, 1 when some is). It reads and removes nothing itself and writes
no text (``cli/render.py`` does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


SCHEMA_VERSION = 1  # of the --json output: docs/json/cache.md, data/schemas/cache.schema.json


@dataclass
class CacheEntry:
    """One cached wheel: where it is, what it holds, what purging it removes."""

    tool: str  # "pip" | "uv"
    cache_dir: Path
    path: Path  # the .whl file, or the unpacked wheel folder (uv's archive-v0/<id>)
    label: str  # the wheel's file name, or name-version for an unpacked wheel
    status: str = "unknown"  # ok | fails | unknown (check's verdicts over every target)
    targets: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    remove: list[Path] = field(default_factory=list)  # in the order purging removes them
    action: str | None = None  # None, "would remove", "removed", "not removed"
    errors: list[str] = field(default_factory=list)

    @property
    def misfits(self) -> bool:
        return self.status == "fails"

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "cache_dir": str(self.cache_dir),
            "path": str(self.path),
            "wheel": self.label,
            "status": self.status,
            "targets": list(self.targets),
            "reasons": list(self.reasons),
            "remove": [str(p) for p in self.remove],
            "action": self.action,
            "errors": list(self.errors),
        }


@dataclass
class CacheReport:
    targets: list[str]
    caches: list[tuple[str, Path, str]] = field(default_factory=list)  # (tool, dir, summary)
    sources: list[str] = field(default_factory=list)  # what named each cache folder, in the same order
    entries: list[CacheEntry] = field(default_factory=list)
    purge: bool = False
    yes: bool = False
    notes: list[str] = field(default_factory=list)
    purge_args: list[str] = field(default_factory=list)  # the list's own options, repeated in the purge hint

    @property
    def misfits(self) -> list[CacheEntry]:
        return [e for e in self.entries if e.misfits]

    @property
    def exit_code(self) -> int:
        """0 when no misfit is left in the caches, 1 when some is (found, kept, or not removable)."""
        return 1 if any(e.misfits and e.action != "removed" for e in self.entries) else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "targets": list(self.targets),
            "caches": [
                {"tool": t, "path": str(p), "summary": s, "source": src}
                for (t, p, s), src in zip(self.caches, self.sources)
            ],
            "mode": ("purge" if self.yes else "purge (dry run)") if self.purge else "list",
            "entries": [e.to_json() for e in self.entries],
            "notes": list(self.notes),
            "exit_code": self.exit_code,
        }
