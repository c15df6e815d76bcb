"""A sample whose build hard-codes gfx908 (see setup.py)."""

__version__ = "0.1.0"
