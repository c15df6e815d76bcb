"""Wheels in pip's and uv's caches whose device code does not fit these GPUs: list and purge.

Neither frontend puts the GPU into its cache key (pip keys built wheels by the source's URL and
the interpreter, uv by the source and its revision), and no build hook runs on a cache hit, so
a wheel built for one GPU is handed back on another.
This module finds such wheels and removes exactly those.

Where the caches are is ``cache_dirs.py``. pip keeps built wheels as
``wheels/<h0:2>/<h2:4>/<h4:6>/<h6:>/<name>-<ver>-<tags>.whl`` beside an ``origin.json``; its
``http-v2/`` (older: ``http/``) holds downloads as cached HTTP responses, keyed by URL: they
are not wheel files and are handed back only for the same URL, so a per-target index already
keeps them apart; this module counts them and leaves them alone. uv unzips every wheel it
installs once under ``archive-v0/<id>/`` (a ``.dist-info`` inside); ``wheels-v*/``
(downloads) and ``sdists-v*/`` (older: ``built-wheels-v*/``; built from source, with the built
``.whl`` beside) point at those archives with symlinks named after the wheel and with small
pointer files (``.rev``, ``.http``) that hold the archive's id.

An entry *misfits* when its device code does not load on every given target (the rules of
``check``: stamp, cross-checked with the binaries). Purging removes, for pip, the wheel file
(and its ``origin.json`` when no other wheel shares the folder); for uv, every symlink and
pointer that leads to the archive, the built ``.whl`` beside such a link, then the archive
itself, so uv never follows a pointer into a half-removed folder. Entries that cannot be read
are reported and kept. A path that cannot be removed (read-only cache) is reported, not raised.
It must not remove anything it has not judged a misfit, nor follow a link out of the cache.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.gpu.targets import GpuTarget, parse_target, parse_targets
from rocm_build_backend.wheel.cache.ask import pip_command, pip_wheels
from rocm_build_backend.wheel.cache.dirs import caches_to_read, classify_cache, default_cache_dirs  # noqa: F401
from rocm_build_backend.wheel.cache.report import CacheEntry, CacheReport
from rocm_build_backend.wheel.facts import FAILS, OK, UNKNOWN, WheelTargets
from rocm_build_backend.wheel.reader import read_regular_file, wheel_targets

__all__ = [
    "CacheEntry",
    "CacheReport",
    "classify_cache",
    "default_cache_dirs",
    "list_cache",
    "purge_cache",
]

_TOKEN = re.compile(rb"[A-Za-z0-9_-]{8,64}")
_POINTER_SUFFIXES = (".rev", ".http", ".msgpack")
_MAX_POINTER = 1 << 20


# --------------------------------------------------------------------------------------------
# reading entries


def _judge(
    entry: CacheEntry, read: Callable[[], WheelTargets], targets: Sequence[GpuTarget], generic_ok: bool | None
) -> None:
    try:
        facts = read()
    except RocmBuildBackendError as exc:
        entry.status, entry.reasons = UNKNOWN, [exc.message]
        return
    entry.targets = facts.targets
    if facts.name and facts.version and entry.tool == "uv":
        entry.label = f"{facts.name}-{facts.version}"
    statuses, reasons = [], []
    for t in targets:
        status, reason = facts.verdict(t, generic_ok=generic_ok)
        statuses.append(status)
        if status != OK and reason:
            reasons.append(f"{t}: {reason}")
    if not targets:
        statuses = [OK if facts.known and not facts.has_device_code else UNKNOWN]
    entry.status = FAILS if FAILS in statuses else UNKNOWN if UNKNOWN in statuses else OK
    entry.reasons = reasons
    if facts.mismatch:
        entry.reasons.append("the stamp disagrees with the binaries: " + "; ".join(facts.mismatch))


def _pip_wheels(cache: Path, env: Mapping[str, str]) -> list[Path]:
    """pip's built wheels in ``cache``: as ``pip cache list --format=abspath`` lists them; where
    this Python has no pip (or it fails), the ``wheels/**/*.whl`` layout read here."""
    pip = pip_command(Path(sys.prefix), sys.platform)
    found = pip_wheels(pip, cache, env) if pip else None
    if found is not None:
        return found
    wheels_dir = cache / "wheels"
    return sorted(wheels_dir.rglob("*.whl")) if wheels_dir.is_dir() else []


def _scan_pip(
    cache: Path, targets: Sequence[GpuTarget], generic_ok: bool | None, audit: bool, env: Mapping[str, str]
) -> tuple[list[CacheEntry], str]:
    entries = []
    found = _pip_wheels(cache, env)
    for whl in found:
        if not whl.is_file():
            continue
        e = CacheEntry("pip", cache, whl, whl.name, remove=[whl])
        origin = whl.parent / "origin.json"
        if origin.is_file() and not [w for w in whl.parent.glob("*.whl") if w != whl]:
            e.remove.append(origin)
        _judge(e, partial(wheel_targets, whl, audit=audit), targets, generic_ok)
        entries.append(e)
    http = 0
    for name in ("http-v2", "http"):
        if (cache / name).is_dir():
            http += sum(1 for p in (cache / name).rglob("*") if p.is_file() and not p.name.endswith(".body"))
    summary = f"{len(entries)} built wheel{'s' if len(entries) != 1 else ''}"
    if http:
        summary += f"; {http} cached HTTP response{'s' if http != 1 else ''} (keyed by URL, left alone)"
    return entries, summary


def _walk_refs(bucket: Path) -> Iterator[tuple[str, Path]]:
    """Every symlink, small pointer file and built wheel under a uv bucket (sources skipped)."""
    for dirpath, dirnames, filenames in os.walk(bucket):
        here = Path(dirpath)
        for name in sorted(dirnames + filenames):
            if os.path.islink(here / name):
                yield "link", here / name
        dirnames[:] = sorted(d for d in dirnames if d != "src" and not os.path.islink(here / d))
        for name in sorted(filenames):
            p = here / name
            if os.path.islink(p):
                continue
            if name.endswith(_POINTER_SUFFIXES):
                yield "pointer", p
            elif name.endswith(".whl"):
                yield "wheel", p


def _uv_refs(cache: Path) -> tuple[dict[str, Path], dict[str, list[Path]], list[Path]]:
    """uv's unpacked archives (id -> folder), what points at each, and built wheels beside them."""
    archives: dict[str, Path] = {}
    for bucket in sorted(cache.glob("archive-v*")):
        if bucket.is_dir():
            for a in sorted(bucket.iterdir()):
                if a.is_dir() and not a.is_symlink():
                    archives[a.name] = a
    refs: dict[str, list[Path]] = {k: [] for k in archives}
    built: list[Path] = []
    real_archives: dict[str, str] = {}
    for k, a in archives.items():
        try:
            real_archives[os.path.realpath(a)] = k
        except OSError:
            pass
    for bucket in sorted(cache.iterdir()) if cache.is_dir() else []:
        if not re.fullmatch(r"(wheels|sdists|built-wheels)-v\d+", bucket.name) or not bucket.is_dir():
            continue
        for kind, p in _walk_refs(bucket):
            if kind == "link":
                key = real_archives.get(os.path.realpath(p))
                if key is not None:
                    refs[key].append(p)
                    sibling = p.with_name(p.name + ".whl")
                    if sibling.is_file():
                        refs[key].append(sibling)
            elif kind == "pointer":
                try:
                    data = read_regular_file(p, _MAX_POINTER, str(p))
                except RocmBuildBackendError:
                    continue  # a FIFO, a device, too large: not one of uv's pointers
                for tok in set(_TOKEN.findall(data)):
                    key = tok.decode("ascii")
                    if key in refs:
                        refs[key].append(p)
                        lock = p.with_suffix(".lock")
                        if lock.is_file():
                            refs[key].append(lock)
            else:
                built.append(p)
    return archives, refs, built


def _scan_uv(
    cache: Path, targets: Sequence[GpuTarget], generic_ok: bool | None, audit: bool, env: Mapping[str, str]
) -> tuple[list[CacheEntry], str]:
    """uv's unpacked wheels and built wheel files. Read from the layout: uv has no command that
    lists its cache's entries (``uv cache`` has ``dir``, ``clean``, ``prune`` and ``size``)."""
    archives, refs, built = _uv_refs(cache)
    entries = []
    claimed = {p for ps in refs.values() for p in ps}
    for key, a in archives.items():
        if not any(c.name.endswith(".dist-info") for c in a.iterdir() if c.is_dir()):
            continue
        e = CacheEntry("uv", cache, a, a.name, remove=sorted(set(refs[key])) + [a])
        _judge(e, partial(wheel_targets, a, audit=audit), targets, generic_ok)
        entries.append(e)
    for whl in built:
        if whl in claimed:
            continue
        e = CacheEntry("uv", cache, whl, whl.name, remove=[whl])
        _judge(e, partial(wheel_targets, whl, audit=audit), targets, generic_ok)
        entries.append(e)
    n_built = sum(1 for e in entries if e.path.suffix == ".whl")
    summary = f"{len(entries) - n_built} unpacked wheel{'s' if len(entries) - n_built != 1 else ''}"
    if n_built:
        summary += f", {n_built} built wheel file{'s' if n_built != 1 else ''} without an unpacked copy"
    return entries, summary


def _as_targets(targets: Sequence[GpuTarget | str] | str) -> list[GpuTarget]:
    if isinstance(targets, str):
        return parse_targets(targets)
    return [t if isinstance(t, GpuTarget) else parse_target(str(t)) for t in targets]


def list_cache(
    targets: Sequence[GpuTarget | str] | str,
    *,
    cache_dirs: Sequence[str | Path] | None = None,
    tools: Sequence[str] = ("pip", "uv"),
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    generic_ok: bool | None = True,
    audit: bool = True,
    notes: Sequence[str] = (),
) -> CacheReport:
    """Every wheel in the caches, judged against ``targets`` (all must load for an entry to fit).

    ``cache_dirs``: folders given on the command line (each recognised as pip's or uv's by its
    layout); default: where pip and uv keep theirs (``cache_dirs.find_caches``: their variables,
    configuration files and defaults). ``tools`` limits which caches are read.
    """
    devices = _as_targets(targets)
    report = CacheReport([str(t) for t in devices], notes=list(notes))
    for loc in caches_to_read(cache_dirs, tools, env, home):
        tool, path = loc.tool, loc.path
        report.sources.append(loc.source)
        if not path.is_dir():
            report.caches.append((tool, path, "not found"))
            continue
        scan = _scan_pip if tool == "pip" else _scan_uv
        try:
            entries, summary = scan(path, devices, generic_ok, audit, os.environ if env is None else env)
        except OSError as exc:
            report.caches.append((tool, path, f"cannot be read: {exc.strerror or exc}"))
            continue
        report.caches.append((tool, path, summary))
        report.entries.extend(entries)
    return report


def _remove_path(p: Path) -> None:
    if p.is_symlink() or not p.is_dir():
        p.unlink()
        return

    def fail(func: object, path: object, exc_info: Any) -> None:
        raise exc_info[1] if isinstance(exc_info, tuple) else exc_info

    if sys.version_info < (3, 12):
        shutil.rmtree(p, onerror=fail)
    else:
        shutil.rmtree(p, onexc=fail)


def _prune_empty(start: Path, stop: Path) -> None:
    parent = start
    while parent != stop and stop in parent.parents:
        try:
            parent.rmdir()
        except OSError:
            return
        parent = parent.parent


def purge_cache(
    targets: Sequence[GpuTarget | str] | str,
    *,
    yes: bool,
    cache_dirs: Sequence[str | Path] | None = None,
    tools: Sequence[str] = ("pip", "uv"),
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    generic_ok: bool | None = True,
    audit: bool = True,
    notes: Sequence[str] = (),
) -> CacheReport:
    """Remove the cached wheels that misfit ``targets``; without ``yes`` only say what would go.

    Removed here, path by path, not through the tools: neither can target one entry.
    ``pip cache remove PATTERN`` matches wheel *file names* in every hash folder, and the
    same-named wheel built for another GPU (from another source URL) is exactly what must stay;
    it also leaves ``origin.json``. ``uv cache clean PACKAGE`` removes every entry of the
    package, every version and build. Both would remove wheels this command judged to fit.
    """
    report = list_cache(
        targets,
        cache_dirs=cache_dirs,
        tools=tools,
        env=env,
        home=home,
        generic_ok=generic_ok,
        audit=audit,
        notes=notes,
    )
    report.purge, report.yes = True, yes
    for e in report.entries:
        if not e.misfits:
            continue
        if not yes:
            e.action = "would remove"
            continue
        for p in e.remove:
            try:
                if p.exists() or p.is_symlink():
                    _remove_path(p)
            except OSError as exc:
                e.errors.append(f"cannot remove {p}: {exc.strerror or exc}")
                if p == e.path:
                    break
        e.action = "not removed" if e.errors else "removed"
        if not e.errors:  # drop the folders left empty, never a bucket itself
            for p in sorted({q.parent for q in e.remove}):
                try:
                    bucket = e.cache_dir / p.relative_to(e.cache_dir).parts[0]
                except (ValueError, IndexError):
                    continue
                _prune_empty(p, bucket)
    return report
