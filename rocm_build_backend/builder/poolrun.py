"""The compiler processes of a pooled build: each through the gate, each in a process group of its
own, all of them ended on a signal.

setuptools runs every compiler and linker through one method of its compiler classes
(``CCompiler.call`` since setuptools 80, ``CCompiler.spawn`` before). While the pool is on, that
method is ``Processes.method``'s: the same command, the same log line, the same errors, but

- the process takes a place at the gate (``poolgate.Gate``) unless it is one of the pool's own
  compiles, which already holds one: links and the compiles of a project's own parallel compile
  (pybind11's ``ParallelCompile``, the ``parallelCCompile`` monkeypatch) count against the same
  budget, so the compilers at once never exceed it;
- it starts in a session (process group) of its own and is known until it ends, so that
  ``kill_all`` can end it with everything it started (``cc1``, ``as``, ``cicc``, a wrapper's
  ``sleep``): SIGTERM to each group, SIGKILL to the groups left after ``GRACE`` seconds;
- once the gate has stopped nothing starts (checked under the lock ``kill_all`` takes);
- a compiler of a non-optional extension that fails pauses the gate before its place is given
  back (``Gate.pause``): nothing new starts until its extension's build has ended;
- a process started outside every extension build and compile of the pool, from a thread other
  than the main one (the project compiles on threads of its own) tells the pool (``foreign``),
  which steps aside.

Compilers in sessions of their own no longer get the terminal's Ctrl-C themselves: the pool's
handler (``on_signals``) ends them; a build process killed with SIGKILL cannot, and its running
compilers then finish their one file (nothing new starts: the process that starts them is gone).

``on_signals`` puts SIGINT, SIGTERM and SIGHUP handlers in place for a block (main thread only):
the pool's callback first, then the handler that was there (``KeyboardInterrupt``; SIGTERM's
``SystemExit`` from ``interrupt.py``; ``SystemExit(128 + N)`` where it was the default).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, ContextManager, Iterator

from rocm_build_backend.builder.poolgate import LINK, Gate, Stopped
from rocm_build_backend.builder.poolscope import current

GRACE = 0.5  # seconds between SIGTERM and SIGKILL to a compiler's process group


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover (a group we do not own: not ours to end)
        return False
    return True


def end_groups(groups: list[int], grace: float = GRACE) -> None:
    """SIGTERM to every group; SIGKILL to those with a process left after ``grace`` seconds."""
    for group in groups:
        try:
            os.killpg(group, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while groups and time.monotonic() < deadline:
        groups = [g for g in groups if _alive(g)]
        if groups:
            time.sleep(0.01)
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass


class Processes:
    """The compiler processes of one pooled build (see the module)."""

    def __init__(self, gate: Gate, foreign: Callable[[str], None]) -> None:
        self.gate = gate
        self.started = 0  # processes started through us
        self.outside = 0  # of those, not one of the pool's compiles (links, the project's own compiles)
        self._foreign = foreign
        self._lock = threading.Lock()
        self._running: dict[int, subprocess.Popen[bytes]] = {}

    def kill_all(self) -> None:
        """End every running process's group (after ``gate.stop``: nothing new starts)."""
        with self._lock:
            groups = list(self._running)
        end_groups(groups)

    def run(self, cmd: list[Any], env: Any, kwargs: dict[str, Any]) -> int:
        """Run ``cmd`` (see the module); its exit status."""
        scope = current()
        if scope is None and threading.current_thread() is not threading.main_thread():
            self._foreign(threading.current_thread().name)
        held = scope is not None and scope.job
        owner = scope.owner if scope is not None else None
        gate: ContextManager[None] = nullcontext() if held else self.gate.slot(LINK, owner)
        with gate:
            with self._lock:
                if self.gate.reason is not None:
                    raise Stopped(self.gate.reason)
                proc = subprocess.Popen(cmd, env=env, **{**kwargs, "start_new_session": True})
                self._running[proc.pid] = proc
                self.started += 1
                self.outside += 0 if held else 1
            try:
                code = proc.wait()
            except BaseException:  # interrupted here (the main thread): the compiler goes with us
                end_groups([proc.pid])
                proc.wait()
                raise
            finally:
                with self._lock:
                    self._running.pop(proc.pid, None)
            if code and owner is not None and not scope.optional:  # type: ignore[union-attr]
                self.gate.pause(owner)  # before the place is given back
        return code

    def method(self, original: Callable[..., Any]) -> Callable[..., None]:
        """``original`` (setuptools' ``call``, or ``spawn`` where there is no ``call``) through ``run``."""
        names = original.__globals__
        logger = names.get("log")
        macos = names.get("macos")
        if original.__name__ == "call":

            def call(compiler: Any, cmd: Any, *, env: Any = None, **kwargs: Any) -> None:
                if logger is not None:
                    logger.info(subprocess.list2cmdline(cmd))
                if macos is not None:
                    env = macos.inject_ver(env)
                code = self.run(list(cmd), env, kwargs)
                if code:
                    raise subprocess.CalledProcessError(code, cmd)

            return call
        failed = names.get("DistutilsExecError", RuntimeError)

        def spawn(compiler: Any, cmd: Any, **kwargs: Any) -> None:
            kwargs.pop("search_path", None)
            kwargs.pop("verbose", None)
            if logger is not None:
                logger.info(" ".join(str(c) for c in cmd))
            if kwargs.pop("dry_run", getattr(compiler, "dry_run", False)):
                return
            try:
                code = self.run(list(cmd), kwargs.pop("env", None), kwargs)
            except OSError as exc:
                raise failed(f"command {cmd[0]!r} failed: {exc.args[-1]}") from exc
            if code:
                raise failed(f"command {cmd[0]!r} failed with exit code {code}")

        return spawn


@contextmanager
def on_signals(callback: Callable[[int], None]) -> Iterator[None]:
    """``callback(signum)`` on SIGINT, SIGTERM and SIGHUP for the block, then the handler that was there.
    Outside the main thread, and for a signal ignored, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        callback(signum)
        before = previous.get(signum)
        if callable(before):
            before(signum, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt
        else:
            raise SystemExit(128 + signum)

    try:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            was = signal.getsignal(sig)
            if was is signal.SIG_IGN or was is None:
                continue
            previous[sig] = was
            signal.signal(sig, handler)
        yield
    finally:
        for number, was in previous.items():
            signal.signal(number, was)
