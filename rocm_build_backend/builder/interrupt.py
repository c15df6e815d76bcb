"""A build stopped by SIGTERM (a CI time limit, ``timeout``, a job killed) ends like one stopped by
Ctrl-C: the build's ``finally`` runs, so the tree it was writing gets our marker for its targets
and a retry for the same targets goes on where it stopped instead of being refused as a tree
nobody can prove is ours.

Only while the wrapped backend builds, only in the main thread, and only when nobody else
handles SIGTERM there (the frontend's own handler is left alone); the previous handler is put
back afterwards.

``forwarded`` is the other side, for ``rocm-build-backend build``: the hook it runs is in a
session of its own, and a signal to the command goes on to the hook's process group, which the
command then waits for, so that nothing of the build outlives the command.
"""

from __future__ import annotations

import os
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


FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def forwarded(group: int, received: list[int]) -> Iterator[None]:
    """For the block, SIGINT, SIGTERM and SIGHUP go to the process group ``group`` (a child that
    runs in a session of its own) instead of ending us: each one is appended to ``received``, the
    first is sent on as it is, a second one sends SIGKILL. The caller waits for the child; the
    previous handlers are put back after. Outside the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _forward(signum: int, frame: Any) -> None:
        received.append(signum)
        try:
            os.killpg(group, signum if len(received) == 1 else signal.SIGKILL)
        except OSError:  # the group has ended already
            pass

    previous: dict[int, Any] = {}
    try:
        for sig in FORWARDED:
            previous[sig] = signal.signal(sig, _forward)
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def end_group(group: int) -> None:
    """SIGKILL to what is left of the process group ``group`` (its leader has ended)."""
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
