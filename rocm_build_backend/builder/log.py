"""The build log: one line at a time on stderr, each with one prefix, easy to find in pip's output.

Holds ``log``, ``reported`` (our errors become ``error:`` / ``hint:`` lines and a non-zero
exit instead of a traceback) and ``teed`` (what the wrapped backend prints through Python's
``sys.stdout``/``sys.stderr`` still goes there, and its last ``TAIL`` characters are kept, so
a hint can name what the build said). Nothing here decides anything about a build.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator, TextIO

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


TAIL = 1 << 20  # characters of the wrapped backend's printed output kept for the hints


class Tail:
    """The last ``TAIL`` characters written through the tees, in order (thread-safe)."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._size = 0
        self._lock = threading.Lock()

    def add(self, text: str) -> None:
        with self._lock:
            self._parts.append(text)
            self._size += len(text)
            if self._size > 2 * TAIL:
                joined = "".join(self._parts)[-TAIL:]
                self._parts, self._size = [joined], len(joined)

    def text(self) -> str:
        with self._lock:
            return "".join(self._parts)[-TAIL:]


class _Tee:
    """A text stream that writes through to ``stream`` and keeps a copy in ``tail``; anything
    else (``fileno``, ``buffer``, ``isatty``, ``encoding``) is the stream's own."""

    def __init__(self, stream: TextIO, tail: Tail) -> None:
        self._stream = stream
        self._tail = tail

    def write(self, text: str) -> int:
        n = self._stream.write(text)
        if isinstance(text, str):
            self._tail.add(text)
        return n

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def teed() -> Iterator[Tail]:
    """Keep what is printed through ``sys.stdout``/``sys.stderr`` meanwhile (``setup.py``'s
    prints and warnings; a compiler's output goes to the file descriptors, unseen here)."""
    tail = Tail()
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(out, tail), _Tee(err, tail)
    try:
        yield tail
    finally:
        sys.stdout, sys.stderr = out, err
