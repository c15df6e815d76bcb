"""GPU targets, the rules for whether code built for one target loads on another, and detection.

Vendor-neutral modules here (``targets``, ``compat``, ``device``, ``detect``, ``programs``,
``files``, ``build``) call each vendor through the interfaces in ``vendor.py`` and ``build.py``;
each vendor's names, loader rules, probes and build pieces live in its own sub-package (``amd``,
``nvidia``). Importing this package imports nothing else.
"""
