"""``rocm-build-backend split``: one thinned wheel per target (or per AMD family) of a fat
wheel, each labelled with a PEP 440 local version (``1.0+gfx942``), ready for ``index``.

The targets come from an audit of the wheel: the device each code target is for, as its vendor
says (``BuildVendor.device_of``: ``gfx90a:xnack-`` is split as ``gfx90a``, which keeps both
xnack variants; ``sm_90a`` and PTX-only ``compute_90`` as ``sm_90``; ``thin.run.held_devices``).
Per family, processors are grouped by the family names ``index --family`` uses (AMD's); the
label lists the family's targets (``1.0+gfx906.gfx908.gfx90a``). A label that named targets
already is replaced, not extended (``1.0+gfx908.gfx90a`` splits into ``1.0+gfx908`` and
``1.0+gfx90a``); a split wheel that would take its input's place is refused. Nothing prints
here; no vendor is named.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import parse_wheel_filename

from rocm_build_backend.binary.audit import audit_wheel
from rocm_build_backend.gpu.targets import GpuTarget
from rocm_build_backend.wheel.index.plan import family_of
from rocm_build_backend.wheel.label import relabel
from rocm_build_backend.wheel.thin.run import (
    DamagedWheel,
    ThinInputError,
    ThinResult,
    held_devices,
    output_name,
    refuse_existing,
    thin_wheel,
)


@dataclass
class SplitResult:
    source: Path
    per: str
    wheels: list[ThinResult] = field(default_factory=list)
    units: dict[str, list[str]] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """0 when every wheel is exactly its unit's code; 1 when a file of one was kept whole."""
        return max((r.exit_code for r in self.wheels), default=0)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "source": str(self.source),
            "per": self.per,
            "wheels": [
                {
                    "unit": unit,
                    "targets": r.targets,
                    "output": str(r.output),
                    "wheel_size": r.wheel_after,
                    "installed_size": r.installed_after,
                    "kept_whole": [m.name for m in r.kept_whole],
                }
                for unit, r in zip(self.units, self.wheels)
            ],
            "exit_code": self.exit_code,
        }


def units_for(held: list[str], per: str) -> dict[str, list[GpuTarget]]:
    """Unit name -> the targets of one split wheel."""
    units: dict[str, list[GpuTarget]] = {}
    for t in held_devices(held):
        key = family_of(t.processor) if per == "family" else str(t)
        units.setdefault(key, []).append(t)
    return units


def split_wheel(
    wheel: str | os.PathLike[str],
    outdir: str | os.PathLike[str],
    *,
    per: str = "target",
    force: bool = False,
    keep_layout: bool = False,
) -> SplitResult:
    """One thinned wheel per unit in ``outdir``; every output name is checked before the first
    is written (``force``: replace earlier split results for other targets; ``keep_layout``: see
    ``thin_wheel``)."""
    src = Path(wheel)
    if per not in ("target", "family"):
        raise ThinInputError(f"--per {per}: expected target or family")
    if not src.is_file():
        raise ThinInputError(f"no such wheel: {src}", hint="give the path of a .whl file")
    report = audit_wheel(src)
    problems = report.problems + [f"{f.path}: {p}" for f in report.files for p in f.problems]
    if problems:
        raise DamagedWheel(f"{src.name}: {problems[0]}", hint="the wheel is damaged; nothing was written")
    if not report.targets:
        raise ThinInputError(
            f"{src.name} holds no GPU device code; there is nothing to split", hint="split wheels with HIP or CUDA code"
        )
    try:
        version = str(parse_wheel_filename(src.name)[1])
    except ValueError as exc:
        raise ThinInputError(f"{src.name} is not a valid wheel file name ({exc})") from None
    result = SplitResult(src, per)
    units = units_for(list(report.targets), per)
    names = {unit: output_name(src.name, relabel(version, targets)) for unit, targets in units.items()}
    if Path(outdir).is_dir():  # every name checked before the first is written
        for unit, targets in units.items():
            refuse_existing(Path(outdir) / names[unit], src, [str(t) for t in targets], force)
    for unit, targets in units.items():
        result.units[unit] = [str(t) for t in targets]
        result.wheels.append(
            thin_wheel(
                src, targets, outdir, new_version=relabel(version, targets), force=force, keep_layout=keep_layout
            )
        )
    return result
