"""The index's state file, ``OUT/.rocm-build-backend-index.json``: what earlier runs wrote.

It records, per wheel, the facts read from it (so an unchanged wheel is not read again), the
pages of each index and the files hosted in OUT; a later run removes what it no longer
produces, and only that. ``remove_owned`` removes one such path relative to OUT.

It reads and removes only inside the output folder; it decides nothing about pages or plans.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rocm_build_backend.wheel.index_files import inside

STATE_NAME = ".rocm-build-backend-index.json"
STATE_VERSION = 1


def empty_state() -> dict[str, Any]:
    """A state that says this index has written nothing yet."""
    return {"version": STATE_VERSION, "wheels": {}, "indexes": {}, "hosted": []}


def load_state(path: Path) -> dict[str, Any]:
    """The state file's contents; an empty state when it is missing, damaged or of another version."""
    try:
        state = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return empty_state()
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        return empty_state()
    state.setdefault("wheels", {})
    state.setdefault("indexes", {})
    state.setdefault("hosted", [])
    return state


def remove_owned(out_dir: Path, rel: str) -> str | None:
    """Remove ``out_dir/rel`` and the folders it leaves empty (up to ``out_dir``).

    Returns None when it was removed, ``""`` when there was nothing to remove, else a warning.
    """
    path = out_dir / rel
    if ".." in Path(rel).parts:
        return ""
    try:
        path.unlink()
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"could not remove {rel}: {exc.strerror or exc}"
    parent = path.parent
    while parent != out_dir and inside(parent, out_dir):
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent
    return None
