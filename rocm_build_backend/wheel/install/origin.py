"""Where each wheel ``pip wheel`` collected came from (``index``, ``cache`` or ``built``), told
by pip's public interfaces, never by its output text.

- What pip builds from source: its installation report (``pip install --dry-run --report``,
  ``sources.pip_report``). An item whose ``download_info`` is not a wheel is built from its
  sdist, folder or VCS checkout, or taken from pip's wheel cache: pip reports a cached build by
  the source it was built from (checked with pip 23.0 and 26.3).
- What pip's wheel cache held before the collect: ``pip cache list --format=abspath``
  (``wheel.cache.ask.pip_wheels``), each file's size and mtime kept (``cached_before``).
- What the collect brought: the files in ``pip wheel --wheel-dir DIR``.

A wheel of a project the report builds from source is ``cache`` when its bytes are those of a
wheel the cache listed before the collect (and that has not changed since), else ``built``;
any other wheel is ``index`` (downloaded, found through ``--find-links``, or a wheel file named
on the command line). It decides nothing about loading, and removes nothing.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from rocm_build_backend.wheel.cache.ask import pip_wheels
from rocm_build_backend.wheel.cache.dirs import default_cache_dirs

_OFF = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Listed:
    """One wheel in pip's wheel cache as it was listed: where, and its size and mtime then."""

    path: Path
    size: int
    mtime_ns: int


def pip_cache_dir(options: Sequence[str], env: Mapping[str, str]) -> Path | None:
    """The cache folder of a ``pip wheel`` with ``options`` (``--cache-dir``, else pip's own);
    None when the cache is off (``--no-cache-dir``, ``PIP_NO_CACHE_DIR``)."""
    for i, arg in enumerate(options):
        if arg == "--no-cache-dir":
            return None
        if arg == "--cache-dir" and i + 1 < len(options):
            return Path(options[i + 1])
        if arg.startswith("--cache-dir="):
            return Path(arg.split("=", 1)[1])
    if env.get("PIP_NO_CACHE_DIR", "").lower() in _OFF:
        return None
    return default_cache_dirs(env)["pip"]


def cached_before(python: str, cache: Path | None, env: Mapping[str, str]) -> dict[str, list[Listed]]:
    """File name -> the wheels of that name in pip's wheel cache now, as ``python``'s pip lists
    them (none when the cache is off, missing, or pip cannot say). A relative ``cache`` is taken
    from this process's working folder, as the collect's pip takes it."""
    if cache is None or not cache.is_dir():
        return {}
    cache = Path(os.path.abspath(cache))  # pip cache list runs in the cache folder
    out: dict[str, list[Listed]] = {}
    for path in pip_wheels([python, "-m", "pip"], cache, env) or []:
        try:
            st = path.stat()
        except OSError:
            continue
        out.setdefault(path.name, []).append(Listed(path, st.st_size, st.st_mtime_ns))
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _same_bytes(wheel: Path, listed: Listed) -> bool:
    try:
        st = os.stat(listed.path)
        if (st.st_size, st.st_mtime_ns) != (listed.size, listed.mtime_ns) or st.st_size != wheel.stat().st_size:
            return False  # changed since it was listed, or another size: not the cached wheel
        return _sha256(listed.path) == _sha256(wheel)
    except OSError:
        return False


def origin_of(wheel: Path, name: str, from_source: Collection[str], cached: Mapping[str, Sequence[Listed]]) -> str:
    """``cache``, ``built`` or ``index`` for ``wheel`` of project ``name`` (see the module);
    ``from_source``: the canonical names of the projects pip builds from source in this
    collect; ``cached``: ``cached_before``'s answer."""
    if canonicalize_name(name) not in from_source:
        return "index"
    if any(_same_bytes(wheel, listed) for listed in cached.get(wheel.name, ())):
        return "cache"
    return "built"
