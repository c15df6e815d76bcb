"""The compile pool never changes what is built, only when: real setuptools projects built through
the shim with the real C compiler, run through a launcher script (``CC``) that records each
compile and link it starts (and can hold a compile until told to go on).

- a ``build_extension`` that sets ``self.compiler.compiler_so`` with a flag of its extension's
  own: every extension answers with its own flag (before: 19 of 20 had another's);
- a project's own parallel compile (the ``parallelCCompile`` monkeypatch, installed where the plan
  cannot see it): the pool steps aside and the compilers at once stay within the budget;
- the first failure: no other compile or link starts after it;
- SIGINT and SIGTERM to ``rocm-build-backend build``: it passes them to the build, no compile
  starts after the signal, no compiler process is left, no wheel or partial file stays behind.

Counts and process state are asserted, never time: the launcher records in order, and a held
compile waits for a file, not for a clock.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from helpers import ROOT, only_wheel, run

CLI = [sys.executable, "-m", "rocm_build_backend"]
WAIT = 60  # seconds a step may take before the test fails instead of hanging
PYPROJECT = """\
[build-system]
requires = ["rocm-build-backend", "setuptools>=64"]
build-backend = "rocm_build_backend"

[project]
name = "{name}"
version = "0.1.0"

[tool.setuptools]
packages = ["{name}"]

[tool.rocm-build-backend]
backend = "setuptools.build_meta"
verify = "off"
"""
# The launcher: one line per run ("compile SRC PID" or "link PID"); with HOLD set, a compile
# waits (in the background, so that the wait is part of its process group) until the file HOLD
# names exists, unless it compiles NO_HOLD; FAIL_MARK is written when a compile fails.
LAUNCHER = """\
#!/bin/sh
case " $* " in *" -c "*) kind=compile ;; *) kind=link ;; esac
src=""
for a in "$@"; do case "$a" in *.c) src="$a" ;; esac; done
echo "$kind ${{src##*/}} $$" >> "{record}"
if [ "$kind" = compile ] && [ -n "$HOLD" ] && [ "${{src##*/}}" != "$NO_HOLD" ]; then
    ( i=0; while [ ! -e "$HOLD" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done ) &
    echo "wait $!" >> "{record}"
    wait $!
fi
cc "$@"
rc=$?
if [ $rc -ne 0 ] && [ -n "$FAIL_MARK" ]; then : > "$FAIL_MARK"; fi
exit $rc
"""
MODULE = """\
#include <Python.h>
static PyObject* answer(PyObject* self, PyObject* args) {{ return PyLong_FromLong({expr}); }}
static PyMethodDef methods[] = {{{{"answer", answer, METH_NOARGS, NULL}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, methods}};
PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&def); }}
"""


@pytest.fixture
def build_env(build_env):
    """The builds run this checkout's shim, whatever is installed."""
    build_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), build_env.get("PYTHONPATH", "")) if p)
    return build_env


def _project(
    root: Path, name: str, count: int, setup: str, *, expr: str = "0", pad: dict[int, int] | None = None
) -> Path:
    """``count`` one-file C extensions ``{name}._e{i}`` answering ``expr``; ``pad``: extra bytes
    for some sources (the pool compiles the larger first)."""
    project = root / name
    (project / name).mkdir(parents=True)
    (project / name / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text(PYPROJECT.format(name=name))
    (project / "csrc").mkdir()
    for i in range(count):
        text = MODULE.format(name=f"_e{i}", expr=expr.replace("{i}", str(i)))
        (project / "csrc" / f"e{i}.c").write_text(text + "/*" + " " * (pad or {}).get(i, 0) + "*/\n")
    (project / "setup.py").write_text(setup.replace("{name}", name).replace("{count}", str(count)))
    return project


def _launcher(tmp_path: Path, env: dict[str, str]) -> Path:
    record = tmp_path / "record.txt"
    record.touch()
    tool = tmp_path / "rec-cc"
    tool.write_text(LAUNCHER.format(record=record))
    tool.chmod(0o755)
    env["CC"] = str(tool)
    return record


def _lines(record: Path) -> list[list[str]]:
    return [line.split() for line in record.read_text().splitlines()]


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _pip(project: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return run(_pip_argv(project, out), env=env)


def _pip_argv(project: Path, out: Path) -> list:
    return [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-v",
        "--no-build-isolation",
        "--no-deps",
        "-w",
        out,
        project,
        "-C",
        "rocm-build-backend.targets=gfx90a",
        "-C",
        "rocm-build-backend.max-jobs=2",
        "-C",
        "rocm-build-backend.compiler-check=false",
        "-C",
        "rocm-build-backend.compiler-cache=off",
    ]  # the pool's own compiler runs, no cache's


def _answers(wheel: Path, folder: Path, package: str, count: int) -> list[int]:
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(folder)
    code = (
        f"import importlib; print([importlib.import_module('{package}._e' + str(i)).answer() for i in range({count})])"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [int(x) for x in proc.stdout.strip().strip("[]").split(",")]


PER_EXTENSION = """\
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class PerExtension(build_ext):
    def build_extensions(self):
        self.base = list(self.compiler.compiler_so)
        super().build_extensions()

    def build_extension(self, ext):
        which = ext.name.rsplit("_e", 1)[1]
        self.compiler.compiler_so = self.base + ["-DWHICH=" + which]
        super().build_extension(ext)


setup(ext_modules=[Extension(f"{name}._e{i}", [f"csrc/e{i}.c"]) for i in range({count})],
      cmdclass={"build_ext": PerExtension})
"""


def test_each_extension_builds_with_the_compiler_settings_it_set(tmp_path, build_env):
    project = _project(tmp_path, "perext", 20, PER_EXTENSION, expr="WHICH")
    _launcher(tmp_path, build_env)
    proc = _pip(project, tmp_path / "out", build_env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "build_extension sets the compiler's compiler_so (setup.py line 12): each extension built beside" in log
    assert "compile pool: 20 extensions set the compiler's compiler_so for their own build" in log
    assert _answers(only_wheel(tmp_path / "out"), tmp_path / "site", "perext", 20) == list(range(20))


OWN_PARALLEL = """\
import distutils.ccompiler
from multiprocessing.pool import ThreadPool

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def parallel_compile(self, sources, output_dir=None, macros=None, include_dirs=None, debug=0,
                     extra_preargs=None, extra_postargs=None, depends=None):
    macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
        output_dir, macros, include_dirs, sources, depends, extra_postargs)
    cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)

    def one(obj):
        src, ext = build[obj]
        self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

    with ThreadPool(8) as pool:
        list(pool.imap(one, objects))
    return objects


class Installs(build_ext):
    def build_extensions(self):  # put in place where reading setup.py does not show it
        setattr(distutils.ccompiler.CCompiler, "com" + "pile", parallel_compile)
        super().build_extensions()


setup(ext_modules=[Extension(f"{name}._e{i}", [f"csrc/e{i}.c", f"csrc/more{i}.c", f"csrc/most{i}.c"])
                   for i in range({count})], cmdclass={"build_ext": Installs})
"""


def test_a_projects_own_parallel_compile_makes_the_pool_step_aside_within_the_budget(tmp_path, build_env):
    project = _project(tmp_path, "ownpar", 4, OWN_PARALLEL, expr="{i} + more{i}() + most{i}()")
    for i in range(4):
        for part in ("more", "most"):
            (project / "csrc" / f"{part}{i}.c").write_text(f"int {part}{i}(void) {{ return 0; }}\n")
    record = _launcher(tmp_path, build_env)
    build_env["HOLD"] = str(tmp_path / "go")  # every compile waits until the test has counted
    with subprocess.Popen(
        _pip_argv(project, tmp_path / "out"), env=build_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        _until(lambda: sum(1 for ln in _lines(record) if ln[0] == "compile") >= 2, "two compiles started")
        time.sleep(1.0)  # room for a third to start, were the budget not held (a count is asserted, not a time)
        held = sum(1 for ln in _lines(record) if ln[0] == "compile")
        (tmp_path / "go").touch()
        log, _ = proc.communicate(timeout=WAIT * 4)
    assert proc.returncode == 0, log[-3000:]
    assert held == 2, _lines(record)  # the project's 8 threads x 4 extensions, held to the 2 slots
    assert "compile pool steps aside: " in log  # the class is UnixCCompiler before setuptools 80, Compiler after
    assert "compile is __main__.parallel_compile, the project's own compile: the extensions build one at a time" in log
    assert "compile pool: 16 compiler runs, at most 2 at once (2 slots)" in log  # 12 compiles, 4 links
    assert sum(1 for ln in _lines(record) if ln[0] == "compile") == 12
    assert _answers(only_wheel(tmp_path / "out"), tmp_path / "site", "ownpar", 4) == [0, 1, 2, 3]


def _until(check, what: str) -> None:
    end = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < end, f"never {what}"
        time.sleep(0.02)


FAILING = """\
from setuptools import Extension, setup

setup(ext_modules=[Extension(f"{name}._e{i}", [f"csrc/e{i}.c"]) for i in range({count})])
"""


def test_the_first_failure_starts_no_other_compile_or_link(tmp_path, build_env):
    project = _project(tmp_path, "failing", 8, FAILING, expr="{i}", pad={0: 4000})
    (project / "csrc" / "e0.c").write_text("#error this extension does not compile\n/*" + " " * 4000 + "*/\n")
    record = _launcher(tmp_path, build_env)
    build_env["HOLD"] = build_env["FAIL_MARK"] = str(tmp_path / "failed")  # the others wait for the failure
    build_env["NO_HOLD"] = "e0.c"
    proc = _pip(project, tmp_path / "out", build_env)
    assert proc.returncode != 0
    runs = [ln for ln in _lines(record) if ln[0] in ("compile", "link")]
    assert [ln[1] for ln in runs if ln[0] == "compile"][0] == "e0.c", runs  # the largest first
    assert len(runs) == 2 and all(ln[0] == "compile" for ln in runs), runs  # e0's and the one beside it
    assert "this extension does not compile" in proc.stdout + proc.stderr
    assert not list((tmp_path / "out").glob("*.whl"))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_build_ends_every_compiler_and_leaves_nothing(tmp_path, build_env, signum):
    project = _project(tmp_path, "sigproj", 6, FAILING, expr="{i}")
    record = _launcher(tmp_path, build_env)
    build_env["HOLD"] = str(tmp_path / "never")
    out = tmp_path / "out"
    out.mkdir()
    (out / "kept.txt").write_text("was here before")
    argv = [
        *CLI,
        "build",
        project,
        "-o",
        out,
        "--targets",
        "gfx90a",
        "-C",
        "rocm-build-backend.max-jobs=2",
        "-C",
        "rocm-build-backend.compiler-check=false",
        "-C",
        "rocm-build-backend.compiler-cache=off",
    ]  # the pool's own compiler runs, no cache's
    with subprocess.Popen(
        argv, env=build_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as proc:
        _until(lambda: sum(1 for ln in _lines(record) if ln[0] == "wait") >= 2, "two compiles holding")
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)  # Ctrl-C: the terminal signals the command's process group
        else:
            proc.send_signal(signum)  # `kill`, a CI time limit: the command alone
        _, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 128 + signum, err[-3000:]
    lines = _lines(record)
    assert sum(1 for ln in lines if ln[0] == "compile") == 2, lines  # none started after the signal
    assert not any(ln[0] == "link" for ln in lines), lines
    pids = [int(ln[2]) for ln in lines if ln[0] == "compile"] + [int(ln[1]) for ln in lines if ln[0] == "wait"]
    assert len(pids) == 4 and not [p for p in pids if _alive(p)]  # every compiler's group ended
    assert sorted(p.name for p in out.iterdir()) == ["kept.txt"]
    assert f"error: building sigproj stopped by {signal.Signals(signum).name}" in err
