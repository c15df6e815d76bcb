"""Compiler settings of one extension, and of one compile, while extensions build side by side.

setuptools' parallel ``build_ext`` builds its extensions on threads that share one compiler
object. A ``build_extension`` that sets that object's ``compiler_so`` (or ``set_executables``, the
macros, the include folders) for its extension, as many projects do, then changes what the
others compile with: one after another that is harmless, side by side nearly every extension
gets another's flags. torch's build without ninja (``unix_wrap_single_compile``) sets
``compiler_so`` to nvcc (hipcc) around each .cu compile and puts the value back: two compiles at
once through the one object race the same way.

So while the pool is on, the unix compiler classes' settings (``SCOPED``) are looked up through
``Scoped`` descriptors: inside an extension's build (``extension``) or one of the pool's compiles
(``job``) what is set is seen by that extension (that compile) alone, and reads fall through to
the shared value, copied on first read so that changes made in place (``compiler_so.append``) stay
with it too. A compile starts from the settings of the extension that asked for it. Outside both
nothing changes: what ``build_extensions`` sets before the extensions start is shared, as before.
One difference to one-after-another remains, by design: a setting an extension's build changes is
not seen by the extensions built after it (each builds from the settings all of them started from).

Holds no setuptools: ``pool.py`` puts the descriptors on its classes and takes them off.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

SCOPED = (
    "preprocessor",
    "compiler",
    "compiler_so",
    "compiler_so_cxx",
    "compiler_cxx",
    "linker_so",
    "linker_so_cxx",
    "linker_exe",
    "linker_exe_cxx",
    "archiver",
    "ranlib",
    "macros",
    "include_dirs",
    "libraries",
    "library_dirs",
    "runtime_library_dirs",
    "objects",
)
_local = threading.local()  # .scope: the Scope of this thread's extension build or compile, or None


@dataclass(eq=False)
class Scope:
    """One extension's (``job`` False) or one compile's settings: {(id(compiler), name): value}."""

    owner: object = None  # the extension being built (the gate's pause owner), None outside one
    optional: bool = False  # the extension is optional: its failure does not stop the build
    job: bool = False  # a compile of the pool (a compile inside it runs inline)
    values: dict[tuple[int, str], Any] = field(default_factory=dict)
    changed: set[str] = field(default_factory=set)  # names an extension's build set for itself


def current() -> Scope | None:
    """This thread's scope, None outside every extension build and compile."""
    scope: Scope | None = getattr(_local, "scope", None)
    return scope


@contextmanager
def entered(scope: Scope | None) -> Iterator[Scope | None]:
    """``scope`` is this thread's for the block (the one before after it)."""
    before = current()
    _local.scope = scope
    try:
        yield scope
    finally:
        _local.scope = before


def extension(owner: object, optional: bool) -> Scope:
    """The scope of one extension's build."""
    return Scope(owner=owner, optional=optional)


def job(parent: Scope | None) -> Scope:
    """The scope of one compile: the settings of the extension that asked for it, its own after."""
    if parent is None:
        return Scope(job=True)
    return Scope(
        owner=parent.owner, optional=parent.optional, job=True, values={k: _copied(v) for k, v in parent.values.items()}
    )


def _copied(value: Any) -> Any:
    return list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict) else value


class Scoped:
    """A compiler setting looked up in this thread's scope first (see the module)."""

    def __init__(self, name: str, fallback: Any) -> None:
        self.name = name
        self.fallback = fallback  # what the class held under this name (``MISSING``: nothing)

    def _class_value(self, cls: type) -> Any:
        """What the class (``self.__class__.include_dirs``) holds under the name, beneath us."""
        if self.fallback is not MISSING:
            return self.fallback
        for base in cls.__mro__:
            value = vars(base).get(self.name, MISSING)
            if value is not MISSING and not isinstance(value, Scoped):
                return value
        raise AttributeError(self.name)

    def _shared(self, compiler: Any) -> Any:
        try:
            return vars(compiler)[self.name]
        except KeyError:
            return self._class_value(type(compiler))

    def __get__(self, compiler: Any, owner: type | None = None) -> Any:
        if compiler is None:
            return self._class_value(owner) if owner is not None else self
        scope = current()
        if scope is None:
            return self._shared(compiler)
        key = (id(compiler), self.name)
        if key not in scope.values:
            scope.values[key] = _copied(self._shared(compiler))
        return scope.values[key]

    def __set__(self, compiler: Any, value: Any) -> None:
        scope = current()
        if scope is None:
            vars(compiler)[self.name] = value
            return
        scope.values[(id(compiler), self.name)] = value
        if self.name not in vars(compiler):  # a compiler made here (__init__): its first value is shared
            vars(compiler)[self.name] = value
        elif not scope.job:
            scope.changed.add(self.name)

    def __delete__(self, compiler: Any) -> None:
        scope = current()
        if scope is None:
            vars(compiler).pop(self.name, None)
        else:
            scope.values.pop((id(compiler), self.name), None)


MISSING = object()
