"""What one ``index`` run did: ``IndexResult``, as plain data (``--json``; ``cli/render.py`` writes the text).

It holds no logic of its own beyond the exit code: 1 when a wheel (or a ``--remove`` spec) was
skipped or a requested index has nothing to serve, else 0. Paths are relative to the output
folder; ``indexes`` holds the listed wheels of each index when the run was asked for them,
``counts`` always holds how many.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1  # of the --json output: docs/json/index.md, data/schemas/index.schema.json


@dataclass
class IndexResult:
    """What ``build_index`` or ``publish`` did. Paths are relative to ``out_dir``."""

    out_dir: Path
    indexes: dict[str, list[str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    pages_written: list[str] = field(default_factory=list)
    files_written: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    read: int = 0
    reused: int = 0
    skipped: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    metadata_upload: Path | None = None
    wheels_added: list[str] = field(default_factory=list)
    wheels_removed: list[str] = field(default_factory=list)
    nothing_to_serve: list[str] = field(default_factory=list)

    @property
    def written(self) -> list[str]:
        return self.pages_written + self.files_written

    @property
    def exit_code(self) -> int:
        return 1 if self.skipped or self.nothing_to_serve else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "out_dir": str(self.out_dir),
            "indexes": {k: list(v) for k, v in self.indexes.items()},
            "pages_written": list(self.pages_written),
            "files_written": list(self.files_written),
            "unchanged": self.unchanged,
            "removed": list(self.removed),
            "wheels_read": self.read,
            "wheels_reused": self.reused,
            "wheels_added": list(self.wheels_added),
            "wheels_removed": list(self.wheels_removed),
            "skipped": dict(self.skipped),
            "nothing_to_serve": list(self.nothing_to_serve),
            "warnings": list(self.warnings),
            "metadata_upload": str(self.metadata_upload) if self.metadata_upload else None,
            "exit_code": self.exit_code,
        }
