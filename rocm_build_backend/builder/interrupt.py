"""A build stopped by SIGTERM (a CI time limit, ``timeout``, a job killed) ends like one stopped by
Ctrl-C: the build's ``finally`` runs, so the tree it was writing gets our marker for its targets
and a retry for the same targets goes on where it stopped instead of being refused as a tree
nobody can prove is ours.

Only while the wrapped backend builds, only in the main thread, and only when nobody else
handles SIGTERM there (the frontend's own handler is left alone); the previous handler is put
back afterwards.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator


@contextmanager
def terminated_as_exit() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            yield
            return
        previous = signal.signal(signal.SIGTERM, _exit)
    except (ValueError, OSError, AttributeError):
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
