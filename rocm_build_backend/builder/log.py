"""The build log: one line at a time on stderr, each with one prefix, easy to find in pip's output.

Holds ``log`` and ``reported`` (our errors become ``error:`` / ``hint:`` lines and a non-zero
exit instead of a traceback). Nothing here decides anything about a build.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

from rocm_build_backend.binary.printable import printable
from rocm_build_backend.errors import RocmBuildBackendError

LOG_PREFIX = "rocm-build-backend: "


def log(line: str) -> None:
    print(LOG_PREFIX + line, file=sys.stderr, flush=True)


@contextmanager
def reported() -> Iterator[None]:
    """Turn our errors into `error:` / `hint:` lines and a non-zero exit, never a traceback."""
    try:
        yield
    except RocmBuildBackendError as exc:
        for line in exc.lines():  # values from settings and files: escaped
            log(printable(line))
        raise SystemExit(exc.exit_code) from None
