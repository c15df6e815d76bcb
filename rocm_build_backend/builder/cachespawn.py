"""The compiler cache in front of setuptools' compiles, for the wrapped build only.

setuptools runs every compile through one method of ``CCompiler``, ``call`` since setuptools 80
and ``spawn`` before (plain extensions, and torch's ``BuildExtension`` without ninja, which swaps
``compiler_so`` to hipcc or nvcc for a device source). ``cached_spawn(choice, pinned)`` replaces
that method for the block (the compile pool's, when the pool is on: it is entered after the
pool) with one that runs a compile (``-c`` on the line) as ``CACHE COMPILER ARGS``, except when
the compiler is a cache already (``CC="ccache gcc"``) or one of the build's pinned programs (they
run the cache behind themselves, on the command line they rewrote). Links and everything else
run as they were. Imports setuptools' ``distutils`` (the copy the build uses) when entered,
nothing at import.

``call`` and ``spawn`` are public, but the classes are found where setuptools keeps them:
``distutils`` and its private ``setuptools._distutils`` (the copy setuptools loads apart).
setuptools has no compiler-launcher setting (CMake's ``CMAKE_<LANG>_COMPILER_LAUNCHER``), and
``CC="ccache cc"`` would not reach the compilers a build swaps in (torch's nvcc). A setuptools
without either module gets no cache in front of its compiles. Checked with setuptools 64.0.0
and the newest by the version matrix's ``pool`` cell (ccache sees each compile).
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from rocm_build_backend.builder.cache import CacheChoice, is_cache


def _classes() -> list[tuple[type, str]]:
    """The ``CCompiler`` classes of the distutils copies that setuptools' build uses, each with
    the name of the method its compiles run through (``call``, else ``spawn``)."""
    try:  # an optional dependency, probed where it is used; setuptools puts its distutils in place
        import setuptools  # type: ignore[import-untyped, unused-ignore]  # noqa: F401
        import distutils.ccompiler  # noqa: F401 (read from sys.modules below)
    except ImportError:
        return []
    found: list[tuple[type, str]] = []
    for package in ("distutils", "setuptools._distutils"):
        base = getattr(sys.modules.get(f"{package}.ccompiler"), "CCompiler", None)
        if not isinstance(base, type) or any(base is cls for cls, _ in found):
            continue
        name = method_name(base)
        if name in vars(base):
            found.append((base, name))
    return found


def method_name(cls: type) -> str:
    """The ``CCompiler`` method every compile of this setuptools runs through: ``call`` where the
    class defines it (setuptools 80 and later), else ``spawn``. The compile pool replaces the same one."""
    return "call" if "call" in vars(cls) else "spawn"


def cached_command(cmd: Sequence[str], choice: CacheChoice, pinned: Callable[[str], bool]) -> list[str]:
    """``cmd`` with the cache in front when it is a compile the cache should see (pure). sccache
    stands in front of hipcc only for ``.hip`` and ``.cu`` sources (it would preprocess a ``.cpp``
    file that hipcc compiles as HIP as C++)."""
    args = list(cmd)
    if not args or choice.program is None or "-c" not in args[1:] or is_cache(args[0]) or pinned(args[0]):
        return args
    if (
        choice.kind == "sccache"
        and "hipcc" in os.path.basename(args[0])
        and not any(a.endswith((".hip", ".cu")) for a in args[1:])
    ):
        return args
    return [choice.program, *args]


@contextmanager
def cached_spawn(choice: CacheChoice, pinned: Callable[[str], bool]) -> Iterator[bool]:
    """``CCompiler.call`` (or ``spawn``) with the cache in front of compiles for the block; yields
    whether it could be put in place (False: this setuptools' compiler classes are not known)."""
    classes = _classes()
    put: list[tuple[type, str, Any, Any]] = []
    for cls, name in classes:
        old = vars(cls)[name]

        def run(self: Any, cmd: Sequence[str], *args: Any, _old: Any = old, **kwargs: Any) -> Any:
            return _old(self, cached_command(cmd, choice, pinned), *args, **kwargs)

        put.append((cls, name, old, run))
        setattr(cls, name, run)
    try:
        yield bool(classes)
    finally:
        for cls, name, old, ours in reversed(put):
            if vars(cls).get(name) is ours:  # replaced during the build by someone else: theirs stays
                setattr(cls, name, old)


def pinned_under(folder: str) -> Callable[[str], bool]:
    """A test for "is this path one of the pinned programs written under ``folder``"."""
    base = os.path.realpath(folder) + os.sep

    def pinned(path: str) -> bool:
        return os.path.realpath(path).startswith(base) or path.startswith(folder + os.sep)

    return pinned
