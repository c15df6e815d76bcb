"""setuptools' extensions side by side under the compile pool: ``build_ext._build_extensions_parallel``
while the pool is on.

That method is private to setuptools' ``build_ext`` (what its ``parallel`` option runs): no public
hook runs the extensions' builds in our order with our stop on the first failure. ``pool._classes``
installs this only where the method is there (setuptools 64.0.0 and the newest, the version
matrix's ``pool`` cell); elsewhere setuptools builds as it always does.

What it keeps of setuptools' own (a ``ThreadPoolExecutor`` of ``parallel`` threads, one
``build_extension`` each, ``_filter_build_errors`` for optional extensions), and what it adds:

- each extension builds in a scope of its own (``poolscope``): the compiler settings its
  ``build_extension`` sets are its own, whatever builds beside it;
- the first failure that ends an extension's build stops the gate (nothing new compiles or links)
  and no extension starts after it; that failure is the one raised, once the running builds end;
- on SIGINT or SIGTERM (the main thread's ``KeyboardInterrupt`` or ``SystemExit`` while it waits)
  the gate stops, the running compilers' process groups are ended, the builds end and the
  exception goes on; a stopped pool never looks like a finished build (``Stopped`` is raised);
- the pool steps aside when the project compiles side by side itself, found by what it does: the
  compiler's ``compile`` is not the pool's when the extensions are about to start (pybind11's
  ``ParallelCompile().install()``, a ``parallelCCompile`` monkeypatch, a compiler class or object
  with a ``compile`` of its own, whatever they are called), or a compiler process starts from a
  thread of the project's own (``Processes.run``). The extensions then build one at a time, as
  setuptools builds them, from there on; every compiler process still takes a place at the gate.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import Any, Callable

from rocm_build_backend.builder import poolscope
from rocm_build_backend.builder.log import log
from rocm_build_backend.builder.poolgate import Gate, Stopped


def _named(thing: object) -> str:
    module = getattr(thing, "__module__", None) or "?"
    return f"{module}.{getattr(thing, '__qualname__', type(thing).__name__)}"


class SideBySide:
    """The pool's ``_build_extensions_parallel`` and what it saw (see the module)."""

    def __init__(self, gate: Gate, kill_all: Callable[[], None], ours: Callable[..., Any] | None) -> None:
        self.gate = gate
        self.kill_all = kill_all
        self.ours = ours  # the pool's compile (None: the pool does not compile, it gates processes only)
        self.aside = ""  # why the pool stepped aside, once it did
        self.changed: dict[str, list[str]] = {}  # extension -> the compiler settings it set for itself
        self.built = 0  # extensions built side by side
        self._lock = threading.Lock()

    def step_aside(self, why: str) -> None:
        with self._lock:
            if self.aside:
                return
            self.aside = why
        log(
            f"compile pool steps aside: {why}: the extensions build one at a time from here, every compiler "
            f"process still within the {self.gate.slots} slots"
        )

    def not_ours(self, compiler: Any) -> str:
        """Why ``compiler``'s ``compile`` is not the pool's, "" when it is."""
        own = vars(compiler).get("compile") if hasattr(compiler, "__dict__") else None
        if own is not None:
            return f"the build's compiler object has a compile of its own ({_named(own)})"
        found = getattr(type(compiler), "compile", None)
        if self.ours is None or found is not self.ours:
            return f"{type(compiler).__name__}.compile is {_named(found)}, the project's own compile"
        return ""

    def method(self) -> Callable[[Any], None]:
        """The replacement of ``build_ext._build_extensions_parallel``."""

        def _build_extensions_parallel(cmd: Any) -> None:
            workers = os.cpu_count() if cmd.parallel is True else cmd.parallel
            why = self.not_ours(cmd.compiler)
            if why:
                self.step_aside(why)
            if self.aside or not workers or int(workers) <= 1:
                cmd._build_extensions_serial()
                return
            self.build_all(cmd, list(cmd.extensions), int(workers))

        return _build_extensions_parallel

    def build_all(self, cmd: Any, extensions: list[Any], workers: int) -> None:
        """``build_extension`` for each of ``extensions``, ``workers`` at once (see the module)."""
        queue = deque(extensions)
        cond = threading.Condition()
        running = [0]
        failures: list[BaseException] = []

        def worker() -> None:
            while True:
                with cond:
                    while self.aside and running[0] and queue and self.gate.reason is None:
                        cond.wait()  # stepped aside: one at a time from here
                    if not queue or self.gate.reason is not None:
                        return
                    ext = queue.popleft()
                    running[0] += 1
                try:
                    self._one(cmd, ext, failures)
                finally:
                    with cond:
                        running[0] -= 1
                        cond.notify_all()

        threads = [
            threading.Thread(target=worker, name=f"build-ext-{i}", daemon=True)
            for i in range(min(workers, len(extensions)))
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                thread.join()
        except BaseException:  # SIGINT, SIGTERM in the main thread: stop all, then go on with it
            self.gate.stop("interrupted")
            self.kill_all()
            for thread in threads:
                thread.join()
            raise
        if failures:
            raise failures[0]
        if self.gate.reason is not None:
            raise Stopped(self.gate.reason)

    def _one(self, cmd: Any, ext: Any, failures: list[BaseException]) -> None:
        scope = poolscope.extension(ext, bool(getattr(ext, "optional", False)))
        try:
            with poolscope.entered(scope), cmd._filter_build_errors(ext):
                cmd.build_extension(ext)
            with self._lock:
                self.built += 1
        except Stopped:
            pass  # the gate stopped for another extension's failure or a signal
        except BaseException as exc:
            with self._lock:
                failures.append(exc)
            self.gate.stop(f"building extension {getattr(ext, 'name', '?')!r} failed")
        finally:
            self.gate.resume(ext)
            if scope.changed:
                with self._lock:
                    self.changed[str(getattr(ext, "name", "?"))] = sorted(scope.changed)
