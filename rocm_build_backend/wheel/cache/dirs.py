"""Where pip and uv keep their caches, and telling one cache's layout from the other's.

``--cache-dir`` on the command line wins; else each tool is asked through its public commands
(``ask.py``: ``uv cache dir``; ``pip cache dir`` with ``pip config list`` for the sections
``pip install``, ``pip wheel`` and ``pip download`` read), and its variables and files are read
(``find_caches``) where it cannot answer:

- pip: ``PIP_CACHE_DIR``; else ``cache-dir`` in its configuration files (site-wide, the user's
  unless ``PIP_CONFIG_FILE`` names a file, ``sys.prefix/pip.conf``, then ``PIP_CONFIG_FILE``;
  ``[install]``, ``[wheel]`` and ``[download]`` over ``[global]``), else ``~/.cache/pip``
  (``$XDG_CACHE_HOME``; macOS ``~/Library/Caches/pip``; Windows ``%LOCALAPPDATA%\\pip\\Cache``).
- uv: ``UV_CACHE_DIR``; else ``cache-dir`` in the project's ``uv.toml`` or ``pyproject.toml``
  ``[tool.uv]`` (nearest the working folder), the user's ``~/.config/uv/uv.toml``, the
  system's ``/etc/uv/uv.toml`` (``UV_CONFIG_FILE`` replaces these, ``UV_NO_CONFIG`` skips
  them), else ``~/.cache/uv`` (Windows ``%LOCALAPPDATA%\\uv\\cache``).

The tool's answer wins where it gives one; the files are still read, for two reasons: a tool
is not always installed where this runs (its cache may still be full: pip of another Python,
uv not on PATH), and neither tool says *which* variable or file named its folder, which the
report shows (a source the tool confirms reads "... (pip agrees)"). The files are the only
answer for a pretend platform, home or root (the tests' worlds), which no tool can be asked
about. The integration tests hold both paths to the real tools' answers.

A folder given on the command line is recognised as pip's or uv's by its layout
(``classify_cache``): no tool has a command that says whether a folder is its cache.

It reads folder names only; it judges no wheel and removes nothing.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

import configparser

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.wheel.cache.ask import PipAnswer, ask_both, pip_command, uv_command
from rocm_build_backend.wheel.reader import read_regular_file


@dataclass(frozen=True)
class CacheLocation:
    """One cache folder a tool writes to, and what says so (a variable, a config file, a default)."""

    tool: str  # "pip" | "uv"
    path: Path
    source: str


def _home(env: Mapping[str, str], home: Path | None) -> Path:
    return Path(env.get("HOME") or Path.home()) if home is None else Path(home)


def _expanduser(value: str, home: Path) -> Path:
    """``~`` and ``~/...`` against ``home`` (the environment's HOME, as the tools see it)."""
    if value == "~" or value.startswith(("~/", "~" + os.sep)):
        return home / value[2:]
    return Path(os.path.expanduser(value))


def _xdg(env: Mapping[str, str], name: str, default: Path) -> Path:
    value = env.get(name, "")
    return Path(value) if os.path.isabs(value) else default


def _xdg_dirs(env: Mapping[str, str], root: Path) -> list[Path]:
    dirs = [Path(d) for d in env.get("XDG_CONFIG_DIRS", "").split(os.pathsep) if os.path.isabs(d)]
    return dirs or [root / "etc" / "xdg"]


def _default_dirs(env: Mapping[str, str], home: Path, platform: str) -> dict[str, Path]:
    """Where pip and uv keep their caches when nothing is configured."""
    xdg = _xdg(env, "XDG_CACHE_HOME", home / ".cache")
    local = Path(env.get("LOCALAPPDATA") or home / "AppData" / "Local")
    if platform.startswith("win"):
        return {"pip": local / "pip" / "Cache", "uv": local / "uv" / "cache"}
    if platform == "darwin":
        return {"pip": home / "Library" / "Caches" / "pip", "uv": xdg / "uv"}
    return {"pip": xdg / "pip", "uv": xdg / "uv"}


def _read_config(path: Path) -> str | None:
    """A configuration file's text (a regular file, 1 MiB at most); None when there is none."""
    if not os.path.lexists(path):
        return None
    try:
        return read_regular_file(path, 1 << 20, str(path)).decode("utf-8", "replace")
    except RocmBuildBackendError:
        return None


# ------------------------------------------------------------------------------------- pip


def _pip_config_files(env: Mapping[str, str], home: Path, platform: str, prefix: Path, root: Path) -> list[Path]:
    """pip's configuration files, lowest priority first, as pip 23 and newer load them:
    global (site-wide), user (not when ``PIP_CONFIG_FILE`` names a file that exists), site
    (``sys.prefix``), then ``PIP_CONFIG_FILE``. ``PIP_CONFIG_FILE=/dev/null``: none at all."""
    name = "pip.ini" if platform.startswith("win") else "pip.conf"
    env_file = env.get("PIP_CONFIG_FILE")
    if env_file == os.devnull:
        return []
    if platform.startswith("win"):
        programdata = Path(env.get("PROGRAMDATA") or "C:/ProgramData")
        appdata = Path(env.get("APPDATA") or home / "AppData" / "Roaming")
        global_files, user = [programdata / "pip" / name], [home / "pip" / name, appdata / "pip" / name]
    elif platform == "darwin":
        support = home / "Library" / "Application Support" / "pip"
        global_files = [root / "Library" / "Application Support" / "pip" / name]
        user = [home / ".pip" / name, (support if support.is_dir() else home / ".config" / "pip") / name]
    else:
        global_files = [d / "pip" / name for d in _xdg_dirs(env, root)] + [root / "etc" / name]
        user = [home / ".pip" / name, _xdg(env, "XDG_CONFIG_HOME", home / ".config") / "pip" / name]
    files = list(global_files)
    if not (env_file and os.path.exists(env_file)):
        files += user
    files.append(prefix / name)
    if env_file:
        files.append(Path(env_file))
    return files


def _pip_values(files: list[Path]) -> dict[tuple[str, str], tuple[str, str]]:
    """(section, key) -> (value, file) over pip's files, a later file winning, as pip merges them."""
    merged: dict[tuple[str, str], tuple[str, str]] = {}
    for path in files:
        text = _read_config(path)
        if text is None:
            continue
        parser = configparser.RawConfigParser()
        try:
            parser.read_string(text, source=str(path))
        except configparser.Error:
            continue
        for section in parser.sections():
            for key, value in parser.items(section):
                merged[(section, key.lower().replace("_", "-").removeprefix("--"))] = (value, str(path))
    return merged


_PIP_COMMANDS = ("install", "wheel", "download")


def pip_cache_dirs_by_command(
    env: Mapping[str, str], home: Path, platform: str, prefix: Path, root: Path = Path("/")
) -> dict[str, CacheLocation]:
    """Where ``pip install``, ``pip wheel`` and ``pip download`` keep their caches (each reads
    ``[global]`` and its own section); ``PIP_CACHE_DIR`` overrides every file. Read from the
    files: pip has no command that answers for another command's section (``ask.py``)."""
    if env.get("PIP_CACHE_DIR"):
        loc = CacheLocation("pip", _expanduser(env["PIP_CACHE_DIR"], home), "PIP_CACHE_DIR")
        return dict.fromkeys(_PIP_COMMANDS, loc)
    values = _pip_values(_pip_config_files(env, home, platform, prefix, root))
    out: dict[str, CacheLocation] = {}
    for command in _PIP_COMMANDS:
        for section in (command, "global"):
            value, where = values.get((section, "cache-dir"), ("", ""))
            if value:
                out[command] = CacheLocation("pip", _expanduser(value, home), f"{where} [{section}] cache-dir")
                break
        else:  # platformdirs' user cache folder, as pip picks it; no pip command prints it when [cache] is set
            out[command] = CacheLocation("pip", _default_dirs(env, home, platform)["pip"], "pip's default")
    return out


def pip_cache_dirs(
    env: Mapping[str, str], home: Path, platform: str, prefix: Path, root: Path = Path("/")
) -> list[CacheLocation]:
    """``pip_cache_dirs_by_command``'s folders, each once, ``pip install``'s first."""
    out: list[CacheLocation] = []
    for loc in pip_cache_dirs_by_command(env, home, platform, prefix, root).values():
        if all(loc.path != o.path for o in out):
            out.append(loc)
    return out


# -------------------------------------------------------------------------------------- uv


def _uv_setting(path: Path, *, pyproject: bool) -> tuple[bool, str | None]:
    """(whether ``path`` holds uv settings, its ``cache-dir``) for a uv.toml or a pyproject.toml."""
    text = _read_config(path)
    if text is None:
        return False, None
    try:
        data: Any = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return False, None
    if pyproject:
        tool = data.get("tool")
        data = tool.get("uv") if isinstance(tool, dict) else None
        if not isinstance(data, dict):
            return False, None
    value = data.get("cache-dir")
    return True, value if isinstance(value, str) and value else None


def _uv_config_files(env: Mapping[str, str], home: Path, platform: str, cwd: Path, root: Path) -> list[Path]:
    """uv's settings files, highest priority first: the project's (the nearest ``uv.toml``, or
    ``pyproject.toml`` with ``[tool.uv]``, from the working folder up), the user's, the system's.
    ``UV_CONFIG_FILE`` replaces them all; ``UV_NO_CONFIG`` turns them off."""
    if env.get("UV_NO_CONFIG"):
        return []
    if env.get("UV_CONFIG_FILE"):
        return [cwd / env["UV_CONFIG_FILE"]]
    files: list[Path] = []
    for folder in [cwd, *cwd.parents]:
        if (folder / "uv.toml").is_file() or _uv_setting(folder / "pyproject.toml", pyproject=True)[0]:
            files.append(folder / "uv.toml" if (folder / "uv.toml").is_file() else folder / "pyproject.toml")
            break
    if platform.startswith("win"):
        files.append(Path(env.get("APPDATA") or home / "AppData" / "Roaming") / "uv" / "uv.toml")
        files.append(Path(env.get("PROGRAMDATA") or "C:/ProgramData") / "uv" / "uv.toml")
    else:
        files.append(_xdg(env, "XDG_CONFIG_HOME", home / ".config") / "uv" / "uv.toml")
        system = [d / "uv" / "uv.toml" for d in _xdg_dirs(env, root)] + [root / "etc" / "uv" / "uv.toml"]
        files.append(next((f for f in system if f.is_file()), system[-1]))
    return files


def uv_cache_dir(env: Mapping[str, str], home: Path, platform: str, cwd: Path, root: Path = Path("/")) -> CacheLocation:
    """Where uv keeps its cache: ``UV_CACHE_DIR``, else the first ``cache-dir`` in its settings
    files, else its default. A relative path is relative to the working folder and ``~`` is
    not expanded, as uv does."""
    if env.get("UV_CACHE_DIR"):
        return CacheLocation("uv", cwd / env["UV_CACHE_DIR"], "UV_CACHE_DIR")
    for path in _uv_config_files(env, home, platform, cwd, root):
        _found, value = _uv_setting(path, pyproject=path.name == "pyproject.toml")
        if value:
            where = f"{path} [tool.uv] cache-dir" if path.name == "pyproject.toml" else f"{path} cache-dir"
            return CacheLocation("uv", cwd / value, where)
    return CacheLocation("uv", _default_dirs(env, home, platform)["uv"], "uv's default")


def find_caches(
    env: Mapping[str, str] | None = None,
    *,
    home: Path | None = None,
    platform: str | None = None,
    cwd: Path | None = None,
    prefix: Path | None = None,
    root: Path = Path("/"),
    tools: Sequence[str] = ("pip", "uv"),
    ask: bool = True,
) -> list[CacheLocation]:
    """Every folder pip and uv keep a cache in, as they pick it: each installed tool asked
    (``ask.py``), else their variables, configuration files and defaults read here.

    ``cwd`` is where uv looks for a project's settings; ``prefix`` the Python whose
    ``pip.conf`` counts (``sys.prefix``) and whose pip is asked; ``root`` stands for ``/`` in
    the site-wide paths. A platform other than this one, a ``home`` other than the
    environment's HOME or a ``root`` other than ``/`` is a pretend world no tool can be asked
    about: then only the files are read, as with ``ask=False``.
    """
    real_env = os.environ if env is None else env
    real = ask and (
        platform in (None, sys.platform) and root == Path("/") and (home is None or str(home) == real_env.get("HOME"))
    )
    platform = sys.platform if platform is None else platform
    home = _home(real_env, home)
    cwd = Path.cwd() if cwd is None else Path(cwd)
    prefix = Path(sys.prefix) if prefix is None else Path(prefix)
    pip_read = pip_cache_dirs_by_command(real_env, home, platform, prefix, root) if "pip" in tools else {}
    uv_read = [uv_cache_dir(real_env, home, platform, cwd, root)] if "uv" in tools else []
    if not real:
        return _unique(list(pip_read.values()), cwd) + uv_read
    pip = pip_command(prefix, platform) if pip_read else None
    uv = uv_command(real_env) if uv_read else None
    pip_answer, uv_dir = ask_both(pip, uv, real_env, cwd)
    return _pip_asked(pip_answer, pip_read, home, cwd) + [_uv_asked(uv_dir, loc, cwd) for loc in uv_read]


def _same(a: Path, b: Path, cwd: Path) -> bool:
    return os.path.normpath(cwd / a) == os.path.normpath(cwd / b)


def _uv_asked(asked: Path | None, read: CacheLocation, cwd: Path) -> CacheLocation:
    """uv's own answer, named by the setting that gave it where the files agree."""
    if asked is None:  # uv is not on PATH, or failed: the files are all there is
        return read
    if _same(asked, read.path, cwd):
        return CacheLocation("uv", read.path, f"{read.source} (uv agrees)")
    return CacheLocation("uv", asked, "`uv cache dir`")


def _unique(locs: list[CacheLocation], cwd: Path) -> list[CacheLocation]:
    out: list[CacheLocation] = []
    for loc in locs:
        if all(not _same(loc.path, o.path, cwd) for o in out):
            out.append(loc)
    return out


def _pip_asked(answer: PipAnswer | None, read: dict[str, CacheLocation], home: Path, cwd: Path) -> list[CacheLocation]:
    """pip's own answers for ``pip install``, ``pip wheel`` and ``pip download``, in that order.

    A section's ``cache-dir`` comes from ``pip config list``; what none sets from ``pip cache
    dir``, unless ``[cache]`` sets one (then ``pip cache dir`` answers for itself only, and no
    command of pip says its default folder: the default read here stands). Without pip (or
    when ``pip config list`` fails) the files read here are the answer.
    """
    if answer is None:  # no pip in that Python, or it failed: the files are all there is
        return _unique(list(read.values()), cwd)
    sections = answer.sections
    out: list[CacheLocation] = []
    for command, ours in read.items():
        section = next((s for s in (":env:", command, "global") if s in sections), None)
        if section is not None:
            path, said = cwd / _expanduser(sections[section], home), f"`pip config list`: [{section}] cache-dir"
        elif "cache" not in sections and answer.cache_dir is not None:
            path, said = answer.cache_dir, "`pip cache dir`"
        else:  # [cache] (or nothing) answers `pip cache dir`: pip's default is read here
            out.append(ours)
            continue
        out.append(
            CacheLocation("pip", ours.path, f"{ours.source} (pip agrees)")
            if _same(ours.path, path, cwd)
            else CacheLocation("pip", path, said)
        )
    return _unique(out, cwd)


def default_cache_dirs(
    env: Mapping[str, str] | None = None, *, home: Path | None = None, platform: str | None = None
) -> dict[str, Path]:
    """pip's (``pip install``'s) and uv's cache folders, as ``find_caches`` finds them."""
    found: dict[str, Path] = {}
    for loc in find_caches(env, home=home, platform=platform):
        found.setdefault(loc.tool, loc.path)
    return found


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
) -> list[CacheLocation]:
    """Each cache to read: the folders given (each recognised by its layout), else each tool's own."""
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
                out.append(CacheLocation(kind, d, "--cache-dir"))
        return out
    return find_caches(env, home=home, tools=tools)
