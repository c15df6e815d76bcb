"""The compile pool (``builder/pool.py``): the priority gate's order and bound, ``run_all``'s
errors and threads, and ``pooled`` on setuptools' real compiler classes with a compile step that
records instead of compiling, the way torch's build without ninja wraps it (``_compile`` swapped
on the instance, ``compiler_so`` set to nvcc for a .cu file and put back). The real builds are in
tests/integration/test_pool_build.py."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from rocm_build_backend.builder import poolscope
from rocm_build_backend.builder.pool import Gate, Stopped, cost, pooled, run_all
from rocm_build_backend.builder.poolrun import Processes, on_signals
from rocm_build_backend.builder.poolscope import MISSING, Scoped

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


def _torch_like(
    compiler, seen: dict[str, str], hold: threading.Event | None = None, read: threading.Event | None = None
) -> None:
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
    threads = [
        threading.Thread(target=compiler._compile, args=(f"x{src}.o", src, "", [], [], []))
        for src in ("k.cu", "host.c")
    ]
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


# ------------------------------------------------------------------ the pool never changes a result


def test_a_stopped_gate_refuses_its_waiters_and_every_later_request():
    gate, raised = Gate(1), []

    def wait() -> None:
        try:
            with gate.slot((0, 1)):
                raised.append("admitted")
        except Stopped as exc:
            raised.append(str(exc))

    with gate.slot((0, 0)):
        waiter = threading.Thread(target=wait)
        waiter.start()
        _until(lambda: gate.waiting == 1, "the second request waiting")
        gate.stop("stopped by SIGTERM")
        waiter.join(WAIT)
    with pytest.raises(Stopped, match="SIGTERM"):
        with gate.slot((1, 1)):
            pass
    assert raised == ["stopped by SIGTERM"] and gate.refused == 2 and gate.admitted == 1


def test_a_paused_gate_admits_only_the_extension_whose_failure_is_being_decided():
    gate, order = Gate(2), []
    failing, other = object(), object()

    def take(owner: object, name: str) -> None:
        with gate.slot((0, 0), owner):
            order.append(name)

    gate.pause(failing)
    waiter = threading.Thread(target=take, args=(other, "other"))
    waiter.start()
    _until(lambda: gate.waiting == 1, "the other extension waiting")
    take(failing, "retry")  # the failing extension's own retry goes in, past the waiting line
    assert order == ["retry"] and gate.waiting == 1
    gate.resume(failing)  # it handled its failure: the others go on
    waiter.join(WAIT)
    assert order == ["retry", "other"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_processes_end_whole_process_groups_and_start_nothing_after_a_stop(tmp_path):
    gate, foreign = Gate(2), []
    processes = Processes(gate, foreign.append)
    codes: list[object] = []
    script = 'echo $$ >> "$1"; sleep 60 & echo $! >> "$1"; wait'
    pids = tmp_path / "pids"

    def compiler() -> None:
        try:
            codes.append(processes.run(["sh", "-c", script, "sh", str(pids)], None, {}))
        except Stopped:
            codes.append("refused")

    threads = [threading.Thread(target=compiler, name=f"project-{i}") for i in range(3)]
    for thread in threads:
        thread.start()
    _until(lambda: pids.is_file() and len(pids.read_text().split()) == 4, "two compilers and their children")
    assert gate.waiting == 1  # the third waits: two slots
    gate.stop("stopped by SIGINT")
    processes.kill_all()
    for thread in threads:
        thread.join(WAIT)
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 4 and not [p for p in started if _alive(p)]  # the sh and its sleep, twice
    assert sorted(map(str, codes)) == ["-15", "-15", "refused"] and processes.started == 2 and gate.refused == 1
    assert foreign == ["project-0", "project-1", "project-2"]  # threads of nobody's build: the pool is told
    with pytest.raises(Stopped):
        processes.run(["true"], None, {})


def test_an_extensions_compiler_settings_are_its_own_and_a_compile_starts_from_them():
    class Compiler:
        compiler_so = Scoped("compiler_so", MISSING)
        include_dirs = Scoped("include_dirs", [])

    compiler = Compiler()
    compiler.compiler_so = ["cc"]
    seen: dict[str, object] = {}
    ready = threading.Barrier(2)

    def build(name: str) -> None:
        with poolscope.entered(poolscope.extension(name, optional=False)) as scope:
            compiler.compiler_so = ["cc", f"-D{name}"]
            compiler.include_dirs.append(name)  # changed in place: still its own
            ready.wait(WAIT)  # both have set theirs before either reads
            with poolscope.entered(poolscope.job(scope)):
                seen[f"{name} compile"] = list(compiler.compiler_so)
                compiler.compiler_so = ["nvcc"]  # a compile's swap stays in the compile
            seen[name] = (list(compiler.compiler_so), list(compiler.include_dirs), sorted(scope.changed))

    threads = [threading.Thread(target=build, args=(n,)) for n in ("A", "B")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert seen["A"] == (["cc", "-DA"], ["A"], ["compiler_so"]) and seen["A compile"] == ["cc", "-DA"]
    assert seen["B"] == (["cc", "-DB"], ["B"], ["compiler_so"]) and seen["B compile"] == ["cc", "-DB"]
    assert compiler.compiler_so == ["cc"] and Compiler.include_dirs == [] and compiler.include_dirs == []
    with poolscope.entered(poolscope.extension("C", optional=False)) as scope:
        made = Compiler()  # a compiler made inside an extension's build: its first values are its own, shared
        made.compiler_so = ["gcc"]
        made.compiler_so = ["gcc", "-DC"]
    assert made.compiler_so == ["gcc"] and scope.changed == {"compiler_so"}


def test_a_signal_in_the_pool_calls_back_then_the_handler_that_was_there():
    calls: list[str] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append("theirs"))
    try:
        with on_signals(lambda signum: calls.append(f"ours {signum}")):
            os.kill(os.getpid(), signal.SIGTERM)
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
        assert calls == [f"ours {signal.SIGTERM.value}", "theirs", f"ours {signal.SIGINT.value}"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_compile_from_a_thread_of_the_projects_own_makes_the_pool_step_aside(tmp_path, capsys):
    compiler, ran = _compiler(), []
    compiler._compile = lambda obj, src, *rest: ran.append((src, threading.current_thread().name))
    with pooled(2, settle=0) as gate:
        assert gate is not None
        theirs = threading.Thread(
            target=compiler.compile, args=(["b.c", "a.c"],), kwargs={"output_dir": str(tmp_path)}, name="theirs"
        )
        theirs.start()
        theirs.join(WAIT)
    assert ran == [("b.c", "theirs"), ("a.c", "theirs")] and gate.admitted == 0  # as setuptools: in order, there
    assert (
        "compile pool steps aside: compile called from a thread of the project's own (theirs)"
        in capsys.readouterr().err
    )


def spawn(self, cmd, **kwargs):  # the shape of CCompiler.spawn before setuptools 80 (no CCompiler.call)
    raise AssertionError("replaced")


def test_before_setuptools_80_spawn_is_run_through_the_gate_with_distutils_errors():
    from distutils.errors import DistutilsExecError

    globals()["DistutilsExecError"] = DistutilsExecError  # what that distutils' ccompiler module has
    gate = Gate(1)
    ours = Processes(gate, lambda name: None).method(spawn)

    class Old:
        dry_run = False

    ours(Old(), ["true"])
    with pytest.raises(DistutilsExecError, match="'false' failed with exit code 1"):
        ours(Old(), ["false"])
    with pytest.raises(DistutilsExecError, match="'/nonexistent/cc' failed: "):
        ours(Old(), ["/nonexistent/cc"])
    dry = Old()
    dry.dry_run = True
    ours(dry, ["false"])  # a dry run runs nothing
    assert gate.admitted == 3
