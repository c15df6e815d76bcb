"""A third GPU vendor that exists only in the tests ("acme"): its two objects, nothing else.

It proves that a vendor is a package plus a registry entry (``gpu.vendor.registered``): it
plans with its own knobs, has no binary reader (an audit never finds its code), and is refused
with one error and one hint where a build cannot go on without one. No other module knows it.
"""
