"""Enforcement: the compiler builds exactly the chosen targets, even when a project lists its own.

Each vendor's build side says how (``BuildVendor.enforce``, a ``gpu.build.Enforcer``: clang's
``--no-offload-arch=all`` last on every HIP compile; a pinned nvcc that rewrites the target
options): ``describe`` and ``plan_env`` (pure, for the plan), ``identity``, ``contents`` and
``variables`` (the programs the build runs); a vendor without one enforces nothing. This module
holds what is the same for every vendor:

- ``enforcer``, ``plan_lines`` / ``plan_env``: the vendor's ``Enforcer``, what the plan says and
  sets (pure);
- ``install``: puts the vendor's programs in
  ``$XDG_CACHE_HOME/rocm-build-backend/enforce/<hash of their content>`` (a build tree that
  cached a compiler path finds it again on the next build with the same targets; folders unused
  for 30 days and leftovers of killed writes are removed), or the fallback folder when that one
  cannot be used (``enforcedir``: a folder found there is used, unwritten, only when it is the
  user's alone and holds exactly what the vendor's ``contents`` say, else it is written afresh
  and replaced), and returns the build's variables;
  when no folder can be used the build stops: enforcement never turns itself off;
- ``read_record``: what the programs did, from the record they append to (one JSON line per
  compile), as ``Enforced``: the log lines and the stamp's ``enforced`` object.

It names no vendor: the plan's ``vendor`` picks the build side.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from rocm_build_backend.builder.enforcedir import HINT, fallback, place, usable_base, usual
from rocm_build_backend.errors import EnforcementError
from rocm_build_backend.gpu.build import Enforcer
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.gpu.vendor import vendor_named

RECORD_VAR = "ROCM_BUILD_BACKEND_ENFORCE_RECORD"
_TARGET = r"(sm|compute)_\d+[af]?|gfx[0-9a-z]+(:[a-z]+[+-])*"  # not native, all, all-major; compiled on use
_KEEP_DAYS = 30
_RECORD_LIMIT = 4 << 20  # bytes of the record read back
_SHOWN = 8  # compiles left whole named in the log and the stamp


def enforcer(vendor: str) -> Enforcer | None:
    """The vendor's way to hold compiles to the targets; None when it has none."""
    return build_side(vendor).enforce


def plan_lines(vendor: str, targets: Sequence[str], exact: bool = True) -> list[str]:
    """What the plan says enforcement does (pure); ``[]`` for a vendor without enforcement;
    ``exact``: the audit checks that nothing beyond the targets was built (not with verify = "off")."""
    found = enforcer(vendor)
    if found is None:
        return []
    return [*found.describe(list(targets))] + ([EXACT.format(targets=" ".join(targets))] if exact else [])


EXACT = (
    "enforce: then the audit fails a wheel whose device code holds targets beyond {targets} "
    '(verify = "warn": a warning); listed and allowed: files built by compiles left whole on purpose, '
    "and prebuilt files (bytes equal to a file of the sources older than the build, outside build folders)"
)


def not_enforced(vendor: str) -> str:
    """The plan's words for a build of a vendor without enforcement."""
    named = vendor_named(vendor)
    return (
        f"enforce: {named.label if named else vendor} builds have no pinned compilers: "
        "the compiler builds the targets the project lists"
    )


def plan_env(vendor: str, targets: Sequence[str], planned: Mapping[str, str]) -> dict[str, str]:
    """The variables enforcement changes in the plan (pure)."""
    found = enforcer(vendor)
    return dict(found.plan_env(list(targets), planned)) if found is not None else {}


def uncounted(vendor: str) -> str:
    """What the vendor's programs see but do not count, for the build log."""
    found = enforcer(vendor)
    return found.uncounted if found is not None else ""


def cache_dir(env: Mapping[str, str]) -> Path:
    """The usual folder of the programs (``enforcedir.usual``); the fallback's when there is none."""
    return usual(env) or fallback(env)


def _prune(base: Path, keep: Path) -> None:
    """Folders not used for 30 days, and leftovers of writes killed more than a day ago."""
    now = time.time()
    for entry in base.iterdir():
        try:
            age = now - entry.lstat().st_mtime
        except OSError:
            continue
        old = age > 86400 if entry.name.startswith(".tmp-") else age > _KEEP_DAYS * 86400
        if entry != keep and old and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def install(
    vendor: str, targets: Sequence[str], env: Mapping[str, str], record: Path, notes: list[str] | None = None
) -> dict[str, str]:
    """Write the vendor's programs and return the build's variables, the record file's name among
    them; ``notes`` gets the log's words on folders passed over or replaced. ``EnforcementError``
    when they cannot be put in place (no safe folder, no toolkit, the vendor has none)."""
    module = enforcer(vendor)
    if module is None:
        raise EnforcementError(f"{vendor} builds have no pinned compilers", hint=HINT)
    python = os.path.realpath(sys.executable)
    names = list(targets)
    try:
        digest = hashlib.sha256(module.identity(names, env, python).encode()).hexdigest()[:16]
    except OSError as exc:
        raise EnforcementError(f"the pinned compilers cannot be written: {exc}", hint=HINT) from None
    base, passed = usable_base(env)
    final = base / f"{vendor}-{digest}"
    try:
        replaced = place(base, final, module.contents(final, names, env, python))
    except OSError as exc:
        raise EnforcementError(f"the pinned compilers cannot be written in {base}: {exc}", hint=HINT) from None
    if notes is not None:
        notes.extend(passed)
        if replaced:
            notes.append(f"enforce: replaced {final} ({replaced})")
    os.utime(final)
    _prune(base, final)
    out = dict(module.variables(final, env))
    out[RECORD_VAR] = str(record)
    return out


@dataclass
class Enforced:
    """What the pinned compilers did in one build."""

    compiles: int = 0
    rewritten: int = 0
    added: int = 0
    kept: int = 0
    dropped: set[str] = field(default_factory=set)
    whole: list[tuple[list[str], list[str]]] = field(default_factory=list)  # (sources, targets)
    whole_count: int = 0
    refused: list[str] = field(default_factory=list)  # unknown options that failed their compile
    refused_count: int = 0
    whole_targets: set[str] = field(default_factory=set)  # what every compile left whole listed

    def add(self, line: Mapping[str, Any]) -> None:
        action = line.get("action")
        listed = [str(t) for t in line.get("listed") or []]
        now = [str(t) for t in line.get("now") or []]
        self.compiles += 1
        if action == "rewritten":
            self.rewritten += 1
            self.dropped.update(t for t in listed if t not in now and re.fullmatch(_TARGET, t))
        elif action == "added":
            self.added += 1
        elif action == "kept":
            self.kept += 1
        elif action == "refused":
            self.compiles -= 1  # not compiled
            self.refused_count += 1
            if len(self.refused) < _SHOWN:
                self.refused.append(listed[0] if listed else "?")
        elif action == "whole":
            self.whole_count += 1
            self.whole_targets.update(listed)
            if len(self.whole) < _SHOWN:
                self.whole.append(([str(s) for s in line.get("sources") or []], listed))

    def lines(self, targets: Sequence[str], uncounted: str = "") -> list[str]:
        """The build log's words; ``uncounted``: what the vendor's programs do not see."""
        chosen = " ".join(targets)
        if not self.compiles and not self.refused:
            return [
                f"enforce: no compile came through the pinned compilers (targets {chosen})"
                + (f"; {uncounted}" if uncounted else "")
            ]
        out = [
            f"enforce: {self.compiles} device compiles: {self.rewritten} cut to {chosen}"
            + (f" (dropped {' '.join(sorted(self.dropped))})" if self.dropped else "")
            + f", {self.kept} already exactly {chosen}, {self.added} given {chosen} (they listed none)"
            + f", {self.whole_count} left whole"
        ]
        if self.refused:
            out.append(
                f"enforce: refused compiles with an unknown option that could name a target or an input: "
                f"{' '.join(self.refused)}"
            )
        for sources, listed in self.whole:
            out.append(
                f"enforce: left whole (lists none of {chosen}): {' '.join(sources) or 'a compile'} "
                f"for {' '.join(listed)}"
            )
        return out

    def to_stamp(self) -> dict[str, Any]:
        """The stamp's ``enforced`` object (``make_stamp`` puts the target lists in order)."""
        return {
            "compiles": self.compiles,
            "rewritten": self.rewritten,
            "kept": self.kept,
            "added": self.added,
            "dropped": sorted(self.dropped),
            "left_whole": [{"sources": sorted(s), "targets": list(t)} for s, t in self.whole],
            "left_whole_count": self.whole_count,
            "refused": self.refused_count,
        }


def read_record(path: Path | None) -> Enforced:
    """The record the pinned compilers appended to (bounded; lines it cannot read are skipped)."""
    done = Enforced()
    if path is None:
        return done
    try:
        with open(path, "rb") as fh:
            data = fh.read(_RECORD_LIMIT)
    except OSError:
        return done
    for raw in data.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict):
            done.add(line)
    return done
