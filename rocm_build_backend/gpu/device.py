"""The detection model: a device a probe saw, one probe's result, one vendor's and the whole
machine's outcome, and what probes are given to work with.

Vendor-neutral data, and the ``detect --json`` document; the text table is ``cli/render.py``'s.
Must not probe, run or parse anything: the probes live with their vendor (``gpu/amd/``), the
orchestration in ``detect.py``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from rocm_build_backend.gpu.target import GpuTarget

#: More GPUs (or agents) than any machine has: a probe listing more is broken or hostile, and
#: its parser stops there instead of building millions of devices.
MAX_DEVICES = 1024
#: A ``subprocess.run``-compatible callable (tests hand in fakes).
Runner = Callable[..., Any]


@dataclass(frozen=True)
class Device:
    """One GPU a probe saw, and whether the build compiles for it."""

    target: GpuTarget  # what the runtime loads (after HSA_OVERRIDE_GFX_VERSION)
    physical: GpuTarget | None  # the hardware's own target when an override changed it
    name: str  # marketing name, "" when the probe does not know it
    kind: str  # "dgpu" | "apu"
    included: bool
    reason: str
    source: str
    node: int | None  # KFD node (kfd, rocminfo) or line index (other probes)
    uuid: str = ""  # "GPU-8d1457e2c20f59d2" where known
    device_id: str = ""  # PCI device ID, "0x74a1", where known
    compute_units: int | None = None
    evidence: str = ""  # why ``kind`` is what it is

    @property
    def processor(self) -> str:
        return self.target.processor

    def to_json(self, vendor: str) -> dict[str, Any]:
        """``detect --json``'s device; ``vendor``: the vendor whose probe saw it."""
        return {
            "target": str(self.target),
            "vendor": vendor,
            "processor": self.target.processor,
            "physical": str(self.physical) if self.physical else None,
            "name": self.name,
            "kind": self.kind,
            "included": self.included,
            "reason": self.reason,
            "source": self.source,
            "node": self.node,
            "device_id": self.device_id or None,
            "compute_units": self.compute_units,
            "evidence": self.evidence,
        }


@dataclass(frozen=True)
class ProbeResult:
    """What one probe saw: its GPUs (before any selection), a one-line summary, an error code.

    ``error`` is one of ``no_topology``, ``driver_not_loaded``, ``driver_not_loaded_no_kfd``,
    ``kfd_permission_denied``, ``out_of_resources``, ``tool_failed``, ``not_found``,
    ``timeout``, or None.
    """

    probe: str
    devices: list[Device]
    summary: str
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


class Probing(NamedTuple):
    """What every vendor's probes work with, for one ``detect()`` call.

    ``recorded`` None: probe this machine live (sysfs under ``root``, programs under the time
    limit). Given (even empty): replay only; no program runs, and sysfs is read only when
    ``root_given``.
    """

    root: Path
    root_given: bool
    env: Mapping[str, str]
    recorded: Mapping[str, str] | None
    run: Runner | None
    deadline: float  # time.monotonic() by which every program run must have ended
    keep_features: bool

    @property
    def live(self) -> bool:
        return self.recorded is None

    def time_left(self) -> float:
        return self.deadline - time.monotonic()


@dataclass(frozen=True)
class VendorDetection:
    """One vendor's outcome: its probes' results in the order consulted, the deciding probe,
    its devices after selection, its build targets, and error codes behind an empty list."""

    vendor: str
    results: dict[str, ProbeResult] = field(default_factory=dict)
    decided: str | None = None
    devices: list[Device] = field(default_factory=list)
    targets: list[GpuTarget] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # probe -> how messages name it
    present: bool = True  # False: none of the vendor's software is installed (its probe says so)


@dataclass(frozen=True)
class Detection:
    """The outcome: build targets, every device with its verdict, the deciding probe."""

    targets: list[GpuTarget]
    devices: list[Device]
    source: str | None
    warnings: list[str]
    seen: dict[str, str]
    causes: list[str] = field(default_factory=list)  # error codes behind an empty result
    looked_for: str = "AMD"  # the vendors probed, as messages name them ("AMD or NVIDIA")
    labels: dict[str, str] = field(default_factory=dict)  # probe -> how messages name it
    vendors: dict[str, str] = field(default_factory=dict)  # probe -> the vendor it probes for
    absent: tuple[str, ...] = ()  # vendors none of whose software is installed

    def to_json(self) -> dict[str, Any]:
        """The ``detect --json`` document (``data/schemas/detect.schema.json``, docs/json/detect.md)."""
        return {
            "schema_version": 1,
            "targets": [str(t) for t in self.targets],
            "devices": [d.to_json(self.vendors.get(d.source, "")) for d in self.devices],
            "source": self.source,
            "warnings": list(self.warnings),
            "seen": dict(self.seen),
            "causes": list(self.causes),
        }

    def label(self, probe: str) -> str:
        return self.labels.get(probe, probe)


def counted(devices: Sequence[Device]) -> str:
    """``gfx942 x8, gfx1036``: each target with its count, in first-seen order."""
    counts: dict[str, int] = {}
    for d in devices:
        counts[str(d.target)] = counts.get(str(d.target), 0) + 1
    return ", ".join(f"{t} x{n}" if n > 1 else t for t, n in counts.items())


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")
