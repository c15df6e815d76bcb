"""Where an interpreter's packages are, for ``check --env PYTHON``: a PEP 405 venv's one
site-packages folder read from its layout (``pyvenv.cfg``, a small regular file, read without
running anything), else the interpreter asked.

A bare command name is found on PATH, never in the working folder. The interpreter is asked with
``-I -S`` (no site module: none of the environment's ``.pth`` files or ``sitecustomize`` runs)
through ``gpu.programs.run_capped``: its output capped at 1 MiB, its time at 30 s, its process
group killed past either; its answer must be a JSON object with ``python`` and a list of
``dirs``. Every failure is one error naming the interpreter. It reads no distribution.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import sys
import sysconfig
from pathlib import Path
from typing import Any

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.files import read_regular
from rocm_build_backend.gpu.programs import run_capped

_MAX_CFG = 64 << 10
_ASK_TIMEOUT = 30.0  # seconds for an interpreter to say where its packages are
_ASK_LIMIT = 1 << 20  # bytes it may print


def _venv_cfg(cfg: Path) -> str | None:
    """A venv's ``pyvenv.cfg`` (None where there is none); an error when it is there and is not
    a small regular file (a FIFO, ``/dev/zero``): such an environment is not read further."""

    try:
        return read_regular(cfg, _MAX_CFG).decode("utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise RocmBuildBackendError(
            f"cannot read {cfg}: {exc.strerror or exc}",
            hint="a venv's pyvenv.cfg is a small text file; repair or recreate the venv",
        ) from None


def venv_site(python: str) -> list[Path] | None:
    """A PEP 405 virtual environment's one site-packages folder, read from its layout without
    running it (``<venv>/pyvenv.cfg`` beside ``bin/``, ``lib/python3.X/site-packages``); None
    when ``python`` is not in such a venv or the venv also sees the system's packages."""
    exe = Path(python)
    text = _venv_cfg(exe.parent.parent / "pyvenv.cfg")
    if text is None:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip().lower() == "include-system-site-packages" and value.strip().lower() == "true":
            return None
    found = sorted(p for p in (exe.parent.parent / "lib").glob("python3*/site-packages") if p.is_dir())
    return found if len(found) == 1 else None


def interpreter_command(python: str) -> str:
    """The interpreter as an absolute path: a bare command name is looked up on PATH (never in
    the working folder), a path made absolute (symlinks kept: a venv's python is one)."""

    if os.sep not in python and (os.altsep is None or os.altsep not in python):
        found = shutil.which(python)
        if found is None:
            raise RocmBuildBackendError(
                f"cannot run {python}: no such command on PATH", hint="give the path of a Python interpreter"
            )
        python = found
    return os.path.abspath(python)


# asked with -I -S: no site module, no .pth file, no sitecustomize; none of the environment's
# code runs. Without site a venv is found as site finds it: pyvenv.cfg beside the interpreter
# or one folder up makes that folder the prefix whose sysconfig paths are the venv's.
_QUERY = """import json, os, sys, sysconfig
exe_dir = os.path.dirname(os.path.abspath(sys.executable))
prefix, cfg = sys.prefix, ''
for name in (os.path.join(exe_dir, 'pyvenv.cfg'), os.path.join(os.path.dirname(exe_dir), 'pyvenv.cfg')):
    if os.path.isfile(name):
        prefix = os.path.dirname(exe_dir)
        with open(name, 'rb') as fh:
            cfg = fh.read(65536).decode('utf-8', 'replace')
        break
p = sysconfig.get_paths(vars={'base': prefix, 'platbase': prefix})
dirs = [p['purelib'], p['platlib']]
system = prefix == sys.base_prefix or any(
    k.strip().lower() == 'include-system-site-packages' and v.strip().lower() == 'true'
    for k, _, v in (line.partition('=') for line in cfg.splitlines()))
if system and prefix != sys.base_prefix:
    b = sysconfig.get_paths()
    dirs += [b['purelib'], b['platlib']]
if system and not os.environ.get('PYTHONNOUSERSITE'):
    import site
    dirs.append(site.getusersitepackages())
print(json.dumps({'python': sys.executable, 'dirs': dirs}))
"""


def _ask(python: str) -> dict[str, Any]:
    """What ``python`` says its site folders are: run isolated, output and time capped."""

    hint = "give the path of a Python interpreter"
    try:
        ran = run_capped([python, "-I", "-S", "-c", _QUERY], env=os.environ, timeout=_ASK_TIMEOUT, limit=_ASK_LIMIT)
    except OSError as exc:
        raise RocmBuildBackendError(f"cannot run {python}: {exc.strerror or exc}", hint=hint) from None
    if ran.too_large or ran.timed_out:
        why = f"printed more than {_ASK_LIMIT:,} bytes" if ran.too_large else f"did not answer within {_ASK_TIMEOUT} s"
        raise RocmBuildBackendError(f"{python} {why} when asked where its packages are; it was stopped", hint=hint)
    if ran.returncode != 0:
        last = (ran.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
        raise RocmBuildBackendError(f"{python} could not say where its packages are: {last}", hint=hint)
    try:
        data = json.loads(ran.stdout.decode("utf-8", "replace"))
    except ValueError:
        raise RocmBuildBackendError(f"{python} answered something that is not JSON", hint=hint) from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("python"), str)
        or not isinstance(data.get("dirs"), list)
        or not all(isinstance(d, str) for d in data["dirs"])
    ):
        raise RocmBuildBackendError(
            f"{python} answered something that is not what a Python interpreter says", hint=hint
        )
    return data


def site_dirs(python: str | None = None) -> tuple[str, list[Path]]:
    """(the interpreter, its site-packages folders that exist). ``None``: this interpreter."""
    if python is not None:
        python = interpreter_command(python)
        fast = venv_site(python)
        if fast is not None:
            return python, fast
    if python is None:
        paths = sysconfig.get_paths()
        dirs = [paths["purelib"], paths["platlib"]]
        if site.ENABLE_USER_SITE:
            dirs.append(site.getusersitepackages())
        data: dict[str, Any] = {"python": sys.executable, "dirs": dirs}
    else:
        data = _ask(python)
    seen: list[Path] = []
    for d in data["dirs"]:
        p = Path(d)
        if p.is_absolute() and p.is_dir() and p not in seen:
            seen.append(p)
    return str(data["python"]), seen
