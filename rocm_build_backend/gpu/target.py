"""One GPU target as data: a processor name and its two features. Nothing else.

The leaf both sides of the vendor registry import: ``gpu/vendor.py``'s protocol speaks of
targets, and ``gpu/targets.py`` parses them through the registry. Which vendor a target belongs
to, and its table row, are ``targets.vendor_name`` and ``targets.target_info``; this module
imports nothing of the package.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class GpuTarget:
    """One GPU target. ``xnack``/``sramecc`` are ``"+"``, ``"-"`` or ``None`` (any)."""

    processor: str
    sramecc: str | None = None
    xnack: str | None = None

    def __str__(self) -> str:
        out = self.processor
        if self.sramecc:
            out += f":sramecc{self.sramecc}"
        if self.xnack:
            out += f":xnack{self.xnack}"
        return out

    @property
    def bare(self) -> GpuTarget:
        """The same processor with every feature set to "any"."""
        return GpuTarget(self.processor)

    @property
    def is_generic(self) -> bool:
        return self.processor.endswith("-generic")
