"""The public Python API, in one place: what a program may import and rely on.

    from rocm_build_backend.api import detect, audit_paths, read_stamp, check_wheels

Each name is loaded from its home module on first use, so importing this module costs nothing;
a type checker reads the same names from the ``TYPE_CHECKING`` imports below (the package
ships ``py.typed``).
Everything not listed here is internal and may move; the command line and the ``--json``
documents (``docs/json/``) are the other public contracts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker sees: the real names and types (``X as X`` re-exports them)
    from rocm_build_backend.binary.audit import audit_file as audit_file
    from rocm_build_backend.binary.audit import audit_paths as audit_paths
    from rocm_build_backend.binary.audit import audit_wheel as audit_wheel
    from rocm_build_backend.errors import RocmBuildBackendError as RocmBuildBackendError
    from rocm_build_backend.gpu.compat import why_not as why_not
    from rocm_build_backend.gpu.detect import detect as detect
    from rocm_build_backend.gpu.detect import require_targets as require_targets
    from rocm_build_backend.gpu.targets import GpuTarget as GpuTarget
    from rocm_build_backend.gpu.targets import parse_target as parse_target
    from rocm_build_backend.gpu.targets import parse_targets as parse_targets
    from rocm_build_backend.wheel.cache.run import list_cache as list_cache
    from rocm_build_backend.wheel.cache.run import purge_cache as purge_cache
    from rocm_build_backend.wheel.check.wheels import check_wheels as check_wheels
    from rocm_build_backend.wheel.check.environment import check_environment as check_environment
    from rocm_build_backend.wheel.index.run import build_index as build_index
    from rocm_build_backend.wheel.reader import wheel_targets as wheel_targets
    from rocm_build_backend.wheel.thin.split import split_wheel as split_wheel
    from rocm_build_backend.wheel.stamp import read_stamp as read_stamp
    from rocm_build_backend.wheel.thin.run import thin_wheel as thin_wheel

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
