"""GPU targets and the rules for whether code built for one target loads on another.

Vendor-specific tables, detection probes and rules live in one sub-package per vendor
(``amd``, ``nvidia``); the rest of the package calls the vendor-neutral modules here.
"""
