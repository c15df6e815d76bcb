"""How far long work has got (``index`` reading thousands of wheels, ``check --env`` reading an
environment), for a person watching a terminal.

The library calls ``step``; nothing is shown unless the command line has set a reporter (it does
only when stderr is a terminal and ``-q`` is not given). Holds no policy and prints nothing itself.
"""

from __future__ import annotations

from typing import Callable

Reporter = Callable[[str, int, int], None]  # (what, done, total; 0 when the total is not known)

_reporter: Reporter | None = None


def set_reporter(reporter: Reporter | None) -> None:
    """Show progress through ``reporter`` from now on (None: show nothing)."""
    global _reporter
    _reporter = reporter


def step(what: str, done: int, total: int = 0) -> None:
    """``done`` of ``total`` items of ``what`` are finished."""
    reporter = _reporter
    if reporter is not None:
        reporter(what, done, total)
