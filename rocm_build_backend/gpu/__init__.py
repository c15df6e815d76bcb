"""GPU targets, the rules for whether code built for one target loads on another, and detection.

Vendor-neutral modules here (``targets``, ``compat``, ``device``, ``detect``, ``programs``,
``files``) call each vendor through the interface in ``vendor.py``; each vendor's names, loader
rules and probes live in its own sub-package (``amd``, ``nvidia``). Importing this package imports nothing else.
"""
