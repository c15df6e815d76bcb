"""``rocm-build-backend split``: one thinned wheel per target (or per AMD family) of a fat
wheel, each labelled with a PEP 440 local version (``1.0+gfx942``), ready for ``index``.

The targets come from an audit of the wheel: each AMD processor it has code for (features
dropped: ``gfx90a:xnack-`` is split as ``gfx90a``, which keeps both xnack variants), each
NVIDIA SM (``sm_90a`` as ``sm_90``; PTX-only ``compute_90`` as ``sm_90``). Per family, AMD
processors are grouped by the family names ``index --family`` uses; the label lists the
family's targets (``1.0+gfx906.gfx908.gfx90a``). Nothing prints here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocm_build_backend.gpu.targets import GpuTarget, sort_targets
from rocm_build_backend.wheel.thin import DamagedWheel, ThinInputError, ThinResult

_NV = re.compile(r"(?:sm|compute)_([0-9]+)[af]?")


@dataclass
class SplitResult:
    source: Path
    per: str
    wheels: list[ThinResult] = field(default_factory=list)
    units: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": 1, "source": str(self.source), "per": self.per,
                "wheels": [{"unit": unit, "targets": r.targets, "output": str(r.output),
                            "wheel_size": r.wheel_after, "installed_size": r.installed_after,
                            "kept_whole": [m.name for m in r.kept_whole]}
                           for unit, r in zip(self.units, self.wheels)]}

    def to_text(self) -> str:
        lines = [str(self.source)]
        for unit, r in zip(self.units, self.wheels):
            note = f"  ({len(r.kept_whole)} file(s) kept whole)" if r.kept_whole else ""
            lines.append(f"  {unit}: {r.output.name}  {r.wheel_after / (1 << 20):.1f} MiB{note}")
        return "\n".join(lines)


def _devices(held: list[str]) -> list[GpuTarget]:
    """The device targets to split by, from the targets a wheel's code is for."""
    out = set()
    for text in held:
        m = _NV.fullmatch(text)
        if m:
            out.add(GpuTarget(f"sm_{m.group(1)}"))
        else:
            out.add(GpuTarget(text.split(":", 1)[0]))
    return sort_targets(out)


def units_for(held: list[str], per: str) -> dict[str, list[GpuTarget]]:
    """Unit name -> the targets of one split wheel."""
    from rocm_build_backend.wheel.index import family_of

    units: dict[str, list[GpuTarget]] = {}
    for t in _devices(held):
        key = family_of(t.processor) if per == "family" and t.vendor == "amd" else str(t)
        units.setdefault(key, []).append(t)
    return units


def split_wheel(wheel: str | os.PathLike[str], outdir: str | os.PathLike[str], *, per: str = "target",
                keep_layout: bool = False) -> SplitResult:
    from packaging.utils import parse_wheel_filename

    from rocm_build_backend.binary.audit import audit_wheel
    from rocm_build_backend.wheel.stamp import local_version
    from rocm_build_backend.wheel.thin import thin_wheel

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
        raise ThinInputError(f"{src.name} holds no GPU device code; there is nothing to split",
                             hint="split wheels with HIP or CUDA code")
    try:
        version = str(parse_wheel_filename(src.name)[1])
    except ValueError as exc:
        raise ThinInputError(f"{src.name} is not a valid wheel file name ({exc})") from None
    result = SplitResult(src, per)
    for unit, targets in units_for(list(report.targets), per).items():
        result.units[unit] = [str(t) for t in targets]
        result.wheels.append(thin_wheel(src, targets, outdir, new_version=local_version(version, targets),
                                        keep_layout=keep_layout))
    return result
