"""``verify``: does the audited device code cover the targets a build asked for?

Matching rule (the loader's): a requested target is covered by a file when each of the file's
containers with kernels holds code that serves it; what serves a request is its vendor's rule
(``BuildVendor.covers``, in ``gpu/<vendor>/loader.py``). AMD: a bare request such as ``gfx90a``
stands for the processor in each xnack/sramecc mode it supports, so it is met by ``gfx90a``
code (built for "any") or by ``gfx90a:xnack+`` and ``gfx90a:xnack-`` together, not by
``gfx90a:xnack-`` alone; generic code (``gfx9-4-generic``) meets a request for a processor it
covers (the HIP runtime loads it from ROCm 6.4 on) unless ``generic_ok=False``. NVIDIA:
``sm_XY`` is met by a cubin that loads on sm_XY (PTX alone does not count, it is a JIT
fallback), ``sm_XYa``/``sm_XYf`` and ``compute_XY`` only by exactly that target.

It reads no bytes: it works on an ``AuditReport``. It branches on no vendor.
"""

from __future__ import annotations

import os
from typing import Sequence

from rocm_build_backend.binary.printable import printable
from rocm_build_backend.binary.report import AuditReport, FileReport, target_obj, units
from rocm_build_backend.errors import TargetMismatchError
from rocm_build_backend.gpu.targets import GpuTarget, parse_target, sort_targets, vendor_name
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.gpu.vendor import vendor_of, vendors


def _vendor(target: str) -> str:
    """The vendor of a code target name (a name no vendor claims counts as the first vendor's)."""
    return vendor_of(target.split(":", 1)[0]).name


def _unit_covers(unit: set[str], req: GpuTarget, generic_ok: bool) -> str | None:
    """None when the unit's code covers the request; else a reason."""
    codes = [t for t in (target_obj(x) for x in unit) if t is not None and vendor_name(t) == vendor_name(req)]
    return build_side(vendor_name(req)).covers(codes, req, generic_ok=generic_ok)


def _fmt(targets: Sequence[GpuTarget | str]) -> str:
    names = [str(t) for t in targets]
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _was(n: int) -> str:
    return "was" if n == 1 else "were"


def verify(report: AuditReport, requested: Sequence[GpuTarget | str], *, generic_ok: bool = True) -> list[str]:
    """Problems (empty when every requested target is covered by the device code).

    Every file with device code of a vendor is checked against the requested targets of
    that vendor; a wheel without any device code while targets were requested is a
    problem; so is a file that could not be read completely.
    """
    reqs = sort_targets(t if isinstance(t, GpuTarget) else parse_target(t) for t in requested)
    if not reqs:
        return []
    where = ""
    if report.source and report.source.endswith((".whl", ".zip")) and "," not in report.source:
        where = f"wheel {os.path.basename(report.source)}: "
    problems = [f"{where}{p}" for p in report.problems]
    for f in report.files:
        for p in f.problems:
            problems.append(f"{where}{f.path} could not be read completely: {p}")
        for c in f.containers:
            if not c.read:
                problems.append(f"{where}{f.path}: cannot check its targets ({c.note})")
    device = report.device_files
    for found in vendors():
        vendor = found.name
        vreqs = [r for r in reqs if vendor_name(r) == vendor]
        if not vreqs:
            continue
        files = [
            f
            for f in device
            if any(_vendor(t) == vendor for t in f.targets) or (not f.targets and any(not c.read for c in f.containers))
        ]
        if not files:
            label = where.rstrip(": ") or report.source or "the input"
            what = "no GPU device code at all" if not device else (f"no {found.label} device code")
            problems.append(f"{label} holds {what}; {_fmt(vreqs)} {_was(len(vreqs))} requested")
            continue
        for f in files:
            if any(not c.read for c in f.containers):
                continue  # already reported: cannot check
            problems.extend(_file_problems(f, vendor, vreqs, where, generic_ok))
    return problems


def _file_problems(f: FileReport, vendor: str, vreqs: Sequence[GpuTarget], where: str, generic_ok: bool) -> list[str]:
    """What one file with device code of ``vendor`` lacks of the requested targets."""
    containers = [c for c in f.containers if any(_vendor(t) == vendor for t in c.targets)]
    file_units = units(containers)
    held = [t for t in f.targets if _vendor(t) == vendor]
    absent: list[GpuTarget] = []
    partial: list[tuple[GpuTarget, int, int]] = []
    reasons: list[str] = []
    for r in vreqs:
        misses = [_unit_covers(u, r, generic_ok) for u in file_units]
        if not any(m is not None for m in misses):
            continue
        if all(m is not None for m in misses):
            absent.append(r)
            if misses[0] and misses[0] != f"no code for {r}":
                reasons.append(misses[0])
        else:
            partial.append((r, sum(m is not None for m in misses), len(file_units)))
    stubs = [c for c in f.containers if not c.kernels]
    for r in absent:
        if any(str(r) in c.targets for c in stubs):
            reasons.append(f"the {r} code is a device-link stub without kernels")
    problems = []
    if absent:
        text = f"{where}{f.path} holds device code for {_fmt(held)} only; {_fmt(absent)} {_was(len(absent))} requested"
        real = [x for x in dict.fromkeys(reasons) if not x.startswith("no ")]
        if real:
            text += " (" + "; ".join(real) + ")"
        problems.append(text)
    for r, missing_in, total in partial:
        problems.append(
            f"{where}{f.path} has {r} code for only some of its kernels "
            f"({missing_in} of {total} translation units lack it); {r} was requested"
        )
    return problems


HINT = (
    "the build did not compile for the requested targets: look for a hard-coded "
    "--offload-arch / -gencode, or an arch list the build script sets itself "
    "(PYTORCH_ROCM_ARCH, AMDGPU_TARGETS, GPU_TARGETS, CMAKE_HIP_ARCHITECTURES, "
    "TORCH_CUDA_ARCH_LIST); a project that has no GPU code sets "
    'verify = "off" under [tool.rocm-build-backend]'
)


def mismatch_error(problems: Sequence[str]) -> TargetMismatchError:
    """The error the build shim raises for a failed ``verify``."""
    problems = [printable(p) for p in problems]  # paths and names from the wheel: no raw controls
    if len(problems) == 1:
        message = problems[0]
    else:
        message = f"{len(problems)} problems with the built wheel's device code:\n  " + "\n  ".join(problems)
    hint = HINT
    if any("cannot check" in p for p in problems):
        hint = (
            "install backports.zstd (a dependency of rocm-build-backend before Python 3.14) so "
            "compressed device code can be read"
        )
        if not all("cannot check" in p for p in problems):
            hint += "; " + HINT
    return TargetMismatchError(message, hint=hint)
