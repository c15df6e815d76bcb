"""The public Python API, in one place: what a program may import and rely on.

    from rocm_build_backend.api import detect, audit_paths, read_stamp, check_wheels

Each name is loaded from its home module on first use, so importing this module costs nothing.
Everything not listed here is internal and may move; the command line and the ``--json``
documents (``docs/json/``) are the other public contracts.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    # GPUs: targets and detection
    "GpuTarget": "rocm_build_backend.gpu.targets",
    "parse_target": "rocm_build_backend.gpu.targets",
    "parse_targets": "rocm_build_backend.gpu.targets",
    "detect": "rocm_build_backend.gpu.detect",
    "require_targets": "rocm_build_backend.gpu.detect",
    "why_not": "rocm_build_backend.gpu.compat",
    # what binaries and wheels hold
    "audit_paths": "rocm_build_backend.binary.audit",
    "audit_wheel": "rocm_build_backend.binary.audit",
    "audit_file": "rocm_build_backend.binary.audit",
    "read_stamp": "rocm_build_backend.wheel.stamp",
    "wheel_targets": "rocm_build_backend.wheel.reader",
    # where wheels may go
    "check_wheels": "rocm_build_backend.wheel.check.wheels",
    "check_environment": "rocm_build_backend.wheel.check.environment",
    "list_cache": "rocm_build_backend.wheel.cache.run",
    "purge_cache": "rocm_build_backend.wheel.cache.run",
    "build_index": "rocm_build_backend.wheel.index.run",
    "thin_wheel": "rocm_build_backend.wheel.thin.run",
    "split_wheel": "rocm_build_backend.wheel.thin.split",
    # errors
    "RocmBuildBackendError": "rocm_build_backend.errors",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
