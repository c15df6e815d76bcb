"""Asking pip and uv themselves where their caches are and what pip's cache holds.

The tools' public commands come first; ``dirs.py`` reads their variables and configuration
files only where a tool is not installed here, fails, or has no command for the question:

- uv: ``uv cache dir`` is the whole answer (run in the working folder, whose ``uv.toml`` or
  ``pyproject.toml`` counts).
- pip: ``pip cache dir`` answers for the ``[cache]`` section of pip's configuration (each pip
  command reads ``[global]`` and its own section), not for ``pip install``'s, so it is trusted
  only for what ``[install]``, ``[wheel]`` and ``[download]`` leave to ``[global]``, a variable
  or pip's default. What those sections set is read from ``pip config list`` (pip's public view
  of its merged configuration, the ``:env:`` entries included), never from the files.
- pip's built wheels: ``pip cache list --format=abspath --cache-dir DIR`` lists every
  ``.whl`` under ``DIR/wheels`` as pip sees it.

pip is asked through the Python whose ``pip.conf`` counts (``prefix``), uv through the ``uv``
on the environment's ``PATH``. Every run goes through ``gpu.programs.run_capped``: its own
process group, ``TIMEOUT`` seconds and ``LIMIT`` bytes of output at most; a run that fails,
times out or prints too much counts as no answer. It removes nothing.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rocm_build_backend.gpu.programs import run_capped

#: How long one question may take (pip starts in 0.3-2 s on a loaded machine).
TIMEOUT = 30.0
#: What one answer may print: a path, a configuration listing; a cache listing is larger.
LIMIT = 1 << 20
LIST_LIMIT = 64 << 20

_QUIET = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_NO_COLOR": "1"}
_CONFIG_LINE = re.compile(r"(?P<section>[^.=\s]*)\.cache-dir=(?P<value>.*)")


@dataclass(frozen=True)
class PipAnswer:
    """What pip said: ``pip cache dir`` (None when it failed) and each section's ``cache-dir``
    from ``pip config list`` (``":env:"`` for ``PIP_CACHE_DIR``)."""

    cache_dir: Path | None
    sections: dict[str, str] = field(default_factory=dict)


def _answer(argv: list[str], env: Mapping[str, str], cwd: Path, limit: int = LIMIT) -> str | None:
    """The program's stdout, or None when it cannot start, fails, times out or floods."""
    try:
        ran = run_capped(argv, env={**env, **_QUIET}, timeout=TIMEOUT, limit=limit, cwd=cwd)
    except OSError:
        return None
    if ran.returncode != 0:
        return None
    return ran.stdout.decode("utf-8", "replace")


def _one_path(text: str | None, cwd: Path) -> Path | None:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return cwd / lines[0].strip() if len(lines) == 1 else None


def pip_command(prefix: Path, platform: str) -> list[str] | None:
    """``python -m pip`` for the Python at ``prefix``; None when there is no Python there."""
    if Path(prefix) == Path(sys.prefix):  # a Python without pip fails to answer: no answer
        return [sys.executable, "-m", "pip"]  # (not importlib's find_spec: setuptools hooks it for pip)
    python = Path(prefix) / ("Scripts/python.exe" if platform.startswith("win") else "bin/python")
    return [str(python), "-m", "pip"] if python.is_file() else None


def uv_command(env: Mapping[str, str]) -> list[str] | None:
    """The ``uv`` on the environment's PATH; None when there is none."""
    found = shutil.which("uv", path=env.get("PATH", os.defpath))
    return [found] if found else None


def _pip_sections(text: str | None) -> dict[str, str] | None:
    if text is None:
        return None
    sections: dict[str, str] = {}
    for line in text.splitlines():
        m = _CONFIG_LINE.fullmatch(line.strip())
        if not m:
            continue
        try:
            value = ast.literal_eval(m["value"])
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, str) and value:  # pip takes an empty value (PIP_CACHE_DIR=) as unset
            sections[m["section"]] = value
    return sections


def ask_pip(pip: list[str], env: Mapping[str, str], cwd: Path) -> PipAnswer | None:
    """``pip cache dir`` and ``pip config list``, side by side; None when the listing failed."""
    with ThreadPoolExecutor(2) as pool:
        where = pool.submit(_answer, [*pip, "cache", "dir"], env, cwd)
        config = pool.submit(_answer, [*pip, "config", "list"], env, cwd)
        sections = _pip_sections(config.result())
        cache_dir = _one_path(where.result(), cwd)
    return None if sections is None else PipAnswer(cache_dir, sections)


def ask_uv(uv: list[str], env: Mapping[str, str], cwd: Path) -> Path | None:
    """``uv cache dir``; None when uv fails."""
    return _one_path(_answer([*uv, "cache", "dir"], env, cwd), cwd)


def ask_both(
    pip: list[str] | None, uv: list[str] | None, env: Mapping[str, str], cwd: Path
) -> tuple[PipAnswer | None, Path | None]:
    """pip's and uv's answers, asked at the same time (each tool's start-up is the cost)."""
    with ThreadPoolExecutor(1) as pool:
        uv_dir = pool.submit(ask_uv, uv, env, cwd) if uv else None
        pip_answer = ask_pip(pip, env, cwd) if pip else None
        return pip_answer, uv_dir.result() if uv_dir else None


def pip_wheels(pip: list[str], cache: Path, env: Mapping[str, str]) -> list[Path] | None:
    """The ``.whl`` files pip keeps under ``cache/wheels`` (``pip cache list --format=abspath``);
    None when pip cannot say. Only paths inside ``cache/wheels`` are taken, named through
    ``cache`` as given."""
    text = _answer([*pip, "cache", "list", "--format=abspath", "--cache-dir", str(cache)], env, cache, LIST_LIMIT)
    if text is None:
        return None
    root = Path(os.path.abspath(cache / "wheels"))
    real = Path(os.path.realpath(root))  # pip resolves links in --cache-dir; name them as given
    found = []
    for line in text.splitlines():
        p = Path(line.strip())
        if line.strip() and p.is_absolute() and real in p.parents:
            found.append(root / p.relative_to(real))
    return sorted(found)
