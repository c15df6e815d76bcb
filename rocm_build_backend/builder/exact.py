"""With enforcement on, the wheel's device code holds the plan's targets and nothing beyond them.

Enforcement's programs cut every compile they see; a compile they do not see (a compiler called by
a path of its own, an option they could not read) is caught here, after the build, from what the
binaries really hold. A target found in a file is the plan's when the plan chose it, or when it is
a feature variant of a target the plan chose without features (``gfx90a:xnack-`` for ``gfx90a``;
NVIDIA's ``sm_90a`` counts only when the plan chose ``sm_90a``, and PTX only when the plan has it).
A file holding more is explained, listed and allowed, when

- every extra target is one that compiles the enforcement record says were left whole on purpose
  listed (a file built for one architecture, ``left whole``), or
- the file is prebuilt: its bytes equal a file of the project's source tree that is older than the
  build (a library the project ships and copies into its wheel as it is; build folders and files
  written during the build do not count, so nothing the build compiled passes as prebuilt);

any other is ``unexplained`` and fails the build (``verify = "warn"``: a warning). ``beyond`` is
pure; ``prebuilt_members`` reads the wheel and the source tree (bounded).
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from rocm_build_backend.binary.report import AuditReport, target_obj
from rocm_build_backend.gpu.targets import GpuTarget

NOT_SOURCES = frozenset(
    {".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__", "build", "dist", "_skbuild"}
)
_WALK_LIMIT = 100_000  # entries of the source tree looked at for prebuilt files
_HASH_LIMIT = 1 << 30  # bytes hashed in all


@dataclass
class Beyond:
    """A file whose device code holds targets beyond the plan's, and why (``left whole``,
    ``prebuilt``, or ``""``: unexplained)."""

    path: str
    extra: list[str]
    why: str = ""

    def line(self, planned: str) -> str:
        found = " ".join(self.extra)
        if self.why == "left whole":
            return f"{self.path} holds {found} beyond {planned}: built by compiles left whole on purpose (allowed)"
        if self.why == "prebuilt":
            return f"{self.path} holds {found} beyond {planned}: a prebuilt file copied from the sources (allowed)"
        return f"{self.path} holds {found} beyond the targets {planned}"


def chosen(target: str, planned: Sequence[GpuTarget]) -> bool:
    """Whether a target found in a file is one the plan chose (or a feature variant of one)."""
    found = target_obj(target)
    if found is None:
        return False
    for p in planned:
        if found.processor != p.processor:
            continue
        if (p.sramecc is None or p.sramecc == found.sramecc) and (p.xnack is None or p.xnack == found.xnack):
            return True
    return False


def beyond(
    report: AuditReport, planned: Sequence[GpuTarget], whole: Iterable[str], prebuilt: Iterable[str] = ()
) -> list[Beyond]:
    """Every file holding targets the plan did not choose, with why it is allowed (pure)."""
    left_whole, copied = set(whole), set(prebuilt)
    out: list[Beyond] = []
    for f in report.files:
        extra = [t for t in f.targets if not chosen(t, planned)]
        if not extra:
            continue
        why = "prebuilt" if f.path in copied else "left whole" if all(t in left_whole for t in extra) else ""
        out.append(Beyond(f.path, extra, why))
    return out


def _member_digests(wheel: Path, members: Iterable[str]) -> dict[int, dict[str, str]]:
    """size -> {sha256: member} for the wheel members named."""
    out: dict[int, dict[str, str]] = {}
    budget = _HASH_LIMIT
    with zipfile.ZipFile(wheel) as zf:
        for name in members:
            try:
                info = zf.getinfo(name)
            except KeyError:
                continue
            budget -= info.file_size
            if budget < 0:
                break
            digest = hashlib.sha256()
            with zf.open(info) as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
            out.setdefault(info.file_size, {})[digest.hexdigest()] = name
    return out


def _file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def prebuilt_members(wheel: Path, members: Iterable[str], source_dir: Path, since: float) -> set[str]:
    """The wheel members whose bytes equal a regular file of ``source_dir`` last written before
    ``since`` (the build's start), outside build folders; bounded walk, links not followed."""
    try:
        wanted = _member_digests(wheel, members)
    except (OSError, zipfile.BadZipFile):
        return set()
    found: set[str] = set()
    seen = 0
    budget = _HASH_LIMIT
    for root, dirs, names in os.walk(source_dir):
        dirs[:] = sorted(d for d in dirs if d not in NOT_SOURCES and not d.endswith(".egg-info"))
        for name in names:
            seen += 1
            if seen > _WALK_LIMIT or budget < 0:
                return found
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
                if not os.path.isfile(path) or os.path.islink(path) or st.st_size not in wanted:
                    continue
                if st.st_mtime >= since:
                    continue
                budget -= st.st_size
                member = wanted[st.st_size].get(_file_digest(path))
            except OSError:
                continue
            if member is not None:
                found.add(member)
    return found


def to_stamp(found: Sequence[Beyond]) -> dict[str, Any]:
    """The stamp's ``enforced.exact``: whether nothing unexplained was found, and each file beyond."""
    return {
        "ok": all(b.why for b in found),
        "files": {b.path: {"extra": list(b.extra), "why": b.why or "unexplained"} for b in found},
    }
