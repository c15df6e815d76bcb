"""The shipped GPU target table (``data/gpu_targets.json``): one row of facts per target name.

Holds only the loader of that file. It must not interpret the rows: each vendor's module reads
the columns it owns (family, kind, xnack/sramecc, generic, kfd), and a new GPU is a new row in
the file (made by ``tools/gen_targets.py``), not new code.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from rocm_build_backend.data import path as data_path


@lru_cache(maxsize=None)
def table() -> dict[str, dict[str, Any]]:
    """The target table: name -> facts (vendor, family, kind, xnack, sramecc, generic, kfd)."""
    with open(data_path("gpu_targets.json"), encoding="utf-8") as fh:
        data: dict[str, dict[str, Any]] = json.load(fh)
    return data
