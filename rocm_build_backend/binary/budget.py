"""Work budgets: what reading one file may cost, in proportion to the bytes it really has.

A ``Budget`` counts the work spent on one file (bytes read from its source, bytes inflated
from compressed data) and raises ``BudgetExceeded`` ("too large: ...") past a limit set from
the file's size as stored (a zip member's compressed size, never a size a header declares).
The audit sets one per file in a context variable; readers charge it through ``charge``.
Writers that inflate (``thin``, ``split``, ``index --split``) set one per wheel with their own
``task`` and charge every member they inflate, the temporary disk that takes included; the
readers they call (a compressed bundle inflated whole to be rebuilt) charge the same budget.
Readers called on their own (no budget set) keep their own caps. This module reads nothing.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from rocm_build_backend.binary import elf as _elf
from rocm_build_backend.binary.elf import FormatError, Source

FACTOR = 64  # work allowed per byte of input
BASE = 64 << 20  # plus this much for any file: small honest files may inflate a lot
MIN_READ_COST = 64  # a read costs at least this much, so many tiny reads count too
MAX_CONTAINERS = 1 << 15  # libcublasLt has ~2,800 fatbins; a report of 32k stays small


class BudgetExceeded(FormatError):
    """The work for one file went past its budget; the file is reported as too large."""


class Budget:
    """Work allowed for one input: ``FACTOR`` per stored byte plus ``BASE``, and at most
    ``MAX_CONTAINERS`` containers (what a report holds grows with them)."""

    def __init__(
        self, stored: int, *, factor: int = FACTOR, base: int = BASE, task: str = "reading this file's device code"
    ) -> None:
        self.stored = max(0, stored)
        self.task = task
        self.limit = self.stored * factor + base
        self.spent = 0
        self.containers = 0
        self.exceeded = ""

    def count_container(self) -> None:
        self.containers += 1
        if self.containers > MAX_CONTAINERS:
            if not self.exceeded:
                self.exceeded = f"too many entries: more than {MAX_CONTAINERS:,} device-code containers; stopped"
            raise BudgetExceeded(self.exceeded)

    def charge(self, n: int, what: str) -> None:
        self.spent += max(0, n)
        if self.spent > self.limit:
            if not self.exceeded:
                self.exceeded = (
                    f"too large: {self.task} needs more than {self.limit:,} "
                    f"bytes of work ({what}) for {self.stored:,} bytes of input; stopped"
                )
            raise BudgetExceeded(self.exceeded)


_ACTIVE: ContextVar[Budget | None] = ContextVar("rocm_build_backend_binary_budget", default=None)


def charge(n: int, what: str) -> None:
    """Charge the budget of the file being read, if any."""
    budget = _ACTIVE.get()
    if budget is not None:
        budget.charge(n, what)


def count_container() -> None:
    """Count one more container for the file being read, if any."""
    budget = _ACTIVE.get()
    if budget is not None:
        budget.count_container()


def active() -> Budget | None:
    return _ACTIVE.get()


@contextmanager
def budget_for(stored: int, task: str | None = None) -> Iterator[Budget]:
    """A fresh budget for one file (or, with ``task``, one wheel being rewritten) while the
    block runs."""
    budget = Budget(stored) if task is None else Budget(stored, task=task)
    token = _ACTIVE.set(budget)
    try:
        yield budget
    finally:
        _ACTIVE.reset(token)


class BudgetSource:
    """A source whose reads are charged to a budget (at least ``MIN_READ_COST`` each)."""

    def __init__(self, src: Source, budget: Budget, what: str = "bytes read") -> None:
        self._src = src
        self._budget = budget
        self._what = what
        self.size = src.size

    def read(self, offset: int, n: int) -> bytes:
        data = self._src.read(offset, n)
        self._budget.charge(max(len(data), MIN_READ_COST), self._what)
        return data

    def magic_offsets(self, start: int, end: int) -> list[int] | None:
        found = _elf.magic_offsets(self._src, start, end)
        if found:
            self._budget.charge(len(found) * MIN_READ_COST, self._what)
        return found

    @property
    def damaged(self) -> str:
        return str(getattr(self._src, "damaged", ""))
