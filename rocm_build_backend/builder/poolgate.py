"""The compile pool's gate: at most ``slots`` compiler processes of a build at once, the costliest
waiting first, and the two ways it closes.

Every compile the pool runs and every compiler process setuptools starts beside it (links, the
compiles of a project's own parallel compile) takes a place here (``pool.py`` for compiles,
``poolrun.py`` for processes). The gate closes for good with ``stop`` (a failure that ended an
extension's build, SIGINT, SIGTERM): every waiter and every later request raises ``Stopped``. It
closes for a while with ``pause``: a compiler of an extension failed and nobody knows yet whether
the extension's own code handles it (a ``build_extension`` that retries with other flags) or the
build fails; only that extension's requests are admitted until ``resume`` or ``stop``. So the
first failure starts nothing new, and a failure the project handles changes nothing.

Pure threading: no process, no setuptools.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator

Cost = tuple[int, int]  # (a device source, the file's size): larger compiles first
LINK = (2, 0)  # a process that is not one of the pool's compiles (a link): before compiles, it ends an extension
_DEVICE = (".cu", ".hip")


class Stopped(Exception):
    """The pool stopped (a failure, a signal): no compile or link starts any more."""


def cost(source: str) -> Cost:
    """How long ``source`` is expected to compile, to order the waiting: device first, then size."""
    try:
        size = os.path.getsize(source)
    except OSError:
        size = 0
    return (1 if source.lower().endswith(_DEVICE) else 0, size)


class Gate:
    """At most ``slots`` holders at once; a free place goes to the waiter of the largest cost
    (first come among equals). The first admission waits ``settle`` seconds after the first request."""

    def __init__(self, slots: int, settle: float = 0.0) -> None:
        self.slots = max(1, slots)
        self.settle = settle
        self.admitted = 0  # holders so far
        self.peak = 0  # the most holders at once
        self.first: float | None = None  # when the first holder came in
        self.last: float | None = None  # when the last holder so far left
        self.reason: str | None = None  # why the gate stopped; None while open
        self.refused = 0  # requests refused after the stop
        self._busy = 0
        self._paused: set[int] = set()  # owners (ids) whose failure is being decided
        self._opens: float | None = None
        self._waiting: list[tuple[int, int, int]] = []  # a heap of (-device, -size, arrival)
        self._arrival = itertools.count()
        self._cond = threading.Condition()

    @property
    def waiting(self) -> int:
        """Requests waiting for a place."""
        with self._cond:
            return len(self._waiting)

    def stop(self, reason: str) -> None:
        """Close for good: every waiter and later request raises ``Stopped`` (the first reason stays)."""
        with self._cond:
            if self.reason is None:
                self.reason = reason
            self._cond.notify_all()

    def pause(self, owner: object) -> None:
        """Admit only ``owner``'s requests until ``resume(owner)`` or ``stop``."""
        with self._cond:
            self._paused.add(id(owner))

    def resume(self, owner: object) -> None:
        with self._cond:
            self._paused.discard(id(owner))
            self._cond.notify_all()

    def _refuse(self) -> None:
        self.refused += 1
        raise Stopped(self.reason)

    def _may_enter(self, entry: tuple[int, int, int], owner: object) -> bool:
        if self._busy >= self.slots:
            return False
        if self._paused:
            return id(owner) in self._paused
        return self._waiting[0] == entry

    @contextmanager
    def slot(self, cost: Cost, owner: object = None) -> Iterator[None]:
        """Hold one place for the block; ``Stopped`` once the gate has stopped."""
        with self._cond:
            if self.reason is not None:
                self._refuse()
            if self._opens is None:
                self._opens = time.monotonic() + self.settle
            entry = (-cost[0], -cost[1], next(self._arrival))
            heapq.heappush(self._waiting, entry)
            try:
                while True:
                    if self.reason is not None:
                        self._refuse()
                    wait = self._opens - time.monotonic()
                    if wait <= 0 and self._may_enter(entry, owner):
                        break
                    self._cond.wait(wait if wait > 0 else None)
            except BaseException:  # stopped or interrupted while waiting: give up the place in line
                self._waiting.remove(entry)
                heapq.heapify(self._waiting)
                self._cond.notify_all()
                raise
            self._waiting.remove(entry)
            heapq.heapify(self._waiting)
            self._busy += 1
            self.admitted += 1
            self.peak = max(self.peak, self._busy)
            if self.first is None:
                self.first = time.monotonic()
            self._cond.notify_all()  # the next in line may fit too
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                self.last = time.monotonic()
                self._cond.notify_all()
