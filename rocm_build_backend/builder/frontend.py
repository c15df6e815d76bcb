"""The frontend that runs a build (pip, ``python -m build``, uv), as far as the shim must know it.

Three questions, each answered from paths and the environment the frontend hands the build:

- ``frontend_copy``: is the source folder the frontend's own copy of an sdist rather than the
  user's checkout? pip unpacks into ``$TMPDIR/pip-req-build-*``, ``pip-install-*/<name>_<hex>``
  or ``pip-wheel-*/<name>_<hex>``; ``python -m build`` into ``$TMPDIR/build-via-sdist-*``; uv
  into its cache, ``<cache>/sdists-v<N>/.../src`` (kept, and built in again with other config
  settings) or ``<cache>/sdists-v<N>/.tmp*/`` (``uv build``), a uv cache being the folder that
  holds ``CACHEDIR.TAG``. A stale build tree there is the frontend's leftover, not the user's.
- ``variant_verdict``: does the frontend take a variant wheel back? ``python -m build`` and
  ``uv build`` do; pip (``PIP_BUILD_TRACKER`` set) does not, nor does uv when it builds to
  install (``uv pip install``, ``uv sync``: the wheel goes into ``<cache>/builds-v<N>/``, and
  uv then finds "the built wheel is not compatible"); an unknown frontend gets the plain wheel.
- ``cache_note``: will the frontend keep the wheel in a cache whose key misses the targets?
  uv keys its built wheels by the source and the config settings (``-C``,
  ``--config-settings-package``) and ``extra-build-variables``, not by the environment or the
  machine; pip by the sdist's URL and the interpreter only (tested: pip 26.3, uv 0.13.9).

Reads nothing but the path names, ``CACHEDIR.TAG``'s presence and, for ``python -m build``,
the parent process's command line (``/proc``); changes nothing.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Mapping

_UV_BUCKET = re.compile(r"(sdists|git|builds)-v[0-9]+")
_PIP_TEMP = re.compile(r"pip-(req-build|install|wheel|download|unpack)-")
_BUILD_TEMP = "build-via-sdist-"
NAMES = {"pip": "pip", "build": "python -m build", "uv": "uv"}


def _uv_cache_of(path: Path) -> Path | None:
    """The uv cache ``path`` lies in (the bucket's parent holds CACHEDIR.TAG), or None."""
    for folder in path.parents:
        if _UV_BUCKET.fullmatch(folder.name) and (folder.parent / "CACHEDIR.TAG").is_file():
            return folder.parent
    return None


def frontend_copy(source_dir: str | os.PathLike[str], tmpdir: str | None = None) -> str | None:
    """``pip``, ``build`` or ``uv`` when ``source_dir`` is that frontend's unpacked copy of an
    sdist (its temporary folder, or uv's cache); None for anything else (the user's checkout)."""
    source = Path(source_dir).resolve()
    if _uv_cache_of(source) is not None:
        return "uv"
    temp = Path(tmpdir or tempfile.gettempdir()).resolve()
    try:
        first = source.relative_to(temp).parts[0]
    except (ValueError, IndexError):
        return None
    if _PIP_TEMP.match(first):
        return "pip"
    if first.startswith(_BUILD_TEMP):
        return "build"
    return None


def _parent_command(pid: int | None = None) -> list[str]:
    """The parent process's command line (Linux ``/proc``); [] where it cannot be read."""
    try:
        with open(f"/proc/{pid or os.getppid()}/cmdline", "rb") as fh:
            raw = fh.read(1 << 16)
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def _python_m_build(argv: list[str]) -> bool:
    """Whether a command line is ``python -m build`` (or its ``pyproject-build`` script), or the
    shim's own ``build`` verb (both write the wheel where the user asked)."""
    names = [Path(a).name for a in argv[:4]]
    if "pyproject-build" in names:
        return True
    for i, arg in enumerate(argv[:-1]):
        if arg == "-m" and argv[i + 1] == "build":
            return True
        if arg == "-m" and argv[i + 1] == "rocm_build_backend" and "build" in argv[i + 2 : i + 3]:
            return True
    return "rocm-build-backend" in names and "build" in argv[1:3]


def variant_verdict(
    wheel_directory: str | os.PathLike[str], env: Mapping[str, str], parent: list[str] | None = None
) -> tuple[bool, str]:
    """(whether the frontend takes a variant wheel back, why) for a build writing its wheel into
    ``wheel_directory``. ``parent``: the parent's command line (default: read from /proc)."""
    if env.get("PIP_BUILD_TRACKER"):
        return False, "pip rejects variant wheels"
    if env.get("UV") or env.get("UV_INTERNAL__BUILD_DIR"):
        if _uv_cache_of(Path(wheel_directory).resolve() / "x") is not None:
            return False, "uv installs what it builds only as a plain wheel (`uv pip install`, `uv sync`)"
        return True, "uv build keeps variant wheels"
    if env.get("_PYPROJECT_HOOKS_BUILD_BACKEND") and _python_m_build(_parent_command() if parent is None else parent):
        return True, "python -m build keeps variant wheels"
    return False, "this frontend is not known to take variant wheels (python -m build and uv build do)"


def cache_note(source_dir: str | os.PathLike[str], targets_from: str, tmpdir: str | None = None) -> str | None:
    """A warning for the build log when the frontend keeps this wheel in a cache whose key does
    not hold the targets, so that another GPU gets it back; None when it does not.

    ``targets_from``: where the targets came from: ``-C``, ``env``, ``pyproject`` (the settings'
    channels), ``PYTORCH_ROCM_ARCH``, ``TORCH_CUDA_ARCH_LIST``, ``detected:<probe>`` or ``none``.
    The sdist's own pyproject keys itself; ``none`` targets nothing."""
    if targets_from in ("pyproject", "none"):
        return None
    copy = frontend_copy(source_dir, tmpdir)
    what = {"env": "ROCM_BUILD_BACKEND_TARGETS", "-C": "-C"}.get(targets_from, targets_from)
    if what.startswith("detected"):
        what = "this machine's GPUs"
    if copy == "uv" and targets_from != "-C":
        return (
            f"uv keeps this wheel in its cache keyed by the sdist and the -C settings, not by {what}: "
            "uv hands it back on any GPU; give -C rocm-build-backend.targets=... (uv keys it), "
            "or install with `rocm-build-backend install --tool uv`"
        )
    source = Path(source_dir).resolve()
    if (
        copy == "pip"
        and not source.parent.name.startswith("pip-req-build-")
        and not source.name.startswith("pip-req-build-")
    ):
        return (
            f"pip keeps a wheel built from an index or --find-links sdist in its cache keyed by the "
            f"sdist's URL and the Python version, not by {what}: another GPU gets it back; install with "
            "`rocm-build-backend install`, or pip's --no-cache-dir"
        )
    return None
