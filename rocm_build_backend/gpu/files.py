"""Reading the small text files probes look at (sysfs attributes, ``/proc/version``) safely.

Regular files only, opened without blocking (a FIFO planted where a sysfs file should be is
refused, not waited on; ``/dev/zero`` is refused, not read forever) and read up to a byte
limit. Must not parse: callers interpret the text.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

#: Enough for any sysfs attribute or KFD ``properties`` file (about 1.5 KB on real machines).
SMALL_FILE_LIMIT = 64 * 1024


def read_small_text(path: Path | str, limit: int = SMALL_FILE_LIMIT) -> str:
    """The text of a regular file of at most ``limit`` bytes (undecodable bytes replaced).

    Raises OSError with ``strerror`` "not a regular file" or "larger than N bytes" for what
    it refuses, like any other read error.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        data = bytearray()
        while len(data) <= limit:
            chunk = os.read(fd, limit + 1 - len(data))
            if not chunk:
                break
            data += chunk
        if len(data) > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")
