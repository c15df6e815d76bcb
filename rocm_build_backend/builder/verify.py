"""Steps 8-9 of a build: audit the wheel's device code against the targets, then stamp it.

The audit reads what the wheel really holds (and, for an editable build, the libraries it
left in the source tree); a wheel that misses a target fails the build (``verify``). The
stamp, the local version label and the import guard go into the wheel in one atomic rewrite.
Decides nothing about targets; touches no file but the wheel.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from packaging.utils import parse_wheel_filename

from rocm_build_backend import _version
from rocm_build_backend.binary.audit import (
    AuditReport,
    audit_paths,
    audit_wheel,
    verify,
)
from rocm_build_backend.builder.enforce import Enforced
from rocm_build_backend.builder.exact import Beyond, beyond, prebuilt_members
from rocm_build_backend.builder.exact import to_stamp as exact_stamp
from rocm_build_backend.builder.log import log
from rocm_build_backend.builder.prepare import Prepared
from rocm_build_backend.builder.profiles import profile_for
from rocm_build_backend.builder.switches.actions import needed
from rocm_build_backend.errors import TargetMismatchError
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.wheel.guard import guard_files
from rocm_build_backend.wheel.label import local_version
from rocm_build_backend.wheel.stamp import audit_entries, make_stamp, rewrite_wheel

if TYPE_CHECKING:
    from rocm_build_backend.binary.audit import AuditReport
    from rocm_build_backend.builder.prepare import Prepared

_NOT_SOURCES = {".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__", "build", "dist"}


def _libraries_since(source_dir: Path, since: float) -> list[Path]:
    """Shared libraries written into the source tree since ``since`` (an editable build's)."""
    found = []
    for root, dirs, names in os.walk(source_dir):
        dirs[:] = [d for d in dirs if d not in _NOT_SOURCES and not d.endswith(".egg-info")]
        for name in names:
            if name.endswith(".so") or ".so." in name:
                path = Path(root, name)
                try:
                    if path.stat().st_mtime >= since:
                        found.append(path)
                except OSError:
                    pass
    return found


def _switches_hint(prepared: Prepared) -> str | None:
    """The project's own switches that most likely kept its GPU code out, as one hint."""
    missed = needed(prepared.plan.switches)
    if not missed:
        return None
    parts = [f"{s.finding.where} {s.finding.name}: " + (f"give {s.todo}" if s.todo else s.detail) for s in missed[:6]]
    return "the project's own switches decide whether it builds GPU code: " + "; ".join(parts)


def _mismatch_hint(prepared: Prepared, problems: list[str], enforced: Enforced | None = None) -> str:
    if all("cannot check its targets" in p for p in problems):  # unread, not wrong
        return (
            "the audit could not read the device code, so its targets are unchecked, not wrong: "
            "install a zstd decoder in the build environment (backports.zstd, a dependency of "
            'rocm-build-backend before Python 3.14), or set verify = "warn" to build without the check'
        )
    if enforced is not None and enforced.whole:
        shown = "; ".join(f"{' '.join(s) or 'a compile'} for {' '.join(t)}" for s, t in enforced.whole[:4])
        return (
            f"compiles that list none of the targets were left whole ({shown}): files built for one "
            'architecture on purpose; build for targets they list, or set verify = "warn"'
        )
    if any(" holds no " in p for p in problems):
        found = _switches_hint(prepared)
        if found:
            return found + '; a project meant to have no GPU code sets verify = "off"'
    vendor = prepared.plan.vendor
    hint = (
        f"the build ignored the targets (a hard-coded {build_side(vendor).arch_flags}, or a script that picks its own)"
    )
    if prepared.plan.enforce is None and prepared.project.settings.enforce is False:
        hint += "; enforce = true holds the compiler to the targets"
    if prepared.plan.profile:
        prof = profile_for(prepared.project.dist_name)
        found = prof.no_device_code_hint(vendor) if prof is not None else None
        if found:
            hint = found
    return hint + '; a project meant to have no GPU code sets verify = "off"'


def _beyond(
    prepared: Prepared, wheel: Path, report: AuditReport, since: float, enforced: Enforced | None
) -> list[Beyond] | None:
    """With enforcement on: the files holding targets beyond the plan's (``exact``), the allowed
    ones in the log; None when the build was not enforced."""
    if enforced is None:
        return None
    plan = prepared.plan
    found = beyond(report, plan.targets, enforced.whole_targets)
    doubtful = [b.path for b in found if not b.why]
    if doubtful:
        copied = prebuilt_members(wheel, doubtful, prepared.project.source_dir, since)
        found = beyond(report, plan.targets, enforced.whole_targets, copied)
    chosen = " ".join(str(t) for t in plan.targets)
    for b in found:
        if b.why:
            log("audit: " + b.line(chosen))
    return found


EXACT_HINT = (
    "a compile the pinned compilers did not see built them (a compiler run by a path of its own, "
    'a library built or fetched during the build); set verify = "warn" to build anyway, '
    "or enforce = false to build the targets the project lists"
)


def audit(
    prepared: Prepared, wheel: Path, *, editable: bool = False, since: float = 0.0, enforced: Enforced | None = None
) -> tuple[AuditReport, list[Beyond] | None]:
    """What the wheel's device code holds, verified against the targets (``verify``); with
    enforcement on also that it holds nothing beyond them (``exact``)."""
    project, plan = prepared.project, prepared.plan
    report = audit_wheel(wheel)
    if editable:
        # the compiled code of an editable install stays in the source tree
        fresh = _libraries_since(project.source_dir, since)
        if fresh:
            report.files.extend(audit_paths(fresh).files)
    if project.settings.verify == "off":
        return report, None
    missing = verify(report, plan.targets)
    found = _beyond(prepared, wheel, report, since, enforced)
    chosen = " ".join(str(t) for t in plan.targets)
    problems = missing + [b.line(chosen) for b in found or [] if not b.why]
    if problems:
        message = f"{wheel.name}: " + "; ".join(problems)
        if project.settings.verify == "error":
            wheel.unlink(missing_ok=True)
            hint = _mismatch_hint(prepared, missing, enforced) if missing else EXACT_HINT
            raise TargetMismatchError(message, hint=hint)
        log("warning: " + message)
    else:
        log(
            "audit: "
            + (
                ", ".join(f"{f.path} holds {' '.join(f.targets)}" for f in report.files if f.targets)
                or "no device code"
            )
        )
    return report, found


def stamp(
    prepared: Prepared,
    wheel: Path,
    report: AuditReport,
    *,
    editable: bool = False,
    enforced: Enforced | None = None,
    found: list[Beyond] | None = None,
) -> Path:
    """Write the stamp (and the local version, the guard) into the wheel, atomically."""
    project, plan = prepared.project, prepared.plan
    settings = project.settings
    host = [str(d.target) for d in prepared.detection.devices] if prepared.detection else []
    toolchain = prepared.compiler.to_json() if prepared.compiler else {}
    data = make_stamp(
        requested=[str(t) for t in plan.targets],
        source=plan.source,
        audit_files=audit_entries(report.files),
        host_gpus=host,
        toolchain=toolchain,
        version=_version.__version__,
        enforced=(
            {
                "how": list(plan.enforce or []),
                **enforced.to_stamp(),
                **({"exact": exact_stamp(found)} if found is not None else {}),
            }
            if enforced is not None
            else None
        ),
        switches=[
            {"file": s.finding.file, "line": s.finding.line, "name": s.finding.name, "given": s.applied}
            for s in plan.switches
            if s.applied
        ],
    )
    new_version = None
    if settings.local_version:
        new_version = local_version(str(parse_wheel_filename(wheel.name)[1]), plan.targets)
    extra_files: dict[str, bytes] = {}
    patch_files: dict[str, Callable[[bytes], bytes]] = {}
    if settings.guard and not plan.targets:
        log("guard: no GPU targets, no guard added")
    elif settings.guard and not editable:
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
        dist = project.dist_name or wheel.name.split("-")[0]
        extra_files, patch_files = guard_files(names, [str(t) for t in plan.targets], dist)
    out = rewrite_wheel(
        wheel, stamp=data, new_version=new_version, extra_files=extra_files or None, patch_files=patch_files or None
    )
    log(f"stamped {out.name}")
    return out


def audit_and_stamp(
    prepared: Prepared, wheel: Path, *, editable: bool = False, since: float = 0.0, enforced: Enforced | None = None
) -> Path:
    """Verify the wheel's device code against the targets, then stamp it (atomically)."""
    report, found = audit(prepared, wheel, editable=editable, since=since, enforced=enforced)
    return stamp(prepared, wheel, report, editable=editable, enforced=enforced, found=found)
