"""What a thinning rewrite of one binary will do, before it touches a byte: the plan.

A ``Plan`` is a list of writes (bytes at an offset) and zero fills (byte ranges), plus the
targets kept and dropped. Rewriters (``rewrite_amd``, ``rewrite_cuda``) only *plan*: they read
and check every container first, so a file whose format cannot be rewritten safely raises
``CannotThin`` before anything changed, and is then kept whole. ``Plan.apply`` writes into a
mutable buffer (a ``bytearray`` or a writable ``mmap``).

``Selector`` decides which device code stays: code that loads on at least one of the given
targets by the loader rules in ``gpu.compat`` (a generic target or a PTX entry that serves a
target stays). This module must not read wheels or print.
"""

from __future__ import annotations

import mmap
import re
from dataclasses import dataclass, field
from typing import Union

from rocm_build_backend.errors import UnknownTargetError
from rocm_build_backend.gpu.compat import why_not
from rocm_build_backend.gpu.targets import GpuTarget, vendor_name
from rocm_build_backend.gpu.vendor import vendor_of

_NV = re.compile(r"(sm|compute)_[0-9]+[af]?")
_AMD_PROC = re.compile(r"gfx[0-9a-f]+|gfx[0-9]+(?:-[0-9]+)?-generic")


class CannotThin(Exception):
    """The file is read correctly but this format cannot be rewritten safely: keep it whole."""


Buffer = Union[bytearray, mmap.mmap, memoryview]  # a file's bytes, writable


@dataclass
class Plan:
    """Edits to one binary; offsets are absolute in the file."""

    writes: list[tuple[int, bytes]] = field(default_factory=list)
    zeros: list[tuple[int, int]] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        return bool(self.dropped)

    def extend(self, other: "Plan") -> None:
        self.writes.extend(other.writes)
        self.zeros.extend(other.zeros)
        self.kept.extend(other.kept)
        self.dropped.extend(other.dropped)

    def apply(self, buf: Buffer) -> None:
        """Zero fills first, then writes (a write may land inside a zeroed range)."""
        size = len(buf)
        for start, end in self.zeros:
            if not 0 <= start <= end <= size:
                raise ValueError(f"zero fill {start}..{end} outside the buffer")
            pos = start
            while pos < end:
                n = min(end - pos, 1 << 20)
                buf[pos : pos + n] = bytes(n)
                pos += n
        for offset, data in self.writes:
            if not 0 <= offset <= offset + len(data) <= size:
                raise ValueError(f"write at {offset} outside the buffer")
            buf[offset : offset + len(data)] = data


def _amd_code(text: str) -> GpuTarget:
    processor, *features = text.split(":")
    if not _AMD_PROC.fullmatch(processor):
        raise CannotThin(f"device code for {text!r}, a target this tool cannot judge")
    values: dict[str, str] = {}
    for feat in features:
        name, sign = feat[:-1], feat[-1:]
        if name not in ("sramecc", "xnack") or sign not in ("+", "-") or name in values:
            raise CannotThin(f"device code for {text!r}, a target this tool cannot judge")
        values[name] = sign
    return GpuTarget(processor, sramecc=values.get("sramecc"), xnack=values.get("xnack"))


class Selector:
    """Which device code stays for a set of device targets."""

    def __init__(self, targets: list[GpuTarget]) -> None:
        self.targets = list(targets)

    def keeps(self, code: str) -> bool:
        """True when code built for ``code`` loads on one of the targets.

        Raises CannotThin for a code target the loader rules do not cover.
        """
        if _NV.fullmatch(code):
            obj = GpuTarget(code)
        elif code == "amdgcnspirv":  # AMD SPIR-V: compiled at load time for any GPU of its vendor
            return any(vendor_name(t) == vendor_of(code).name for t in self.targets)
        else:
            obj = _amd_code(code)
        for device in self.targets:
            if vendor_name(device) != vendor_name(obj):
                continue
            try:
                if why_not(obj, device) is None:
                    return True
            except UnknownTargetError:  # sm_35: code for a GPU the tables no longer list
                raise CannotThin(f"device code for {code!r}, a target this tool cannot judge") from None
            except (AssertionError, KeyError) as exc:  # pragma: no cover - guarded by the regexes
                raise CannotThin(f"cannot judge {code}: {exc}") from None
        return False
