"""AMD target names: which names are AMD's, how a target ID parses, sorts and decodes from KFD.

A target ID is a processor plus optional features, as LLVM writes it: ``gfx942``,
``gfx90a:xnack-``, ``gfx90a:sramecc+:xnack-``, ``gfx11-generic``. Only the grammar lives here;
the facts about each processor are rows of the target table. Must not detect or run anything.
"""

from __future__ import annotations

import re

from rocm_build_backend.gpu.targets import GpuTarget, table


_AMD = re.compile(r"gfx[0-9a-f]+|gfx[0-9]+(?:-[0-9]+)?-generic")
SPIRV = "amdgcnspirv"  # clang's AMDGPU SPIR-V code: compiled at load time for the device; no target of the table
_GENERIC = re.compile(r"gfx([0-9]+)(?:-([0-9]+))?-generic")
_FEATURE = re.compile(r"(sramecc|xnack)([+-])")


def owns(processor: str) -> bool:
    return processor == SPIRV or _AMD.fullmatch(processor) is not None


def parse(text: str) -> GpuTarget | str | None:
    """``gfx90a:sramecc+:xnack-`` -> GpuTarget; a problem for bad features; None if unknown."""
    processor, *features = text.split(":")
    if not _AMD.fullmatch(processor) or processor not in table():
        return None
    row = table()[processor]
    values: dict[str, str] = {}
    for feat in features:
        m = _FEATURE.fullmatch(feat)
        if not m:
            return f"bad feature '{feat}' in GPU target '{text}' (expected xnack+, xnack-, sramecc+ or sramecc-)"
        if m.group(1) in values:
            return f"feature '{m.group(1)}' given twice in GPU target '{text}'"
        if row.get(m.group(1)) is False:
            return f"GPU target '{processor}' has no '{m.group(1)}' feature (in '{text}')"
        values[m.group(1)] = m.group(2)
    return GpuTarget(processor, sramecc=values.get("sramecc"), xnack=values.get("xnack"))


def sort_key(processor: str) -> tuple[object, ...] | None:
    """(major, minor, stepping, generic?) with generic targets after their family; None if odd."""
    g = _GENERIC.fullmatch(processor)
    if g:
        return (int(g.group(1)), int(g.group(2) or 0), 99, 1)
    digits = processor[3:]
    if (
        len(digits) >= 3
        and digits[:-2].isascii()
        and digits[:-2].isdigit()
        and all(c in "0123456789abcdef" for c in digits[-2:])
    ):
        return (int(digits[:-2]), int(digits[-2], 16), int(digits[-1], 16), 0)
    return None


def kfd_to_processor(version: int) -> str | None:
    """Decode KFD ``gfx_target_version`` (90010 -> gfx90a, 90402 -> gfx942); None for 0 (CPU)."""
    if version <= 0:
        return None
    major, minor, stepping = version // 10000, (version // 100) % 100, version % 100
    if minor > 15 or stepping > 15:
        return None
    return f"gfx{major}{minor:x}{stepping:x}"
