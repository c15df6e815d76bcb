"""The audit's report model: ``FileReport`` per file, ``AuditReport`` for a run, and both as
plain JSON data.

It holds no reader, does no I/O and writes no text (``cli/render.py`` lays it out for people);
the readers fill it, ``verify`` judges it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from rocm_build_backend.binary.container import Container
from rocm_build_backend.errors import CANNOT_TELL, OK
from rocm_build_backend.gpu.targets import GpuTarget, sort_targets

MAX_PROBLEMS = 100  # problems kept per file and per container
SCHEMA_VERSION = 1  # of AuditReport.to_json; bump on an incompatible change

# what targets.sort_targets can order; anything else a damaged file names is listed last
_SORTABLE = re.compile(r"gfx[0-9]+[0-9a-f]{2}|gfx[0-9]+(?:-[0-9]+)?-generic|(?:sm|compute)_[0-9]+[af]?")


def target_obj(text: str) -> GpuTarget | None:
    processor, *features = text.split(":")
    values: dict[str, str] = {}
    for feat in features:
        name, sign = feat[:-1], feat[-1:]
        if name not in ("sramecc", "xnack") or sign not in "+-" or not sign or name in values:
            return None
        values[name] = sign
    if not processor:
        return None
    return GpuTarget(processor, sramecc=values.get("sramecc"), xnack=values.get("xnack"))


def sorted_targets(targets: Iterable[str]) -> list[str]:
    """Target strings in the order ``targets.sort_targets`` uses; odd ones last."""
    known: dict[GpuTarget, str] = {}
    odd: set[str] = set()
    for text in set(targets):
        t = target_obj(text)
        if t is not None and str(t) == text and _SORTABLE.fullmatch(t.processor):
            known[t] = text
        else:
            odd.add(text)
    return [known[t] for t in sort_targets(known)] + sorted(odd)


def _module_sets(containers: Iterable[Container]) -> list[set[str]]:
    """One target set per module: a container, or all OffloadBinary images of one section
    (one translation unit built for several targets)."""
    out: list[set[str]] = []
    grouped: dict[str, set[str]] = {}
    for c in containers:
        if c.kind == "offload-binary":
            if c.where not in grouped:
                grouped[c.where] = set()
                out.append(grouped[c.where])
            grouped[c.where].update(c.targets)
        else:
            out.append(set(c.targets))
    return out


def units(containers: Sequence[Container]) -> list[set[str]]:
    """Target sets that must each cover a target for it to reach every kernel.

    A container with no kernels (nvcc device-link stub) does not count, unless no container
    has kernels.
    """
    read = [c for c in containers if c.read]
    return _module_sets([c for c in read if c.kernels] or read)


ModuleList = list[tuple[tuple[str, ...], int]]  # (targets, how many modules have them)


def modules(containers: Sequence[Container], *, read: bool = True) -> ModuleList:
    """The distinct target sets of the kernel modules (containers that were read and hold
    kernels), each with how many modules have it, most common first. Device-link stubs
    without kernels are left out: nothing in them can be launched. Empty when no module that
    was read holds kernels. ``read=False``: the same for the containers that could not be read
    (kernels or stub unknown; their targets as far as they were read)."""
    picked = [c for c in containers if ((c.read and c.kernels) if read else not c.read)]
    raw: dict[frozenset[str], int] = {}  # counted by target set first: sorting once per set
    for targets in _module_sets(picked):
        key = frozenset(targets)
        raw[key] = raw.get(key, 0) + 1
    counts = {tuple(sorted_targets(k)): n for k, n in raw.items()}
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def kept(problems: list[str], dropped: int = 0) -> list[str]:
    """At most ``MAX_PROBLEMS`` problems, the last one saying how many more there were
    (``dropped``: problems a container counted without keeping)."""
    if len(problems) + (1 if dropped else 0) <= MAX_PROBLEMS:
        return list(problems) + ([f"too many problems: {dropped} more not listed"] if dropped else [])
    more = len(problems) - MAX_PROBLEMS + 1 + dropped
    return list(problems[: MAX_PROBLEMS - 1]) + [f"too many problems: {more} more not listed"]


@dataclass
class FileReport:
    """One file's device code. ``path`` is the file, or the member inside ``archive``."""

    path: str
    containers: list[Container] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    complete: list[str] = field(default_factory=list)
    modules: ModuleList = field(default_factory=list)
    unread: ModuleList = field(default_factory=list)  # containers that could not be read
    problems: list[str] = field(default_factory=list)
    readable: bool = True
    kind: str = "other"  # elf, code-object, cubin, bundle, ccob, fatbin, offload-binary, other
    archive: str = ""
    size: int = 0

    @property
    def has_device_code(self) -> bool:
        return bool(self.containers)

    @property
    def fully_read(self) -> bool:
        return self.readable and all(c.read for c in self.containers)

    @property
    def label(self) -> str:
        return self.path

    def finish(self) -> "FileReport":
        found = dict.fromkeys(self.problems)  # ordered and de-duplicated in linear time
        more = 0
        for c in self.containers:
            for p in c.problems:
                found.setdefault(p if p.startswith(c.where) or c.where == "file" else f"{c.where}: {p}")
            more += getattr(c.problems, "more", 0)
            c.problems = kept(c.problems, getattr(c.problems, "more", 0))
        self.problems = kept(list(found), more)
        # In a linked library, __nv_relfatbin keeps the relocatable cubins for later device
        # linking; the runtime loads .nv_fatbin (cuobjdump lists only that). Count what loads.
        linked = any(c.where == ".nv_fatbin" for c in self.containers)
        counted = []
        for c in self.containers:
            if linked and c.where == "__nv_relfatbin":
                c.note = c.note or "relocatable code for device linking; not loaded at run time"
            else:
                counted.append(c)
        self.targets = sorted_targets(t for c in counted for t in c.targets)
        every = units(counted)
        common = set.intersection(*every) if every else set()
        self.complete = sorted_targets(common)
        self.modules = modules(counted)
        self.unread = modules(counted, read=False)
        self.readable = not self.problems
        return self

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "kind": self.kind,
            "targets": list(self.targets),
            "complete": list(self.complete),
            "problems": list(self.problems),
            "readable": self.readable,
            "containers": [c.to_json() for c in self.containers],
        }
        if self.archive:
            out["archive"] = self.archive
        return out


@dataclass
class AuditReport:
    files: list[FileReport] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    source: str = ""  # what was audited: a wheel's path, or paths joined
    skipped: int = 0  # files that hold nothing a GPU reads (Python, text, data): not listed

    @property
    def ok(self) -> bool:
        """True when every file was read completely (no damage, no unread container)."""
        return not self.problems and all(f.fully_read for f in self.files)

    @property
    def exit_code(self) -> int:
        """The ``audit`` command's exit status: 0 when every file was read completely, else
        3 (cannot tell what a damaged, cut or unread file holds). An audit says what is
        there; it has no "no" (1)."""
        return OK if self.ok else CANNOT_TELL

    @property
    def device_files(self) -> list[FileReport]:
        return [f for f in self.files if f.has_device_code]

    def finish(self) -> "AuditReport":
        self.targets = sorted_targets(t for f in self.files for t in f.targets)
        return self

    def to_json(self) -> dict[str, Any]:
        """The ``audit --json`` document (``data/schemas/audit.schema.json``)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "files": [f.to_json() for f in self.files],
            "targets": list(self.targets),
            "problems": list(self.problems),
            "ok": self.ok,
            "skipped": self.skipped,
        }
