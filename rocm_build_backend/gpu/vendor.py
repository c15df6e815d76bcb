"""What every GPU vendor provides, and the registry that finds the vendor of a target.

A vendor (AMD, NVIDIA, ...) is one object that satisfies :class:`Vendor`: its target names
(which names it claims, how it parses, sorts and looks them up in the target table), its
loader rules ("does code built for X load on device Y"), its detection probes and the hints
behind their failures. Its build side (knobs, compiler check, pinned tools, profile
placeholders, the import guard's part, the variant provider, index families) is a second
object, :class:`gpu.build.BuildVendor`, found with ``gpu.build.build_side``. The rest of the package
asks the registry, never ``if vendor == ...``.

The registry names each vendor by ``module:attribute`` and imports it on first use, so this
module imports nothing from the package at run time and ``import rocm_build_backend`` stays
cheap. :func:`registered` adds a vendor for the length of a ``with`` block (a test's own
vendor). It must not hold any vendor's facts or rules.
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterator, NamedTuple, Protocol, Sequence

if TYPE_CHECKING:
    from rocm_build_backend.gpu.device import Probing, VendorDetection
    from rocm_build_backend.gpu.target import GpuTarget


class Entry(NamedTuple):
    """One vendor of the registry: its name, and where its two objects live (``module:attr``)."""

    name: str  # "amd": ``targets.vendor_name(target)``, of the ``vendor`` setting, of profiles' keys
    vendor: str  # the detection and loading side: a ``Vendor``
    build: str  # the build side: a ``gpu.build.BuildVendor``


#: The vendors, in the order they are consulted and sorted. Adding a vendor is adding a line.
_REGISTRY: list[Entry] = [
    Entry("amd", "rocm_build_backend.gpu.amd.vendor:AMD", "rocm_build_backend.gpu.amd.build:BUILD"),
    Entry("nvidia", "rocm_build_backend.gpu.nvidia.vendor:NVIDIA", "rocm_build_backend.gpu.nvidia.build:BUILD"),
]


class RecordedOutput(NamedTuple):
    """A probe whose captured output ``detect(recorded=...)`` replays, and its CLI option."""

    probe: str  # the key in ``recorded`` ("rocminfo")
    option: str  # the option of detect/check/cache that reads it from a file ("--rocminfo-output")
    help: str


class Vendor(Protocol):
    """One GPU vendor, as the vendor-neutral code sees it."""

    name: str  # "amd": ``targets.vendor_name(target)`` and of settings
    label: str  # "AMD": how messages name it
    example: str  # how a user names a target of this vendor, for hints: "ROCM_BUILD_BACKEND_TARGETS=gfx942"
    recorded_outputs: tuple[RecordedOutput, ...]  # the probes it can replay from captured output
    # True when a library's kernel modules are loaded one by one, when first used, so a module
    # without code for the device fails only if one of its kernels is launched there (and
    # libraries ship modules per GPU on purpose); False when one such module is a failure
    per_module_loading: bool

    def owns(self, processor: str) -> bool:
        """Whether a processor name (``gfx90a``, ``sm_90a``) is this vendor's spelling."""
        ...

    def parse(self, text: str) -> GpuTarget | str | None:
        """One lower-cased target ID the vendor owns: a target, a problem, or None (unknown name)."""
        ...

    def table_key(self, processor: str) -> str:
        """The target-table row that describes this processor (``sm_90a`` -> ``sm_90``)."""
        ...

    def sort_key(self, processor: str) -> tuple[object, ...] | None:
        """Order within the vendor (oldest first); None sorts the name after every vendor."""
        ...

    def why_not(self, code: GpuTarget, device: GpuTarget, *, generic_ok: bool) -> str | None:
        """None when code built for ``code`` loads on ``device`` (both this vendor's); else why not."""
        ...

    def detect(self, probing: Probing) -> VendorDetection:
        """Run (or replay) this vendor's probes and choose its build targets."""
        ...

    def hints(self, causes: Sequence[str]) -> list[str]:
        """What to do about the failure codes (``Detection.causes``) this vendor knows."""
        ...


def load(where: str) -> Any:
    module, _, attr = where.partition(":")
    return getattr(importlib.import_module(module), attr)


def vendor_names() -> tuple[str, ...]:
    """The registered vendors' names, in registry order, without importing any of them."""
    return tuple(entry.name for entry in _REGISTRY)


@lru_cache(maxsize=None)
def vendors() -> tuple[Vendor, ...]:
    """Every registered vendor, in registry order."""
    out = []
    for entry in _REGISTRY:
        found: Vendor = load(entry.vendor)
        if found.name != entry.name:
            raise RuntimeError(f"the registry entry {entry.name!r} loads a vendor named {found.name!r}")
        out.append(found)
    return tuple(out)


def entry_named(name: str) -> Entry | None:
    """The registry entry of the vendor called ``name``, or None."""
    return next((e for e in _REGISTRY if e.name == name), None)


def _forget() -> None:
    vendors.cache_clear()
    claimant.cache_clear()


@contextmanager
def registered(entry: Entry) -> Iterator[None]:
    """Add a vendor after the others for the block, then remove it (and every cached answer).

    For a vendor that lives outside the package (a test's own): ``with registered(Entry("myvendor",
    "my_pkg.vendor:VENDOR", "my_pkg.build:BUILD")): ...``. A name already registered is refused.
    """
    if entry.name in vendor_names():
        raise ValueError(f"a vendor named {entry.name!r} is already registered")
    _REGISTRY.append(entry)
    _forget()
    try:
        yield
    finally:
        _REGISTRY.remove(entry)
        _forget()


def vendor_named(name: str) -> Vendor | None:
    """The vendor called ``name`` (``"amd"``), or None."""
    return next((v for v in vendors() if v.name == name), None)


@lru_cache(maxsize=4096)
def claimant(processor: str) -> Vendor | None:
    """The vendor whose spelling ``processor`` is, or None when no vendor claims it."""
    return next((v for v in vendors() if v.owns(processor)), None)


def vendor_of(processor: str) -> Vendor:
    """The vendor of a processor name; a name no vendor claims counts as the first vendor's."""
    return claimant(processor) or vendors()[0]


def rank(processor: str) -> int:
    """The registry position of the vendor claiming ``processor`` (len(vendors()) if none)."""
    found = claimant(processor)
    return vendors().index(found) if found is not None else len(vendors())
