"""Where pip and uv keep their caches, and telling one cache's layout from the other's.

``--cache-dir`` on the command line wins; else each tool's own rules:

- pip: ``PIP_CACHE_DIR``, else ``$XDG_CACHE_HOME/pip``, else ``~/.cache/pip`` (macOS
  ``~/Library/Caches/pip``, Windows ``%LOCALAPPDATA%\\pip\\Cache``).
- uv: ``UV_CACHE_DIR``, else ``$XDG_CACHE_HOME/uv``, else ``~/.cache/uv`` (Windows
  ``%LOCALAPPDATA%\\uv\\cache``).

A folder given on the command line is recognised as pip's or uv's by its layout
(``classify_cache``).

It reads folder names only; it judges no wheel and removes nothing.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from rocm_build_backend.errors import RocmBuildBackendError


def default_cache_dirs(
    env: Mapping[str, str] | None = None, *, home: Path | None = None, platform: str | None = None
) -> dict[str, Path]:
    """pip's and uv's cache folders as each tool would pick them (variables, then defaults)."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    home = Path(env.get("HOME") or Path.home()) if home is None else Path(home)
    xdg = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else home / ".cache"
    local = Path(env.get("LOCALAPPDATA") or home / "AppData" / "Local")
    if env.get("PIP_CACHE_DIR"):
        pip = Path(os.path.expanduser(env["PIP_CACHE_DIR"]))
    elif platform.startswith("win"):
        pip = local / "pip" / "Cache"
    elif platform == "darwin":
        pip = home / "Library" / "Caches" / "pip"
    else:
        pip = xdg / "pip"
    if env.get("UV_CACHE_DIR"):
        uv = Path(os.path.expanduser(env["UV_CACHE_DIR"]))
    elif platform.startswith("win"):
        uv = local / "uv" / "cache"
    else:
        uv = xdg / "uv"
    return {"pip": pip, "uv": uv}


def classify_cache(path: Path) -> str | None:
    """``"pip"`` or ``"uv"`` from a cache folder's layout; None when it looks like neither."""
    path = Path(path)
    try:
        names = {p.name for p in path.iterdir()}
    except OSError:
        return None
    if any(re.fullmatch(r"(archive|wheels|sdists|built-wheels|simple|interpreter)-v\d+", n) for n in names):
        return "uv"
    if names & {"wheels", "http", "http-v2", "selfcheck"}:
        return "pip"
    return None


def caches_to_read(
    cache_dirs: Sequence[str | Path] | None,
    tools: Sequence[str],
    env: Mapping[str, str] | None,
    home: Path | None,
) -> list[tuple[str, Path]]:
    """(tool, folder) for each cache to read: the folders given, else each tool's own."""
    if cache_dirs:
        out = []
        for d in cache_dirs:
            d = Path(d)
            if not d.is_dir():
                raise RocmBuildBackendError(f"no cache folder at {d}", hint="check the --cache-dir path")
            kind = classify_cache(d)
            if kind is None:
                raise RocmBuildBackendError(
                    f"{d} does not look like a pip or uv cache (no wheels/, http-v2/, archive-v0/, ...)",
                    hint="pass the folder pip or uv was given as --cache-dir",
                )
            if kind in tools:
                out.append((kind, d))
        return out
    found = default_cache_dirs(env, home=home)
    return [(tool, found[tool]) for tool in tools if tool in found]
