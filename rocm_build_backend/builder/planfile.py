"""The plan file: the targets decided when the metadata was prepared, checked at the build.

Frontends call ``prepare_metadata_for_build_*`` and ``build_*`` in separate processes; the
plan file, written beside the ``.dist-info`` that prepare_metadata made, carries the targets
from one to the other, so that a wheel is never built for other targets than its metadata
says. Holds the file's name, its reader and writer, and that comparison; nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from rocm_build_backend.errors import ConfigError

PLAN_FILE = "rocm-build-backend-plan.json"  # beside the .dist-info that prepare_metadata made
_MAX_BYTES = 1 << 16


def read_plan_file(path: Path) -> dict[str, Any] | None:
    """The plan file's content, or None when there is none (or it is not ours)."""
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(_MAX_BYTES).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_plan_file(metadata_directory: str, targets: Sequence[str]) -> None:
    (Path(metadata_directory) / PLAN_FILE).write_text(json.dumps({"targets": list(targets)}), encoding="utf-8")


def check_plan_file(metadata_directory: str, targets: Sequence[str]) -> None:
    """Raise ConfigError when prepare_metadata decided other targets than this build's."""
    # frontends pass the .dist-info that prepare_metadata made; our plan file is beside it
    where = Path(metadata_directory)
    decided = read_plan_file(where.parent / PLAN_FILE) or read_plan_file(where / PLAN_FILE)
    if decided is None or decided.get("targets") == list(targets):
        return
    before = decided.get("targets")
    shown = ";".join(str(t) for t in before) if isinstance(before, list) else str(before)
    raise ConfigError(
        [f"the targets changed between preparing the metadata ({shown}) and building ({';'.join(targets)})"],
        hint="keep the environment the same for the whole install",
    )
