"""torch's ninja builds side by side: each extension in a ``build_temp`` (and ``build.ninja``) of
its own, for the wrapped build only.

torch's ``BuildExtension`` with ninja compiles an extension by writing ``build.ninja`` into the
folder setuptools compiles into (``build_temp``, ``_write_ninja_file_and_compile_objects``) and
running ninja there, so two extensions at once would write one file. ``apart()`` gives each
extension a folder of its own: while ``build_extension`` runs for an extension, ``build_temp``
reads ``<build_temp>/rbb-ext-<name>`` in that thread (a data descriptor on setuptools'
``build_ext``, as ``pool.py`` does for the compiler executables), so setuptools' parallel
``build_ext`` can build several at once (the plan's ``[build_ext] parallel``, each ninja with the
plan's ``MAX_JOBS``); ``build_extensions`` starts them largest first (device sources, then the
larger sources: ``pool.cost``). The objects are the same, compiled with the same flags; only their
folder differs. Imports setuptools' ``build_ext`` when entered, nothing at import. Decides
nothing: the plan says when (``parallel.split``).
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from rocm_build_backend.builder.pool import cost

_local = threading.local()  # .temp: {id(command): its extension's build_temp}
PREFIX = "rbb-ext-"


class _BuildTemp:
    """``build_temp``: the extension's own folder inside ``build_extension``, else the command's."""

    def __get__(self, command: Any, owner: type | None = None) -> Any:
        if command is None:
            return self
        mine = getattr(_local, "temp", {})
        if id(command) in mine:
            return mine[id(command)]
        try:
            return vars(command)["build_temp"]
        except KeyError:
            raise AttributeError("build_temp") from None

    def __set__(self, command: Any, value: Any) -> None:
        vars(command)["build_temp"] = value


def _size(ext: Any) -> tuple[int, int]:
    sizes = [cost(str(s)) for s in getattr(ext, "sources", [])]
    return (max((d for d, _ in sizes), default=0), sum(n for _, n in sizes))


def _wrap(build_extension: Callable[..., Any], build_extensions: Callable[..., Any]) -> tuple[Any, Any]:
    def one(self: Any, ext: Any) -> Any:
        base = vars(self).get("build_temp") or "build"
        mine = _local.__dict__.setdefault("temp", {})
        mine[id(self)] = os.path.join(str(base), PREFIX + str(ext.name).replace(os.sep, "_"))
        try:
            return build_extension(self, ext)
        finally:
            mine.pop(id(self), None)

    def every(self: Any) -> Any:
        self.extensions = sorted(self.extensions, key=_size, reverse=True)  # largest first, stable
        return build_extensions(self)

    return one, every


@contextmanager
def apart() -> Iterator[bool]:
    """setuptools' ``build_ext`` with a ``build_temp`` per extension for the block; yields whether
    it could be put in place (False: no setuptools)."""
    try:  # an optional dependency, probed where it is used
        from setuptools.command.build_ext import build_ext  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        yield False
        return
    saved = {name: vars(build_ext).get(name) for name in ("build_temp", "build_extension", "build_extensions")}
    one, every = _wrap(build_ext.build_extension, build_ext.build_extensions)
    ours = {"build_temp": _BuildTemp(), "build_extension": one, "build_extensions": every}
    for name, value in ours.items():
        setattr(build_ext, name, value)
    try:
        yield True
    finally:
        for name, value in ours.items():
            if vars(build_ext).get(name) is not value:
                continue  # replaced during the build by someone else: theirs stays
            if saved[name] is None:
                delattr(build_ext, name)
            else:
                setattr(build_ext, name, saved[name])
