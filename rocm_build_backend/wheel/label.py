"""A wheel's local version label: the targets it holds, as PEP 440 local segments.

``local_version`` merges targets into a version (``1.0`` -> ``1.0+gfx942``; ``target_label``
spells one target), ``label_targets`` reads them back out of one, and ``relabel`` replaces them
when a wheel's content changed (``thin``, ``split``). The build asks for it with the
``local-version`` setting (``builder/verify.py``, ``builder/flow.py``).

Pure: it reads no wheel and writes nothing; renaming a wheel is ``stamp.rewrite_wheel``'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from packaging.version import InvalidVersion, Version

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.gpu.targets import GpuTarget, parse_target, sort_targets

__all__ = ["label_targets", "local_version", "relabel", "target_label"]


def target_label(target: "GpuTarget | str") -> str:
    """One target as PEP 440 local-label segments (characters ``[a-z0-9.]``).

    The processor loses ``-`` and ``_`` (``gfx9-4-generic`` -> ``gfx94generic``, ``sm_90a`` ->
    ``sm90a``); each feature becomes its own segment after the processor, ``on`` for ``+``
    and ``off`` for ``-``: ``gfx90a:sramecc+:xnack-`` -> ``gfx90a.srameccon.xnackoff``. A
    segment that does not start with ``gfx``, ``sm`` or ``compute`` belongs to the target
    before it, so the label can be read back.
    """
    t = target if isinstance(target, GpuTarget) else parse_target(str(target))
    parts = [re.sub(r"[-_]", "", t.processor)]
    for feature in ("sramecc", "xnack"):
        mode = getattr(t, feature)
        if mode:
            parts.append(feature + ("on" if mode == "+" else "off"))
    return ".".join(parts)


def local_version(version: str, targets: Iterable[object]) -> str:
    """``version`` with the targets merged into its PEP 440 local label.

    ``1.0`` -> ``1.0+gfx942``; ``2.5.1+rocm6.2`` -> ``2.5.1+rocm6.2.gfx942``; several targets in
    the stable sorted order (``1.0+gfx90a.gfx942``); features as in ``target_label``. The
    result is normalized. It is idempotent: a label that already ends with these targets is
    left as it is. No targets: the version, normalized, unchanged.
    """
    try:
        parsed = Version(str(version))
    except InvalidVersion:
        raise RocmBuildBackendError(
            f"the project's version {version!r} is not a valid PEP 440 version",
            hint="fix the version, or turn off local-version",
        ) from None
    items = [t if isinstance(t, GpuTarget) else parse_target(str(t)) for t in targets]
    add = ".".join(target_label(t) for t in sort_targets(items)).split(".") if items else []
    if not add:
        return str(parsed)
    have = parsed.local.split(".") if parsed.local else []
    if have[len(have) - len(add) :] == add:
        return str(parsed)
    return str(Version(f"{parsed.public}+{'.'.join(have + add)}"))


# compiled (and kept by ``re``) when a label is read: not on every import
_TARGET_SEGMENT = r"(gfx[0-9a-z]+|sm[0-9]+[af]?|compute[0-9]+[af]?)"
_FEATURE_SEGMENT = r"(sramecc|xnack)(on|off)"


def label_targets(version: str) -> list[str]:
    """The target segments of a version's local label, as ``target_label`` wrote them
    (``1.0+rocm6.2.gfx90a.xnackoff.gfx942`` -> ``["gfx90a.xnackoff", "gfx942"]``)."""
    try:
        local = Version(str(version)).local or ""
    except InvalidVersion:
        return []
    out: list[str] = []
    after_target = False
    for seg in local.split(".") if local else []:
        if re.fullmatch(_TARGET_SEGMENT, seg):
            out.append(seg)
            after_target = True
        elif after_target and re.fullmatch(_FEATURE_SEGMENT, seg):
            out[-1] += "." + seg
        else:
            after_target = False
    return out


def relabel(version: str, targets: Iterable[object]) -> str:
    """``version`` whose local label names ``targets`` instead of the targets it named:
    ``1.0+gfx908.gfx90a`` -> ``1.0+gfx908``; ``2.5+rocm6.2.gfx90a`` -> ``2.5+rocm6.2.gfx942``;
    segments that are not targets stay in their order. For a wheel whose content changed
    (``thin``, ``split``): the label says what the wheel holds after the change."""
    local_version(version, [])  # a version that is not PEP 440 is refused here
    parsed = Version(str(version))
    kept: list[str] = []
    skipping = False
    for seg in (parsed.local or "").split(".") if parsed.local else []:
        if re.fullmatch(_TARGET_SEGMENT, seg):
            skipping = True
            continue
        if skipping and re.fullmatch(_FEATURE_SEGMENT, seg):
            continue
        skipping = False
        kept.append(seg)
    base = f"{parsed.public}+{'.'.join(kept)}" if kept else parsed.public
    return local_version(base, targets)
