"""Reading the small text files probes look at (sysfs attributes, ``/proc/version``) safely.

Regular files only, opened without blocking (a FIFO planted where a sysfs file should be is
refused, not waited on; ``/dev/zero`` is refused, not read forever) and read up to a byte
limit (``rocm_build_backend.files.read_regular``, the one reader of such files). Must not
parse: callers interpret the text.
"""

from __future__ import annotations

from pathlib import Path

from rocm_build_backend.files import read_regular

#: Enough for any sysfs attribute or KFD ``properties`` file (about 1.5 KB on real machines).
SMALL_FILE_LIMIT = 64 * 1024


def read_small_text(path: Path | str, limit: int = SMALL_FILE_LIMIT) -> str:
    """The text of a regular file of at most ``limit`` bytes (undecodable bytes replaced).

    Raises OSError with ``strerror`` "not a regular file" or "larger than N bytes" for what
    it refuses, like any other read error.
    """

    return read_regular(path, limit).decode("utf-8", errors="replace")
