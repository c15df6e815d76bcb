"""Which GPUs does this machine have, and which targets should a build compile for?

``detect()`` asks every registered vendor (``gpu/vendor.py``) to run or replay its probes
under one shared time limit, and puts their answers together; ``require_targets()`` turns an
empty answer into one error that says what each probe saw and what to do. Vendor-neutral:
the probes, their order and their hints live with each vendor (``gpu/amd/detection.py``).

Replaying a machine: ``recorded`` maps probe names (``rocminfo``, ``rocm-smi``, ...) to
captured output. When it is given (even empty), no program runs, and sysfs is read only
when ``root`` is given explicitly. Must not print.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from rocm_build_backend.errors import NoGpuDetectedError
from rocm_build_backend.gpu.device import Detection, Device, Probing, ProbeResult, Runner, VendorDetection
from rocm_build_backend.gpu.targets import GpuTarget, sort_targets, vendor_name
from rocm_build_backend.gpu.vendor import Vendor, vendors

__all__ = ["Detection", "Device", "ProbeResult", "detect", "require_targets"]


def detect(
    *,
    root: Path | str | None = None,
    run: Runner | None = None,
    env: Mapping[str, str] | None = None,
    recorded: Mapping[str, str] | None = None,
    keep_features: bool = False,
    timeout: float = 10.0,
) -> Detection:
    """Probe this machine (or a recorded one) and decide the build targets.

    ``root`` stands for ``/`` in every sysfs read (default ``/``). ``run`` is a
    ``subprocess.run``-compatible callable. ``env`` defaults to ``os.environ``; it is what
    overrides and visibility variables are read from and what programs run with.
    ``recorded`` maps probe names (``rocminfo``, ``rocm_agent_enumerator``, ``amdgpu-arch``,
    ``rocm-smi``, ...) to captured output; with it no program runs, and sysfs is read only
    when ``root`` is given. ``timeout`` bounds all program runs together, in seconds.
    """
    probing = Probing(
        root=Path("/") if root is None else Path(root),
        root_given=root is not None,
        env=os.environ if env is None else env,
        recorded=recorded,
        run=run,
        deadline=time.monotonic() + timeout,
        keep_features=keep_features,
    )
    warnings: list[str] = []
    if recorded is not None:
        known = {r.probe for v in vendors() for r in v.recorded_outputs}
        unknown = sorted(set(recorded) - known)
        if unknown:
            warnings.append("recorded output for unknown probe(s) ignored: " + ", ".join(unknown))
    return _combine([v.detect(probing) for v in vendors()], warnings)


def _combine(parts: Sequence[VendorDetection], warnings: list[str]) -> Detection:
    """One Detection from every vendor's: devices and targets together, probes in order."""
    probed = [p for p in parts if p.results]
    seen = {probe: r.summary for p in probed for probe, r in p.results.items()}
    labels = {probe: label for p in probed for probe, label in p.labels.items()}
    decided = [p.decided for p in parts if p.decided]
    devices: list[Device] = [d for p in parts for d in p.devices]
    targets: list[GpuTarget] = sort_targets(t for p in parts for t in p.targets)
    causes = [] if targets else _unique(c for p in parts for c in p.causes if p.present)
    looked_for = " or ".join(_label(p.vendor) for p in probed if p.present) or _label(parts[0].vendor if parts else "")
    return Detection(
        targets=targets,
        devices=devices,
        source=", ".join(decided) or None,
        warnings=[*warnings, *(w for p in parts for w in p.warnings)],
        seen=seen,
        causes=causes,
        looked_for=looked_for,
        labels=labels,
        vendors={probe: p.vendor for p in probed for probe in p.results},
        absent=tuple(p.vendor for p in parts if not p.present),
    )


def _label(name: str) -> str:
    found: Vendor | None = next((v for v in vendors() if v.name == name), None)
    return found.label if found is not None else name.upper()


def _unique(items: Iterable[str]) -> list[str]:
    out: list[str] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def require_targets(detection: Detection, vendor: str | None = None) -> list[GpuTarget]:
    """The detected build targets, or NoGpuDetectedError saying what each probe saw.

    ``vendor``: only that vendor's targets count, and the message speaks of its probes and
    its spelling of targets (a build with ``vendor = "nvidia"``); None: every vendor's, the
    probes of the vendors whose software is installed, in words that name no vendor, and an
    example target of every vendor (the machine may build for a GPU it does not have: a CUDA
    project on a machine with only AMD's tools installed)."""
    chosen = [v for v in vendors() if vendor is None or v.name == vendor]
    targets = [t for t in detection.targets if vendor is None or vendor_name(t) == vendor]
    if targets:
        return targets
    probed = set(detection.vendors.values()) - set(detection.absent)
    names = {vendor} if vendor is not None else ({v.name for v in chosen} & probed or {chosen[0].name})
    seen = (
        "; ".join(
            f"{detection.label(p)}: {s}"
            for p, s in detection.seen.items()
            if detection.vendors.get(p, "") in names or p not in detection.vendors
        )
        or "no probe ran"
    )
    if detection.devices and "hidden" in detection.causes:
        seen = "; ".join(
            f"{d.target} {d.reason}" for d in detection.devices if vendor is None or vendor_name(d.target) == vendor
        )
    specific = _unique(h for v in chosen for h in v.hints(detection.causes))
    examples = [v.example for v in chosen if vendor is None or v.name in names]
    example = f"set targets, e.g. {' or '.join(examples)}"
    hint = "; ".join(specific[:2])
    hint = f"{hint}; or {example}" if hint else example
    looked_for = "" if vendor is None else _label(vendor) + " "
    others = [str(t) for t in detection.targets if vendor is not None and vendor_name(t) != vendor]
    if others:
        seen += f"; found {' '.join(others)}, of another vendor"
    raise NoGpuDetectedError(f"no {looked_for}GPU found ({seen})", hint=hint)
