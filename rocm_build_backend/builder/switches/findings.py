"""What a reading of a project's build files gives: ``Finding`` (one switch, as its source shows
it), ``Switch`` (a finding and what the build does about it) and ``Budget`` (what is left to
read). Plain data; reads a file only in ``Budget.read``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from rocm_build_backend.files import read_regular

MAX_FILE = 1 << 20  # bytes read of one build file
MAX_FILES = 64  # CMake files followed through include() and add_subdirectory()
MAX_TOTAL = 8 << 20  # bytes read in all
MAX_FINDINGS = 200  # switches listed; the rest are counted


class Finding(NamedTuple):
    """One switch of the project's own, as its source shows it."""

    file: str  # relative to the project's folder
    line: int
    kind: str  # env | cmake-option | cmake-env | skbuild-define | cuda-guard | download | hard-coded
    name: str  # the variable or option; the call for a guard or a download
    role: str  # gpu-on | gpu-off | targets | prebuilt | jobs | flags | guard | hard-coded
    value: str | None = None  # what turns GPU code on (a switch); the targets named (hard-coded)
    default: str | None = None  # the project's default, when the source gives one
    choices: tuple[str, ...] = ()  # the values the source compares it with
    vendor: str | None = None  # a vendor registry name, when the name is for that vendor only
    text: str = ""  # the source line, trimmed
    gates: tuple[str, ...] = ()  # the vendors whose GPU build turning it on adds (read from what it gates)
    evidence: str = ""  # what it gates, with file and line ("enable_language(CUDA) at CMakeLists.txt L40")
    left_off: str = ""  # why it must never be applied (vendored code, another API), else ""
    fallback: bool = False  # a target list used only when the variable is not set

    @property
    def where(self) -> str:
        return f"{self.file} L{self.line}"


class Switch(NamedTuple):
    """A finding and what the build does about it."""

    finding: Finding
    action: str  # set | kept | todo | enforced | warn | info
    detail: str  # in words, for the plan
    todo: str | None = None  # what the user should give, exactly (``FORCE_CUDA=1``, ``-C cmake.define.X=ON``)
    applied: str | None = None  # what the build gives to turn it on (``-C cmake.define.X=ON``, ``FORCE_CUDA=1``)

    def to_json(self) -> dict[str, Any]:
        f = self.finding
        return {
            "file": f.file,
            "line": f.line,
            "kind": f.kind,
            "name": f.name,
            "role": f.role,
            "value": f.value,
            "default": f.default,
            "action": self.action,
            "detail": self.detail,
            "todo": self.todo,
            "applied": self.applied,
            "gates": list(f.gates),
            "evidence": f.evidence or None,
        }

    def line(self) -> str:
        f = self.finding
        return f"switch {f.where} {f.name} ({f.role}): {self.detail}"


def first_lines(lines: list[str], *, lower: bool) -> dict[str, int]:
    """key -> the first line (from 1) of ``key = ...`` (``key: ...``) in a TOML or INI text, in one pass."""
    out: dict[str, int] = {}
    for n, line in enumerate(lines, 1):
        for sep in ("=", ":"):
            key, found, _ = line.partition(sep)
            key = key.strip().strip('"')
            if found and key:
                out.setdefault(key.lower() if lower else key, n)
    return out


def bounded(findings: list[Finding], cap: int = MAX_FINDINGS) -> list[Finding]:
    """``findings`` without repeats (the same switch, value and text in the same file), at most
    ``cap`` of them; when more were found, a last ``more`` finding counts the rest."""
    seen: set[tuple[Any, ...]] = set()
    kept: list[Finding] = []
    extra = 0
    for f in findings:
        key = (f.file, f.kind, f.name, f.value, f.default, f.text)
        if key in seen:
            continue
        seen.add(key)
        if len(kept) < cap:
            kept.append(f)
        else:
            extra += 1
    if extra:
        kept.append(
            Finding(
                kept[-1].file,
                0,
                "more",
                f"{extra} more",
                "more",
                str(extra),
                text=f"{extra} more switches found; only the first {cap} are listed",
            )
        )
    return kept


@dataclass
class Budget:
    """What is left to read."""

    files: int = MAX_FILES
    total: int = MAX_TOTAL
    notes: list[str] = field(default_factory=list)
    root: Path | None = None  # the project's folder (resolved): nothing outside it is read

    def read(self, path: Path) -> str | None:
        """The file's text (its first MAX_FILE bytes), or None when it is not a regular file inside
        the project's folder (a FIFO, a device, a link out of the tree) or the budget is spent.
        Opening never blocks (``files.read_regular``)."""
        if self.files <= 0 or self.total <= 0:
            if not self.notes:
                self.notes.append(f"stopped reading build files at {path.name}: read budget spent")
            return None
        try:
            if self.root is not None:
                path.resolve().relative_to(self.root)
            data = read_regular(path, min(MAX_FILE, self.total), head=True)
        except (OSError, ValueError, RuntimeError):
            return None
        self.files -= 1
        self.total -= len(data)
        return data.decode("utf-8", "replace")
