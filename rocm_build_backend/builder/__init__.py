"""The build path: settings, the wrapped backend, the plan, the toolchain check, pinned tools,
project profiles, freshness, and ``flow``, which strings them together for one hook call.

Imports nothing at package import: a build backend runs inside other people's builds.
"""
