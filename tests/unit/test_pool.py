"""The compile pool (``builder/pool.py``): the priority gate's order and bound, ``run_all``'s
errors and threads, and ``pooled`` on setuptools' real compiler classes with a compile step that
records instead of compiling, the way torch's build without ninja wraps it (``_compile`` swapped
on the instance, ``compiler_so`` set to nvcc for a .cu file and put back). The real builds are in
tests/integration/test_pool_build.py."""

from __future__ import annotations

import threading
import time

import pytest

from rocm_build_backend.builder.pool import Gate, cost, pooled, run_all

setuptools = pytest.importorskip("setuptools")
from distutils import ccompiler, unixccompiler  # noqa: E402  (setuptools' distutils, loaded above)
from distutils.errors import CompileError  # noqa: E402

WAIT = 30  # seconds an event may take before the test fails instead of hanging


def _until(check, what: str) -> None:
    end = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < end, f"never {what}"
        time.sleep(0.005)


def test_the_gate_admits_the_largest_waiting_first():
    gate = Gate(1)
    order: list[str] = []
    costs = {"small-a": (0, 10), "device-small": (1, 5), "big-host": (0, 99), "device-big": (1, 50), "small-b": (0, 10)}

    def take(name: str) -> None:
        with gate.slot(costs[name]):
            order.append(name)

    with gate.slot((0, 0)):  # the one place is held while all line up
        threads = []
        for i, name in enumerate(costs):
            threads.append(threading.Thread(target=take, args=(name,)))
            threads[-1].start()
            _until(lambda: gate.waiting == i + 1, f"{name} waiting")  # noqa: B023
    for thread in threads:
        thread.join(WAIT)
    assert order == ["device-big", "device-small", "big-host", "small-a", "small-b"]  # not first come
    assert gate.admitted == 6 and gate.peak == 1 and gate.waiting == 0


def test_the_first_admission_waits_for_the_others_to_line_up():
    gate = Gate(1, settle=1.0)
    order: list[str] = []

    def take(name: str, rank: tuple[int, int]) -> None:
        with gate.slot(rank):
            order.append(name)

    first = threading.Thread(target=take, args=("host", (0, 1)))
    first.start()
    _until(lambda: gate.waiting == 1, "the first request waiting")
    late = threading.Thread(target=take, args=("device", (1, 1)))
    late.start()
    first.join(WAIT)
    late.join(WAIT)
    assert order == ["device", "host"]


def test_compiles_of_all_calls_stay_within_the_slots():
    gate = Gate(3)
    running, most = [0], [0]
    lock = threading.Lock()

    def job() -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1

    calls = [threading.Thread(target=run_all, args=(gate, [((0, i), job) for i in range(6)], 3)) for _ in range(4)]
    for thread in calls:  # four extensions at once, three threads each: twelve threads, three slots
        thread.start()
    for thread in calls:
        thread.join(WAIT)
    assert gate.admitted == 24 and most[0] <= 3 and gate.peak <= 3


def test_the_first_error_is_raised_after_the_started_jobs_end_and_the_rest_never_start():
    gate = Gate(2)
    failed, ran = threading.Event(), []
    before = threading.active_count()

    def slow() -> None:
        assert failed.wait(WAIT)  # still running when the other fails
        ran.append("slow")

    def fail() -> None:
        failed.set()
        raise CompileError("first")

    def never() -> None:
        ran.append("never")

    with pytest.raises(CompileError, match="first"):
        run_all(gate, [((0, 3), slow), ((0, 2), fail), ((0, 1), never), ((0, 0), never)], 2)
    assert ran == ["slow"] and threading.active_count() == before  # no thread left behind


def test_cost_puts_device_sources_first_then_size(tmp_path):
    (tmp_path / "big.c").write_text("x" * 1000)
    (tmp_path / "k.cu").write_text("x")
    (tmp_path / "k.hip").write_text("x")
    ranked = sorted(["big.c", "k.cu", "missing.cpp", "k.hip"], key=lambda n: cost(str(tmp_path / n)), reverse=True)
    assert ranked == ["k.cu", "k.hip", "big.c", "missing.cpp"]


def _compiler():
    compiler = ccompiler.new_compiler()
    assert isinstance(compiler, unixccompiler.UnixCCompiler)
    compiler.set_executables(compiler_so=["cc"], compiler_so_cxx=["c++"])
    compiler.src_extensions += [".cu"]  # what torch's BuildExtension does
    return compiler


def _torch_like(compiler, seen: dict[str, str], hold: threading.Event | None = None,
                read: threading.Event | None = None) -> None:
    """``_compile`` wrapped as torch's build without ninja wraps it: nvcc in ``compiler_so`` for a
    .cu file, the value it saw put back after; the "original" records the executable it would run
    (UnixCCompiler._compile reads the same attribute)."""

    def original(obj, src, ext, cc_args, extra_postargs, pp_opts) -> None:
        if src.endswith(".cu") and hold is not None:
            hold.set()  # nvcc is in place: let the .c file read
            assert read is not None and read.wait(WAIT)
        if src.endswith(".c") and hold is not None:
            assert hold.wait(WAIT)
        seen[src] = (compiler.compiler_so_cxx if compiler.detect_language(src) == "c++" else compiler.compiler_so)[0]
        if src.endswith(".c") and read is not None:
            read.set()

    def wrapped(obj, src, ext, cc_args, extra_postargs, pp_opts) -> None:
        saved = compiler.compiler_so
        try:
            if src.endswith(".cu"):
                compiler.set_executable("compiler_so", ["nvcc"])
            original(obj, src, ext, cc_args, extra_postargs, pp_opts)
        finally:
            compiler.set_executable("compiler_so", saved)

    compiler._compile = wrapped


def test_without_the_pool_a_c_file_beside_a_cu_file_gets_nvcc():
    """The race the pool removes: torch's swap is seen by every thread using the compiler."""
    compiler, seen = _compiler(), {}
    hold, read = threading.Event(), threading.Event()
    _torch_like(compiler, seen, hold, read)
    threads = [threading.Thread(target=compiler._compile, args=(f"x{src}.o", src, "", [], [], []))
               for src in ("k.cu", "host.c")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert seen == {"k.cu": "nvcc", "host.c": "nvcc"}


def test_in_the_pool_each_compile_keeps_its_executable_to_itself(tmp_path):
    compiler, seen = _compiler(), {}
    hold, read = threading.Event(), threading.Event()
    _torch_like(compiler, seen, hold, read)
    sources = ["host.c", "k.cu", "part.cpp"]
    with pooled(2, settle=0) as gate:
        assert gate is not None
        objects = compiler.compile(sources, output_dir=str(tmp_path))
    assert seen == {"k.cu": "nvcc", "host.c": "cc", "part.cpp": "c++"}  # the .c file ran beside the .cu file
    assert compiler.compiler_so == ["cc"]  # and the shared value is the one it was
    assert objects == [str(tmp_path / f"{s.rsplit('.', 1)[0]}.o") for s in sources]  # in order
    assert gate.admitted == 3 and gate.peak == 2


def test_pooled_puts_setuptools_back_and_leaves_a_later_replacement_alone(tmp_path):
    base, unix = ccompiler.CCompiler, unixccompiler.UnixCCompiler
    original = vars(base)["compile"]
    with pooled(2, settle=0):
        assert vars(base)["compile"] is not original and "compiler_so" in vars(unix)
    assert vars(base)["compile"] is original and "compiler_so" not in vars(unix)

    def theirs(self, *args, **kwargs):  # a setup.py's own ParallelCompile().install() during the build
        return []

    try:
        with pooled(2, settle=0):
            base.compile = theirs
        assert vars(base)["compile"] is theirs
    finally:
        base.compile = original


def test_a_failing_compile_raises_its_error_and_a_nested_compile_runs_inline(tmp_path):
    compiler, done = _compiler(), []
    inner = _compiler()
    inner._compile = lambda obj, src, *rest: done.append(src)

    def step(obj, src, ext, cc_args, extra_postargs, pp_opts) -> None:
        if src == "bad.c":
            raise CompileError("bad.c: error")
        inner.compile(["inner.c"], output_dir=str(tmp_path))  # inside a compile: no second place needed
        done.append(src)

    compiler._compile = step
    with pooled(1, settle=0):
        with pytest.raises(CompileError, match="bad.c"):
            compiler.compile(["bad.c"], output_dir=str(tmp_path))
        compiler.compile(["good.c"], output_dir=str(tmp_path))
    assert done == ["inner.c", "good.c"]
