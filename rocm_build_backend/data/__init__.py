"""Tables and JSON Schemas shipped with the package; ``path(name)`` finds one.

Holds no code but this lookup: the readers of each table live with the concern that owns it.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).parent


def path(name: str) -> Path:
    """The shipped data file ``name`` (``gpu_targets.json``, ``stamp.schema.json``, ...)."""
    return _HERE / name
