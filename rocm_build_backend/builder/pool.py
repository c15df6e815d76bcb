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
deadlock). Links are not gated (one per extension, after its compiles). Compiler classes that
replace ``compile`` (MSVC) never reach the pool (``parallel.split`` pools on POSIX only).

Swapped executables. torch's build without ninja (``BuildExtension``'s
``unix_wrap_single_compile``) sets the shared compiler object's ``compiler_so`` to nvcc (hipcc)
for a .cu file and puts the value it saw back afterwards. Two compiles at once through that one
object race: a .c file compiled while a .cu file holds nvcc gets nvcc (C++ files are safe where
setuptools compiles them with ``compiler_so_cxx``: ``parallel._cxx_apart``), and two .cu files'
save-and-restore can leave nvcc in place, or put gcc back just before the other reads nvcc. So
while the pool is on, the unix compiler classes' ``compiler_so`` and ``compiler_so_cxx`` are
per thread inside a pooled compile (``_PerThread``): what a compile sets there is seen by that
compile alone, reads fall through to the shared value, and every file kind gets its own
executable whatever compiles beside it. (A change of those two meant to outlast the compile, made
from inside ``_compile``, would be lost: no known project does that.)

Imports setuptools' ``distutils`` (the copy the build uses, already loaded by the wrapped backend)
when entered, nothing at import. Decides nothing: the plan says when.
"""

from __future__ import annotations

import heapq
import itertools
import os
import sys
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Iterator, Sequence

from rocm_build_backend.builder.log import log

try:  # POSIX only, as the pool itself (parallel.split pools on POSIX only)
    import resource
except ImportError:  # pragma: no cover
    resource = None  # type: ignore[assignment]

Cost = tuple[int, int]  # (a device source, the file's size): larger compiles first
SETTLE = 0.3  # seconds the first admission waits for the compiles started with it
_DEVICE = (".cu", ".hip")
_SWAPPED = ("compiler_so", "compiler_so_cxx")
_MISSING = object()
_local = threading.local()  # .swapped: {(id(compiler), name): value} inside a pooled compile


def cost(source: str) -> Cost:
    """How long ``source`` is expected to compile, to order the waiting: device first, then size."""
    try:
        size = os.path.getsize(source)
    except OSError:
        size = 0
    return (1 if source.lower().endswith(_DEVICE) else 0, size)


class Gate:
    """At most ``slots`` holders at once; a free place goes to the waiter of the largest cost
    (first come among equals). The first admission waits ``settle`` seconds after the first request."""

    def __init__(self, slots: int, settle: float = 0.0) -> None:
        self.slots = max(1, slots)
        self.settle = settle
        self.admitted = 0  # holders so far
        self.peak = 0  # the most holders at once
        self.first: float | None = None  # when the first holder came in
        self.last: float | None = None  # when the last holder so far left
        self._busy = 0
        self._opens: float | None = None
        self._waiting: list[tuple[int, int, int]] = []  # a heap of (-device, -size, arrival)
        self._arrival = itertools.count()
        self._cond = threading.Condition()

    @property
    def waiting(self) -> int:
        """Requests waiting for a place."""
        with self._cond:
            return len(self._waiting)

    @contextmanager
    def slot(self, cost: Cost) -> Iterator[None]:
        """Hold one place for the block."""
        with self._cond:
            if self._opens is None:
                self._opens = time.monotonic() + self.settle
            entry = (-cost[0], -cost[1], next(self._arrival))
            heapq.heappush(self._waiting, entry)
            try:
                while True:
                    wait = self._opens - time.monotonic()
                    if wait <= 0 and self._busy < self.slots and self._waiting[0] == entry:
                        break
                    self._cond.wait(wait if wait > 0 else None)
            except BaseException:  # interrupted while waiting: give up the place in line
                self._waiting.remove(entry)
                heapq.heapify(self._waiting)
                self._cond.notify_all()
                raise
            heapq.heappop(self._waiting)
            self._busy += 1
            self.admitted += 1
            self.peak = max(self.peak, self._busy)
            if self.first is None:
                self.first = time.monotonic()
            self._cond.notify_all()  # the next in line may fit too
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                self.last = time.monotonic()
                self._cond.notify_all()


class _PerThread:
    """A compiler executable (``compiler_so``) that a pooled compile sets for itself alone."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, compiler: Any, owner: type | None = None) -> Any:
        if compiler is None:
            return self
        mine = getattr(_local, "swapped", None)
        if mine is not None and (id(compiler), self.name) in mine:
            return mine[(id(compiler), self.name)]
        try:
            return vars(compiler)[self.name]
        except KeyError:
            raise AttributeError(self.name) from None

    def __set__(self, compiler: Any, value: Any) -> None:
        mine = getattr(_local, "swapped", None)
        if mine is None:
            vars(compiler)[self.name] = value
        else:
            mine[(id(compiler), self.name)] = value


def _own_executables(job: Callable[[], object]) -> None:
    """Run ``job`` with executables of this thread's own (``_PerThread``)."""
    _local.swapped = {}
    try:
        job()
    finally:
        _local.swapped = None


def run_all(gate: Gate, jobs: Sequence[tuple[Cost, Callable[[], object]]], threads: int) -> None:
    """Run ``jobs`` in their order on ``threads`` threads (this one among them), each through
    ``gate``. After a failure no further job starts; the first error is raised once every started
    job has ended."""
    queue = deque(jobs)
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if errors or not queue:
                    return
                job_cost, job = queue.popleft()
            try:
                with gate.slot(job_cost):
                    if not errors:  # another failed while this one waited
                        _own_executables(job)
            except BaseException as exc:
                with lock:
                    errors.append(exc)
                return

    helpers = [threading.Thread(target=worker, name=f"compile-pool-{i}", daemon=True)
               for i in range(max(1, min(threads, len(jobs))) - 1)]
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


def _compile_function(gate: Gate, unix: tuple[type, ...], calls: _Calls) -> Callable[..., list[str]]:
    """A ``CCompiler.compile`` whose objects go through ``gate``, side by side on unix compilers,
    each call's objects its own (``_Claims``)."""
    claims = _Claims()

    def compile(self: Any, sources: Sequence[str], output_dir: str | None = None, macros: Any = None,
                include_dirs: Any = None, debug: bool = False, extra_preargs: Any = None,
                extra_postargs: Any = None, depends: Any = None) -> list[str]:
        output_dir = claims.folder(self, sources, output_dir)
        macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs)
        cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj: str) -> None:
            src, ext = build[obj]
            self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

        todo = sorted((obj for obj in objects if obj in build), key=lambda o: cost(build[o][0]), reverse=True)
        if getattr(_local, "swapped", None) is not None:  # a compile inside a pooled compile
            for obj in todo:
                one(obj)
            return list(objects)
        with calls.lock:
            calls.count += 1
        run_all(gate, [(cost(build[o][0]), partial(one, o)) for o in todo],
                gate.slots if isinstance(self, unix) else 1)
        return list(objects)

    return compile


def _classes() -> tuple[list[type], list[type]]:
    """The ``CCompiler`` classes (with the ``_setup_compile`` protocol) and unix compiler classes of
    the distutils that setuptools' build uses: ``distutils`` (setuptools' own copy under that name,
    or the standard library's), and ``setuptools._distutils`` where it was loaded apart."""
    try:  # an optional dependency, probed where it is used; setuptools puts its distutils in place
        import setuptools  # type: ignore[import-untyped, unused-ignore]  # noqa: F401
        import distutils.ccompiler  # noqa: F401 (both read from sys.modules below)
        import distutils.unixccompiler  # noqa: F401
    except ImportError:
        return [], []
    bases: list[type] = []
    unix: list[type] = []
    for package in ("distutils", "setuptools._distutils"):
        base = getattr(sys.modules.get(f"{package}.ccompiler"), "CCompiler", None)
        found = getattr(sys.modules.get(f"{package}.unixccompiler"), "UnixCCompiler", None)
        if not isinstance(base, type) or not isinstance(found, type) or base in bases:
            continue
        if "compile" in vars(base) and hasattr(base, "_setup_compile") and hasattr(base, "_get_cc_args"):
            bases.append(base)
            unix.append(found)
    return bases, unix


def _children_cpu() -> float:
    """CPU seconds of this process's ended child processes (the compilers), user and system."""
    if resource is None:  # pragma: no cover
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def pooled(slots: int, *, settle: float = SETTLE) -> Iterator[Gate | None]:
    """``CCompiler.compile`` pooled within ``slots`` for the block, then put back; yields the gate,
    or None when this setuptools' compiler classes are not known (nothing changed)."""
    bases, unix = _classes()
    if not bases:
        yield None
        return
    gate = Gate(slots, settle)
    cpu_before = _children_cpu()
    calls = _Calls()
    replaced = _compile_function(gate, tuple(unix), calls)
    put: list[tuple[type, str, object, object]] = []  # (class, name, what was there, ours)
    try:
        for cls in bases:
            put.append((cls, "compile", vars(cls)["compile"], replaced))
        for cls in unix:
            put += [(cls, name, vars(cls).get(name, _MISSING), _PerThread(name)) for name in _SWAPPED]
        for cls, name, _, ours in put:
            setattr(cls, name, ours)
        yield gate
    finally:
        for cls, name, old, ours in reversed(put):
            if vars(cls).get(name) is not ours:  # replaced during the build by someone else: theirs stays
                continue
            if old is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, old)
        if gate.admitted:
            busy = ""
            cpu = _children_cpu() - cpu_before
            if gate.first is not None and gate.last is not None and gate.last > gate.first:
                wall = gate.last - gate.first
                busy = (f"; first compile to last {wall:.1f} s, {cpu:.1f} s of CPU in the build's child processes: "
                        f"{cpu / wall / gate.slots:.0%} of {gate.slots} slots")
            log(f"compile pool: {gate.admitted} compiles from {calls.count} compile calls, "
                f"at most {gate.peak} at once ({gate.slots} slots, largest first){busy}")
