"""The compile pool: the compiles of all of a setuptools build's extensions side by side, within
the job budget, largest first.

setuptools compiles an extension's sources one after another (``CCompiler.compile``), so even with
its parallel ``build_ext`` (``parallel.py``) the longest extension's sources, compiled in a row,
stay the critical path. pybind11 does what the field does about it: its
``setup_helpers.ParallelCompile`` replaces ``distutils.ccompiler.CCompiler.compile`` with one that
compiles the objects of one call on a thread pool. ``pooled`` does the same for the wrapped build
only, with one difference: every object of every call waits at one process-wide ``Gate`` of
``slots`` places (the plan's memory-aware budget, as ``MAX_JOBS``), so that the compiles of all
extensions together stay within it, and the gate admits the costliest waiting compile first
(``cost``: device sources, .cu and .hip, before host sources, then the larger file), not the first
to come. Its first admission waits a moment (``SETTLE``) for the extensions started together to
line up.

What ``compile`` keeps: ``_setup_compile`` and ``_get_cc_args`` as they are, only the objects it
says to build, the returned list of objects in order; when a compile fails, the objects of its
call not yet started are not started, the others end, and the first error is raised; no thread
outlives its call. A compile inside a pooled compile runs in its thread, outside the gate (no
deadlock). Compiler classes that replace ``compile`` (MSVC) never reach the pool
(``parallel.split`` pools on POSIX only).

The pool never changes what is built, only when (each piece in its module):

- compiler settings: each extension's build and each compile has its own (``poolscope``), so a
  ``build_extension`` that sets ``compiler_so`` for its extension, or torch's build without ninja
  swapping nvcc in around a .cu file, gets what it set whatever builds beside it;
- every compiler process setuptools starts, links and a project's own parallel compiles included,
  takes a place at the one gate, in a process group of its own (``poolrun``); the compilers at
  once never exceed the slots;
- the first failure that ends an extension's build starts nothing new, SIGINT and SIGTERM stop
  the gate and end the running compilers' process groups (``poolext``, ``poolrun``);
- a project that compiles side by side itself is left to do so, one extension at a time
  (``poolext.SideBySide.step_aside``; the plan says so beforehand when ``setup.py`` shows it:
  ``side_by_side`` False).

Imports setuptools' ``distutils`` (the copy the build uses, already loaded by the wrapped backend)
when entered, nothing at import. Decides nothing: the plan says when.

What it relies on that setuptools does not promise, and why: setuptools has no public hook to
compile one extension's sources side by side (``build_ext --parallel`` builds whole extensions;
``CCompiler.compile`` compiles in a row), so ``compile`` is replaced in ``distutils`` and in
``setuptools._distutils`` (where setuptools loads its copy apart) and calls the private steps the
public one calls (``_setup_compile``, ``_get_cc_args``, ``_compile``), as pybind11's
``ParallelCompile`` does; ``build_ext._build_extensions_parallel`` is replaced by ``poolext``.
``_classes`` checks that each is there, and without them the pool is not installed and setuptools
compiles as it always does. Checked with setuptools 64.0.0 and the newest by the version matrix's
``pool`` cell (``tests/version_matrix.json``, ``tests/integration/test_version_matrix.py``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Iterator, Sequence

from rocm_build_backend.builder import poolscope
from rocm_build_backend.builder.cachespawn import method_name
from rocm_build_backend.builder.log import log
from rocm_build_backend.builder.poolext import SideBySide
from rocm_build_backend.builder.poolgate import Cost, Gate, Stopped, cost
from rocm_build_backend.builder.poolrun import Processes, on_signals
from rocm_build_backend.builder.poolscope import MISSING, SCOPED, Scoped

try:  # POSIX only, as the pool itself (parallel.split pools on POSIX only)
    import resource
except ImportError:  # pragma: no cover
    resource = None  # type: ignore[assignment]

SETTLE = 0.3  # seconds the first admission waits for the compiles started with it
_MISSING = object()
__all__ = ["Gate", "Stopped", "cost", "pooled", "run_all"]


def run_all(gate: Gate, jobs: Sequence[tuple[Cost, Callable[[], object]]], threads: int) -> None:
    """Run ``jobs`` in their order on ``threads`` threads (this one among them), each through
    ``gate`` in a compile scope of its own (``poolscope.job``: the calling thread's settings, its own
    after). After a failure no further job starts (a failure of a non-optional extension's compile
    pauses the gate before its place is given back); the first error is raised once every started
    job has ended."""
    queue = deque(jobs)
    errors: list[BaseException] = []
    lock = threading.Lock()
    parent = poolscope.current()
    owner = parent.owner if parent is not None else None

    def one(job: Callable[[], object]) -> None:
        try:
            with poolscope.entered(poolscope.job(parent)):
                job()
        except BaseException:
            if owner is not None and parent is not None and not parent.optional:
                gate.pause(owner)
            raise

    def worker() -> None:
        while True:
            with lock:
                if errors or not queue:
                    return
                job_cost, job = queue.popleft()
            try:
                with gate.slot(job_cost, owner):
                    if not errors:  # another failed while this one waited
                        one(job)
            except BaseException as exc:
                with lock:
                    errors.append(exc)
                return

    helpers = [
        threading.Thread(target=worker, name=f"compile-pool-{i}", daemon=True)
        for i in range(max(1, min(threads, len(jobs))) - 1)
    ]
    for thread in helpers:
        thread.start()
    try:
        worker()
    finally:
        for thread in helpers:
            thread.join()
    if errors:
        raise errors[0]


@dataclass
class _Calls:
    """How many ``compile`` calls went through the pool."""

    count: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Claims:
    """The object files each compile call of the build writes, so that no two calls write one.

    setuptools names an object after its source (``build_temp/csrc/fps.o``), so extensions that
    share a source compile it to the same file: torch-cluster's ``_fps_cpu`` and ``_fps_cuda``
    both compile ``csrc/fps.cpp`` (with and without ``WITH_CUDA``). One after another that is
    harmless (each links right after its compiles); side by side one overwrites the object the
    other is writing or about to link (on an H200: "relocation truncated to fit" in the link, or
    worse, an extension linked with the other's object). A call whose objects another call of
    this build already claimed gets a folder of its own, ``<output_dir>/rbb-<n>``; the first
    keeps the usual one."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.claimed: set[str] = set()
        self.separate = 0

    def folder(self, compiler: Any, sources: Sequence[str], output_dir: str | None) -> str | None:
        try:
            objects = [os.path.abspath(o) for o in compiler.object_filenames(sources, output_dir=output_dir)]
        except Exception:  # an unknown source kind: setuptools' own _setup_compile reports it
            return output_dir
        with self.lock:
            if self.claimed.isdisjoint(objects):
                self.claimed.update(objects)
                return output_dir
            self.separate += 1
            folder = os.path.join(output_dir or "", f"rbb-{self.separate}")
            self.claimed.update(os.path.abspath(o) for o in compiler.object_filenames(sources, output_dir=folder))
            return folder


def _compile_function(
    gate: Gate, unix: tuple[type, ...], calls: _Calls, foreign: Callable[[str], None]
) -> Callable[..., list[str]]:
    """A ``CCompiler.compile`` whose objects go through ``gate``, side by side on unix compilers,
    each call's objects its own (``_Claims``). Called from a thread of the project's own (outside
    every extension build of the pool, not the main thread), it tells ``foreign`` and compiles as
    setuptools does, one object after another in that thread (each process still gated)."""
    claims = _Claims()

    def compile(
        self: Any,
        sources: Sequence[str],
        output_dir: str | None = None,
        macros: Any = None,
        include_dirs: Any = None,
        debug: bool = False,
        extra_preargs: Any = None,
        extra_postargs: Any = None,
        depends: Any = None,
    ) -> list[str]:
        output_dir = claims.folder(self, sources, output_dir)
        macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs
        )
        cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj: str) -> None:
            src, ext = build[obj]
            self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

        todo = sorted((obj for obj in objects if obj in build), key=lambda o: cost(build[o][0]), reverse=True)
        scope = poolscope.current()
        if scope is None and threading.current_thread() is not threading.main_thread():
            foreign(threading.current_thread().name)  # the project compiles side by side itself
            for obj in objects:
                if obj in build:
                    one(obj)
            return list(objects)
        if scope is not None and scope.job:  # a compile inside a pooled compile
            for obj in todo:
                one(obj)
            return list(objects)
        with calls.lock:
            calls.count += 1
        run_all(gate, [(cost(build[o][0]), partial(one, o)) for o in todo], gate.slots if isinstance(self, unix) else 1)
        return list(objects)

    return compile


@dataclass
class _Classes:
    """What ``pooled`` changes, in each distutils the build may use: ``CCompiler`` (with the
    ``_setup_compile`` protocol), its unix compiler class, and ``build_ext``."""

    bases: list[type] = field(default_factory=list)
    unix: list[type] = field(default_factory=list)
    build_ext: list[type] = field(default_factory=list)


def _classes() -> _Classes:
    """The classes of the distutils that setuptools' build uses: ``distutils`` (setuptools' own copy
    under that name, or the standard library's), and ``setuptools._distutils`` where it was loaded
    apart."""
    found = _Classes()
    try:  # an optional dependency, probed where it is used; setuptools puts its distutils in place
        import setuptools  # type: ignore[import-untyped, unused-ignore]  # noqa: F401
        import distutils.ccompiler  # noqa: F401 (all read from sys.modules below)
        import distutils.command.build_ext  # noqa: F401
        import distutils.unixccompiler  # noqa: F401
    except ImportError:
        return found
    for package in ("distutils", "setuptools._distutils"):
        base = getattr(sys.modules.get(f"{package}.ccompiler"), "CCompiler", None)
        unix = getattr(sys.modules.get(f"{package}.unixccompiler"), "UnixCCompiler", None)
        command = getattr(sys.modules.get(f"{package}.command.build_ext"), "build_ext", None)
        if not isinstance(base, type) or not isinstance(unix, type) or base in found.bases:
            continue
        if (
            "compile" in vars(base)
            and hasattr(base, "_setup_compile")
            and hasattr(base, "_get_cc_args")
            and ("call" in vars(base) or "spawn" in vars(base))
        ):
            found.bases.append(base)
            found.unix.append(unix)
            if isinstance(command, type) and "_build_extensions_parallel" in vars(command):
                found.build_ext.append(command)
    return found


def _children_cpu() -> float:
    """CPU seconds of this process's ended child processes (the compilers), user and system."""
    if resource is None:  # pragma: no cover
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _replacements(
    found: _Classes, compile: Callable[..., list[str]] | None, processes: Processes, side: SideBySide
) -> list[tuple[type, str, object, object]]:
    """(class, name, what was there, ours) for every attribute ``pooled`` puts in place."""
    put: list[tuple[type, str, object, object]] = []
    for cls in found.bases:
        if compile is not None:
            put.append((cls, "compile", vars(cls)["compile"], compile))
        name = method_name(cls)
        put.append((cls, name, vars(cls)[name], processes.method(vars(cls)[name])))
    for cls in found.unix:
        for name in SCOPED:
            was = vars(cls).get(name, _MISSING)
            put.append((cls, name, was, Scoped(name, MISSING if was is _MISSING else was)))
    for cls in found.build_ext:
        put.append((cls, "_build_extensions_parallel", vars(cls)["_build_extensions_parallel"], side.method()))
    return put


def _put_back(put: list[tuple[type, str, object, object]]) -> None:
    for cls, name, old, ours in reversed(put):
        if vars(cls).get(name) is not ours:  # replaced during the build by someone else: theirs stays
            continue
        if old is _MISSING:
            delattr(cls, name)
        else:
            setattr(cls, name, old)


@contextmanager
def pooled(slots: int, *, settle: float = SETTLE, side_by_side: bool = True) -> Iterator[Gate | None]:
    """The pool for the block, then setuptools as it was; yields the gate, or None when this
    setuptools' classes are not known (nothing changed). ``side_by_side`` False: the project
    compiles side by side itself (the plan saw it): its compiler processes go through the gate,
    nothing else changes."""
    found = _classes()
    if not found.bases:
        yield None
        return
    gate = Gate(slots, settle)
    cpu_before = _children_cpu()
    calls = _Calls()
    compile = (
        _compile_function(
            gate,
            tuple(found.unix),
            calls,
            lambda thread: side.step_aside(f"compile called from a thread of the project's own ({thread})"),
        )
        if side_by_side
        else None
    )
    killer: list[threading.Thread] = []
    side = SideBySide(gate, lambda: processes.kill_all(), compile)
    if not side_by_side:
        side.aside = "the plan"  # said in the plan before the build: not again
    processes = Processes(
        gate, lambda thread: side.step_aside(f"compilers run from a thread of the project's own ({thread})")
    )

    def stop_all() -> None:
        gate.stop("stopped")
        processes.kill_all()

    def stop(signum: int) -> None:  # in the signal handler: nothing that waits; the killer thread does
        gate.reason = gate.reason or f"stopped by {signal.Signals(signum).name}"
        if not killer:
            killer.append(threading.Thread(target=stop_all, name="compile-pool-stop", daemon=True))
            killer[0].start()

    put = _replacements(found, compile, processes, side)
    try:
        for cls, name, _, ours in put:
            setattr(cls, name, ours)
        with on_signals(stop):
            yield gate
    finally:
        _put_back(put)
        for thread in killer:
            thread.join()
        _report(gate, calls, processes, side, cpu_before)


def _report(gate: Gate, calls: _Calls, processes: Processes, side: SideBySide, cpu_before: float) -> None:
    """The pool's lines in the build log."""
    if side.changed:
        names = sorted({name for changed in side.changed.values() for name in changed})
        log(
            f"compile pool: {len(side.changed)} extensions set the compiler's {', '.join(names)} for their own "
            f"build (each kept to its own: {', '.join(sorted(side.changed)[:3])}{', ...' if len(side.changed) > 3 else ''})"
        )
    if gate.reason is not None:
        log(
            f"compile pool: {gate.reason}: {gate.refused} compiles and links not started, "
            f"{processes.started} compiler processes run"
        )
    if not gate.admitted:
        return
    busy = ""
    cpu = _children_cpu() - cpu_before
    if gate.first is not None and gate.last is not None and gate.last > gate.first:
        wall = gate.last - gate.first
        busy = (
            f"; first compile to last {wall:.1f} s, {cpu:.1f} s of CPU in the build's child processes: "
            f"{cpu / wall / gate.slots:.0%} of {gate.slots} slots"
        )
    compiles = gate.admitted - processes.outside
    head = (
        f"{compiles} compiles from {calls.count} compile calls and {processes.outside} other compiler runs (links)"
        if compiles
        else f"{processes.outside} compiler runs"
    )
    log(
        f"compile pool: {head}, at most {gate.peak} at once ({gate.slots} slots"
        f"{', largest first' if compiles else ''}){busy}"
    )
