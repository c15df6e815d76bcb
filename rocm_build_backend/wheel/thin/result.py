"""What ``thin`` reports and raises: the result of one thinned wheel and of each member, the
errors with their exit codes, and the names both the run and the member loop share.

It holds data and its JSON form only (``cli/render.py`` lays it out as text): it opens no wheel and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocm_build_backend.binary.report import sorted_targets
from rocm_build_backend.errors import DEFINITE_NO, OK, RocmBuildBackendError, TargetMismatchError, WheelError

SIGNATURES = ("RECORD.jws", "RECORD.p7s")
STAMP_NAME = "rocm_build.json"
COMPRESS_LEVEL = 6


class ThinInputError(RocmBuildBackendError):
    """A wheel ``thin`` does not take: signed, without device code, or unusual."""

    exit_code = 2


class NoCodeForTarget(TargetMismatchError):
    """The wheel holds no device code that loads on a requested target."""

    exit_code = 1


class DamagedWheel(WheelError):
    """A member, or a binary inside one, is damaged."""

    exit_code = 3


@dataclass
class MemberResult:
    name: str
    action: str  # unchanged, thinned, dropped, kept-whole
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    reason: str = ""
    size_before: int = 0
    size_after: int = 0
    layout: str = ""  # a thinned library: "compacted" or "in place"
    layout_reason: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.name,
            "action": self.action,
            "kept": _sorted(self.kept),
            "dropped": _sorted(self.dropped),
            "size_before": self.size_before,
            "size_after": self.size_after,
        }
        if self.reason:
            out["reason"] = self.reason
        if self.layout:
            out["layout"] = self.layout
        if self.layout_reason:
            out["layout_reason"] = self.layout_reason
        return out


@dataclass
class ThinResult:
    source: Path
    output: Path
    targets: list[str]
    members: list[MemberResult] = field(default_factory=list)
    wheel_before: int = 0
    wheel_after: int = 0
    installed_before: int = 0
    installed_after: int = 0
    had: list[str] = field(default_factory=list)  # every device target the source held
    sha256: str = ""
    missing: list[str] = field(default_factory=list)  # requested targets the new wheel has no code for

    @property
    def kept_whole(self) -> list[MemberResult]:
        return [m for m in self.members if m.action == "kept-whole"]

    @property
    def exit_code(self) -> int:
        """0 when the new wheel holds only code that loads on the targets, and code for each;
        1 (a definite no) when a file was kept whole or a target has no code in it."""
        return DEFINITE_NO if self.kept_whole or self.missing else OK

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "source": str(self.source),
            "output": str(self.output),
            "targets": list(self.targets),
            "source_targets": _sorted(self.had),
            "source_sha256": self.sha256,
            "wheel_size": {"before": self.wheel_before, "after": self.wheel_after},
            "installed_size": {"before": self.installed_before, "after": self.installed_after},
            "files": [m.to_json() for m in self.members],
            "missing_targets": list(self.missing),
            "exit_code": self.exit_code,
        }


def _sorted(targets: list[str]) -> list[str]:
    return sorted_targets(targets)
