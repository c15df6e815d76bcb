"""What a wheel holds for which GPU targets, and whether that code loads on a given device.

``DeviceFile`` is one member with device code (its targets, and those every container in it
covers: its ``complete`` targets); ``WheelTargets`` is a wheel's facts, read by ``reader.py``
from its stamp and its binaries. ``WheelTargets.verdict`` applies the loader's rules
(``gpu/compat.py``: exact processor, xnack/sramecc modes, generic targets only from ROCm 6.4 on).

A wheel *serves* a device when every file with device code has code that loads on it. A wheel
with no device code serves every device. Verdicts are ``ok``, ``fails`` or ``unknown``.

Within one file, where the audit names its kernel modules (``DeviceFile.modules``), a file
none of whose modules loads on the device fails. One where only some do is judged by the
device's vendor (``Vendor.per_module_loading``): CUDA loads modules one by one and libraries
(cuBLAS, cuDNN, ...) ship kernel modules per GPU, so for NVIDIA such a file loads, with a note
naming the modules for other GPUs, unless ``strict``; for AMD it fails. Facts without modules
(a stamp, an index's record) are judged by the targets every module covers (``complete``).

It holds values and rules only: it opens no file and prints nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from rocm_build_backend.errors import UnknownTargetError
from rocm_build_backend.gpu.compat import why_not
from rocm_build_backend.gpu.targets import GpuTarget, target_sort_key, parse_target
from rocm_build_backend.gpu.vendor import vendor_of

OK, FAILS, UNKNOWN = "ok", "fails", "unknown"
Modules = tuple[tuple[tuple[str, ...], int], ...]  # (targets, how many modules have them)


class DeviceFile(NamedTuple):
    """One wheel member with device code: the targets in it and those every container covers."""

    path: str
    targets: tuple[str, ...]
    complete: tuple[str, ...]
    problems: tuple[str, ...] = ()
    modules: Modules | None = None  # kernel modules by targets; None: not known (a stamp)
    unread: Modules = ()  # modules whose targets or kernels could not be read

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"targets": list(self.targets), "complete": list(self.complete)}
        if self.problems:
            out["problems"] = list(self.problems)
        if self.modules is not None:
            out["modules"] = modules_to_json(self.modules)
        if self.unread:
            out["unread"] = modules_to_json(self.unread)
        return out


def modules_to_json(modules: Iterable[tuple[tuple[str, ...], int]]) -> list[dict[str, Any]]:
    return [{"targets": list(t), "count": n} for t, n in modules]


def modules_from_json(value: Any) -> Modules | None:
    """The ``modules`` list of a cache or JSON entry; None when absent or not of that shape."""
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        if not isinstance(item, dict):
            return None
        targets, count = item.get("targets"), item.get("count")
        if not (
            isinstance(targets, list) and all(isinstance(t, str) for t in targets) and type(count) is int and count > 0
        ):
            return None
        out.append((tuple(targets), count))
    return tuple(out)


@dataclass
class WheelTargets:
    """What a wheel (or an unpacked wheel directory) holds for which GPU targets.

    ``files`` are the facts decisions use: the binaries when they were audited, else the stamp.
    ``source`` says which: ``"stamp+binaries"`` (both, compared), ``"stamp"``, ``"binaries"``,
    or ``None`` when nothing could be read (then ``known`` is False).
    ``mismatch`` lists each way the stamp disagrees with the binaries; ``problems`` what could
    not be read (a corrupt stamp, a damaged binary, a missing audit).
    """

    path: Path
    name: str | None = None
    version: str | None = None
    stamped: bool = False
    audited: bool = False
    files: list[DeviceFile] = field(default_factory=list)
    stamp_files: list[DeviceFile] | None = None
    mismatch: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    known: bool = True

    @property
    def source(self) -> str | None:
        if not self.known:
            return None
        if self.stamped and self.audited:
            return "stamp+binaries"
        return "stamp" if self.stamped else "binaries"

    @property
    def targets(self) -> list[str]:
        """Every target with code in some file (sorted, unique)."""
        return sorted_names({t for f in self.files for t in f.targets})

    @property
    def complete(self) -> list[str]:
        """The targets every device file covers completely."""
        if not self.files:
            return []
        common = set(self.files[0].complete)
        for f in self.files[1:]:
            common &= set(f.complete)
        return sorted_names(common)

    @property
    def has_device_code(self) -> bool:
        return bool(self.files)

    def verdict(
        self, device: GpuTarget | str, *, generic_ok: bool | None = True, strict: bool = False
    ) -> tuple[str, str | None]:
        """(``ok`` | ``fails`` | ``unknown``, reason) for one device. The reason of an ``ok``
        is a note (kernel modules for other GPUs), or None. ``strict``: every kernel module
        of every file must load on the device, whatever its vendor's loader does."""
        if not self.known:
            return UNKNOWN, "; ".join(self.problems) or "nothing readable says what this wheel holds"
        worst, reasons, notes = OK, list[str | None](), list[str]()
        for f in self.files:
            status, reason = file_verdict(f, device, generic_ok, strict=strict)
            if status == OK and reason:
                notes.append(reason)
            if status == FAILS:
                if worst != FAILS:
                    reasons = []
                worst = FAILS
                reasons.append(reason)
            elif status == UNKNOWN and worst != FAILS:
                worst = UNKNOWN
                reasons.append(reason)
        if worst == OK:
            return OK, "; ".join(notes) or None
        return worst, ("; ".join(r for r in reasons if r) or None)

    def serves(self, device: GpuTarget | str, *, generic_ok: bool | None = True, strict: bool = False) -> bool:
        return self.verdict(device, generic_ok=generic_ok, strict=strict)[0] == OK

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "name": self.name,
            "version": self.version,
            "stamped": self.stamped,
            "audited": self.audited,
            "source": self.source,
            "targets": self.targets,
            "complete": self.complete,
            "files": {f.path: f.to_json() for f in self.files},
            "stamp_mismatch": list(self.mismatch),
            "problems": list(self.problems),
        }


@lru_cache(maxsize=4096)
def _name_key(name: str) -> tuple[int, tuple[object, ...], str]:
    try:
        return (0, target_sort_key(parse_target(name)), name)
    except UnknownTargetError:
        return (1, (), name)


def sorted_names(names: Iterable[str]) -> list[str]:
    """Target names in the stable target order; names the table does not know go last."""
    return sorted(set(names), key=_name_key)


def _why_not(code: str, device: GpuTarget | str, generic_ok: bool) -> str | None:
    """compat.why_not, tolerant of target names the table does not know."""
    try:
        return why_not(code, device, generic_ok=generic_ok)
    except UnknownTargetError:
        dev = str(device).split(":")[0]
        proc = code.split(":")[0]
        if proc == dev:
            return None
        return f"{code} is for {proc}, the device is {dev}"


def _damaged(f: DeviceFile) -> str:
    more = f" (and {len(f.problems) - 1} more problems)" if len(f.problems) > 1 else ""
    return f"{f.path} could not be read completely: {f.problems[0]}{more}"


def _module_loads(targets: Iterable[str], device: GpuTarget | str, generic_ok: bool | None) -> bool | None:
    """Whether a module with these targets has code that loads on ``device``: None when only
    generic code would and the host's ROCm version is not known."""
    generic = False
    for code in targets:
        if _why_not(code, device, True) is None:
            if not code.endswith("-generic") or generic_ok:
                return True
            generic = True
    return None if generic and generic_ok is None else False


def _per_module_loading(device: GpuTarget | str) -> bool:
    return vendor_of(str(device).split(":")[0]).per_module_loading


def file_verdict(
    f: DeviceFile, device: GpuTarget | str, generic_ok: bool | None, *, strict: bool = False
) -> tuple[str, str | None]:
    """(status, reason) for one file; the reason of an ``ok`` is a note, or None.

    Modules that could not be read (``unread``: a zstd-compressed cubin without a decoder, a
    stub or kernels) count only where they could change the answer: one whose targets are
    known and load here changes nothing; one whose targets do not load here is either a stub or
    kernels for other GPUs; one whose targets are not known could be anything."""
    if f.modules is None or f.problems:
        return _complete_verdict(f, device, generic_ok)
    judged = [(targets, count, _module_loads(targets, device, generic_ok)) for targets, count in f.modules]
    n = {True: 0, False: 0, None: 0}
    for _targets, count, loads in judged:
        n[loads] += count
    unknown = sum(count for targets, count in f.unread if not targets)
    lacking = sum(count for targets, count in f.unread if targets and not _module_loads(targets, device, generic_ok))
    total = n[True] + n[False] + n[None]
    dev = str(device).split(":")[0]
    unread = unknown + lacking
    seen = sorted_names({t for targets, _ in f.unread for t in targets})
    cannot_read = (
        (
            f"{unread:,} code module{'s' if unread != 1 else ''}"
            + (f" for {', '.join(seen)}" if seen else "")
            + " could not be read (the audit says why)"
        )
        if unread
        else ""
    )
    lenient = not strict and _per_module_loading(device)
    if n[True] == total:
        if not unread:
            return OK, (None if total else f"{f.path} holds no kernels (device-link stubs only)")
        if lenient and total:  # a stub, or kernels for other GPUs: neither is launched here
            return OK, f"{f.path}: {cannot_read}; every kernel module that was read has code for {dev}"
        return UNKNOWN, f"{f.path}: {cannot_read}"
    if n[True] == 0:
        if n[None] or any(t.endswith("-generic") for t in f.targets):
            return _complete_verdict(f, device, generic_ok)
        if unknown:
            return UNKNOWN, f"{f.path}: no kernel module that was read has code for {dev}; {cannot_read}"
        return _none_loads(f, device)
    others = sorted_names({t for targets, _count, loads in judged if loads is not True for t in targets})
    what = (
        f"{f.path}: {n[True]:,} of {total:,} kernel modules have code for {dev}; "
        f"{total - n[True]:,} hold only {', '.join(others) or 'other code'}"
    )
    if unread:
        what += f"; {cannot_read}"
    if not lenient:
        return (FAILS if n[False] else UNKNOWN), what
    return OK, what + " (per-GPU kernels: a library that picks its kernels by the GPU launches none of them here)"


def _none_loads(f: DeviceFile, device: GpuTarget | str) -> tuple[str, str | None]:
    dev = str(device)
    proc = dev.split(":")[0]
    close = sorted({r for code in f.targets if code.split(":")[0] == proc for r in [_why_not(code, device, True)] if r})
    if close:
        return FAILS, f"{f.path}: " + "; ".join(close)
    return FAILS, f"{f.path} has code for {', '.join(f.complete or f.targets)}, not for {proc}"


def _complete_verdict(f: DeviceFile, device: GpuTarget | str, generic_ok: bool | None) -> tuple[str, str | None]:
    dev = str(device)
    if not f.complete:
        if f.problems:
            return UNKNOWN, _damaged(f)
        have = ", ".join(f.targets) or "no target"
        return FAILS, f"{f.path}: no target has code for all of its kernels (found {have})"
    reasons, needs_generic = [], []
    for code in f.complete:
        reason = _why_not(code, device, True)
        if reason is None:
            if not code.endswith("-generic") or generic_ok:
                if f.problems:
                    return UNKNOWN, _damaged(f)
                return OK, None
            needs_generic.append(code)
        else:
            reasons.append((code, reason))
    if needs_generic:
        gen = ", ".join(needs_generic)
        if generic_ok is None:
            return UNKNOWN, (
                f"{f.path} has only generic code ({gen}) for {dev}; it loads with ROCm 6.4 or newer, "
                "and this host's ROCm version is not known"
            )
        return FAILS, f"{f.path}: {_why_not(needs_generic[0], device, False)}"
    if f.problems:
        return UNKNOWN, _damaged(f)
    proc = dev.split(":")[0]
    close = [r for code, r in reasons if code.split(":")[0] == proc]
    if close:
        return FAILS, f"{f.path}: " + "; ".join(close)
    return FAILS, f"{f.path} has code for {', '.join(f.complete)}, not for {proc}"
