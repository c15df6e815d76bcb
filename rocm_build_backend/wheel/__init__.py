"""What a wheel holds and where it may go: its targets (stamp first, audit when there is none),
stamping and the atomic rewrite, ``check``, ``cache``, ``index`` and the import guard.

``reader.py`` reads a wheel's targets for ``check.py``, ``cache.py`` and ``index.py``;
``stamp.py`` and ``rewrite.py`` serve the build; see docs/architecture-wheel.md for the flow.
This package imports nothing at import time; each module imports what it needs at its top.
"""
