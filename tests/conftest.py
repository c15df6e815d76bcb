"""pytest's hooks and fixtures for every test; the helpers tests import live in ``helpers.py``.

A test's layer comes from its folder: ``tests/unit/`` (compiles nothing, builds nothing, runs no
pip or uv: seconds) is marked ``unit``, ``tests/integration/`` (real compilers, frontends and
builds of real projects, real downloads) ``integration``; ``-m unit`` and ``-m "not integration"``
pick the same tests as ``tests/unit``.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from helpers import clean_build_env

_LAYERS = ("unit", "integration")

# A shell that starts a job in the background starts it with SIGINT ignored, and Python keeps it
# ignored, as do the programs the tests start. The signal tests need Ctrl-C as a terminal gives it:
# Python's own handler here, and (a caught signal is reset at exec) the default in every child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        try:
            layer = item.path.relative_to(here).parts[0]
        except ValueError:
            continue
        if layer in _LAYERS:
            item.add_marker(getattr(pytest.mark, layer))


@pytest.fixture
def build_env(tmp_path: Path) -> dict[str, str]:
    """A clean environment for a build: no target variables, private caches and temp folder."""
    return clean_build_env(tmp_path)
