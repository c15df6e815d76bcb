"""Will a wheel's device code load on these GPUs? ``rocm-build-backend check`` in library form.

A wheel's facts come from its stamp (``<name>-<version>.dist-info/rocm_build.json``, see
``docs/stamp.md``) cross-checked with an audit of the binaries it holds. When the two disagree
the binaries win and the disagreement is reported; an unstamped wheel is audited. The loader's
rules live in ``compat.py``: exact processor, xnack/sramecc modes, generic targets only from
ROCm 6.4 on.

A wheel *serves* a device when every file with device code has code that loads on it: every
kernel module in it, or for NVIDIA GPUs (which load modules one by one) some of them, the
others being for other GPUs, unless ``strict`` (``facts.file_verdict``). A wheel with no device
code serves every device.

Verdicts are ``ok``, ``fails`` or ``unknown`` (no stamp and no readable binaries, a damaged
binary, no device to check against, generic code with an unknown ROCm version). The report's
exit code: 0 when every wheel loads on every device, 1 when at least one does not, 3 (cannot
tell) when some answer is unknown and none fails.

The facts and the verdict rules are ``facts.py``; reading a wheel is ``reader.py`` (which
``cache.py`` and ``index.py`` use too). This module builds the report and must not open a wheel
itself. The names it used to hold (``wheel_targets``, ``WheelTargets``, ...) are re-exported.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from rocm_build_backend.errors import CANNOT_TELL, RocmBuildBackendError
from rocm_build_backend.gpu.targets import GpuTarget
from rocm_build_backend.wheel.facts import FAILS, OK, UNKNOWN, DeviceFile, WheelTargets  # noqa: F401 (re-exported)
from rocm_build_backend.wheel.reader import (  # noqa: F401 (re-exported)
    KNOWN_SCHEMA,
    STAMP_NAME,
    facts_from_tree,
    facts_from_zip,
    stamp_files,
    wheel_targets,
)

__all__ = [
    "OK",
    "FAILS",
    "UNKNOWN",
    "DeviceFile",
    "WheelTargets",
    "KNOWN_SCHEMA",
    "STAMP_NAME",
    "facts_from_tree",
    "facts_from_zip",
    "stamp_files",
    "wheel_targets",
    "DeviceVerdict",
    "WheelCheck",
    "CheckReport",
    "check_wheels",
    "devices_from_detection",
    "generic_ok_for",
    "host_rocm_version",
]

SCHEMA_VERSION = 1  # of the --json output: docs/json/check.md, data/schemas/check.schema.json


# --------------------------------------------------------------------------------------------
# the report


@dataclass
class DeviceVerdict:
    device: str
    status: str
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "status": self.status, "reason": self.reason}


@dataclass
class WheelCheck:
    path: Path
    status: str
    facts: WheelTargets | None
    verdicts: list[DeviceVerdict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": str(self.path), "status": self.status}
        if self.facts is not None:
            facts = self.facts.to_json()
            facts.pop("path")
            out.update(facts)
            out["problems"] = list(self.facts.problems)
        else:
            out["problems"] = list(self.problems)
        out["devices"] = [v.to_json() for v in self.verdicts]
        return out


@dataclass
class CheckReport:
    wheels: list[WheelCheck]
    devices: list[str]
    notes: list[str] = field(default_factory=list)
    generic_ok: bool | None = True

    @property
    def exit_code(self) -> int:
        statuses = {w.status for w in self.wheels}
        if FAILS in statuses:
            return 1
        if UNKNOWN in statuses:
            return CANNOT_TELL
        return 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "devices": list(self.devices),
            "generic_targets": {True: "load", False: "do not load", None: "unknown"}[self.generic_ok],
            "notes": list(self.notes),
            "wheels": [w.to_json() for w in self.wheels],
            "exit_code": self.exit_code,
        }


def check_wheels(
    paths: Iterable[str | Path],
    devices: Sequence[GpuTarget | str],
    *,
    generic_ok: bool | None = True,
    notes: Sequence[str] = (),
    audit: bool = True,
    strict: bool = False,
) -> CheckReport:
    """Check each wheel against each device (full target IDs, as detection reports them).

    ``generic_ok``: True when the HIP runtime is ROCm 6.4 or newer (generic code loads), False
    when older, None when not known (a wheel that has only generic code for a device is then
    ``unknown``). ``notes`` are lines the report repeats (detection's warnings, such as an
    HSA_OVERRIDE_GFX_VERSION in effect). A wheel that cannot be read is ``unknown``, not an error.
    """
    devs = [str(d) for d in devices]
    out = []
    for p in paths:
        p = Path(p)
        try:
            facts = wheel_targets(p, audit=audit)
        except RocmBuildBackendError as exc:
            out.append(WheelCheck(p, UNKNOWN, None, problems=[exc.message]))
            continue
        verdicts = [DeviceVerdict(d, *facts.verdict(d, generic_ok=generic_ok, strict=strict)) for d in devs]
        statuses = {v.status for v in verdicts}
        if not devs:
            status = OK if facts.known and not facts.has_device_code else UNKNOWN
        elif FAILS in statuses:
            status = FAILS
        elif UNKNOWN in statuses:
            status = UNKNOWN
        else:
            status = OK
        out.append(WheelCheck(p, status, facts, verdicts))
    return CheckReport(out, devs, list(notes), generic_ok)


def devices_from_detection(detection: Any) -> tuple[list[GpuTarget], list[str]]:
    """The devices ``check``/``cache`` should test (those detection included) and its notes."""
    devices, notes = [], []
    for d in getattr(detection, "devices", []) or []:
        if getattr(d, "included", True):
            devices.append(d.target)
            if getattr(d, "physical", None) is not None and d.physical != d.target:
                notes.append(f"an override is in effect: the {d.physical} GPU loads code as {d.target}")
        else:
            notes.append(f"{d.target} is not checked: {getattr(d, 'reason', '') or 'left out by detection'}")
    warnings = [str(w) for w in getattr(detection, "warnings", []) or []]
    if any("OVERRIDE" in w for w in warnings):
        notes = [n for n in notes if not n.startswith("an override is in effect")]
    return devices, notes + [w for w in warnings if w not in notes]


def generic_ok_for(rocm_version: str | None) -> bool | None:
    """Whether generic targets load under this ROCm version (6.4 on); None when unknown."""
    if not rocm_version:
        return None
    parts = []
    for piece in str(rocm_version).split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            return None
        parts.append(int(digits))
    while len(parts) < 2:
        parts.append(0)
    return tuple(parts) >= (6, 4)


def host_rocm_version(*, root: Path = Path("/"), env: Mapping[str, str] | None = None) -> str | None:
    """The ROCm version installed under ``root`` (``$ROCM_PATH`` or /opt/rocm), if it says."""
    environ: Mapping[str, str] = os.environ if env is None else env
    bases = []
    for var in ("ROCM_PATH", "ROCM_HOME", "HIP_PATH"):
        if environ.get(var):
            bases.append(Path(environ[var]))
    bases.append(Path("/opt/rocm"))
    for base in bases:
        base = root / base.relative_to(base.anchor) if base.is_absolute() else root / base
        for rel in (".info/version", ".info/version-dev", ".info/version-hip-libraries"):
            try:
                text = (base / rel).read_text("utf-8").strip()
            except OSError:
                continue
            if text:
                return text.split("-")[0]
    return None
