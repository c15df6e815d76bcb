"""The first documented path of the stamp reader: ``rocm_build_backend.stamp.read_stamp``.

Kept so that programs written against it go on working; new code imports from
``rocm_build_backend.api`` (or ``rocm_build_backend.wheel.stamp``). Holds nothing else.
"""

from __future__ import annotations

from rocm_build_backend.wheel.stamp import SCHEMA_VERSION, STAMP_NAME, read_stamp

__all__ = ["SCHEMA_VERSION", "STAMP_NAME", "read_stamp"]
