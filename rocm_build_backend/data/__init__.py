"""Tables and JSON Schemas shipped with the package; ``path(name)`` finds one.

Holds no code but this lookup and the settings schema's loader (validate-pyproject's entry point): the readers of each table live with the concern that owns it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_HERE = Path(__file__).parent


def path(name: str) -> Path:
    """The shipped data file ``name`` (``gpu_targets.json``, ``stamp.schema.json``, ...)."""
    return _HERE / name


def settings_schema(tool_name: str = "rocm-build-backend") -> dict[str, Any]:
    """The JSON Schema of ``[tool.rocm-build-backend]``: validate-pyproject's ``tool_schema`` plugin."""
    if tool_name != "rocm-build-backend":
        raise ValueError(f"no schema for [tool.{tool_name}]: only [tool.rocm-build-backend]")
    schema: dict[str, Any] = json.loads(path("schemas/settings.schema.json").read_text(encoding="utf-8"))
    return schema
