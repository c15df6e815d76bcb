"""The compile pool on the shapes that made it change results, measured: counts, not times.

Each shape is a small real setuptools project of one-file C extensions, built with pip through
the shim (max-jobs 2) and the real C compiler behind a launcher that records every compile and
link it starts, its start and end, and can sleep first (a slow compile, to give a signal room):

  flags     20 extensions whose build_extension sets compiler_so with its own -D flag:
            how many answer with another's
  own       30 extensions of 3 sources and the parallelCCompile monkeypatch (8 threads):
            compilers at once
  links     30 extensions, a link that sleeps 0.3 s: links at once
  failure   30 extensions, the largest fails at once: compiles and links started after it
  signal    30 extensions, each compile 1 s; SIGINT to pip's process group (Ctrl-C) after 6
            compiles: compiles started after it, compilers left, seconds to exit
  build     the same through `rocm-build-backend build`, SIGTERM to the command alone: its exit
            code, compilers left, files left in the output folder

    python3 bench/bench_pool_results.py            # this checkout
    python3 bench/bench_pool_results.py --installed  # the installed rocm-build-backend (an older one)
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = """#!/bin/sh
case " $* " in *" -c "*) kind=compile ;; *) kind=link ;; esac
src="-"; for a in "$@"; do case "$a" in *.c) src="${a##*/}" ;; esac; done
echo "start $kind $src $$ $(date +%s.%N)" >> "$REC"
[ "$kind" = compile ] && [ -n "$SLOW" ] && sleep "$SLOW"
[ "$kind" = link ] && [ -n "$SLOW_LINK" ] && sleep "$SLOW_LINK"
cc "$@"; rc=$?
echo "end $kind $src $$ $(date +%s.%N) $rc" >> "$REC"
exit $rc
"""
MODULE = (
    "#include <Python.h>\nstatic PyObject* answer(PyObject* s, PyObject* a) {{ return PyLong_FromLong({expr}); }}\n"
    'static PyMethodDef m[] = {{{{"answer", answer, METH_NOARGS, NULL}}, {{NULL, NULL, 0, NULL}}}};\n'
    'static struct PyModuleDef d = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, m}};\n'
    "PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&d); }}\n"
)
PYPROJECT = (
    '[build-system]\nrequires = ["rocm-build-backend", "setuptools>=64"]\nbuild-backend = "rocm_build_backend"\n'
    '[project]\nname = "{n}"\nversion = "0.1.0"\n[tool.setuptools]\npackages = ["{n}"]\n'
    '[tool.rocm-build-backend]\nbackend = "setuptools.build_meta"\nverify = "off"\n'
)
SETUPS = {
    "plain": "from setuptools import Extension, setup\n"
    "setup(ext_modules=[Extension(f'{n}._e{i}', [f'csrc/e{i}.c']) for i in range({count})])\n",
    "flags": "from setuptools import Extension, setup\nfrom setuptools.command.build_ext import build_ext\n"
    "class B(build_ext):\n    def build_extensions(self):\n        self.base = list(self.compiler.compiler_so)\n"
    "        super().build_extensions()\n    def build_extension(self, ext):\n"
    "        self.compiler.compiler_so = self.base + ['-DWHICH=' + ext.name.rsplit('_e', 1)[1]]\n"
    "        super().build_extension(ext)\n"
    "setup(ext_modules=[Extension(f'{n}._e{i}', [f'csrc/e{i}.c']) for i in range({count})], cmdclass={'build_ext': B})\n",
    "own": "import distutils.ccompiler\nfrom multiprocessing.pool import ThreadPool\nfrom setuptools import Extension, setup\n"
    "def parallelCCompile(self, sources, output_dir=None, macros=None, include_dirs=None, debug=0,\n"
    "                     extra_preargs=None, extra_postargs=None, depends=None):\n"
    "    macros, objects, extra_postargs, pp_opts, build = self._setup_compile(output_dir, macros, include_dirs, sources, depends, extra_postargs)\n"
    "    cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)\n"
    "    def one(obj):\n        src, ext = build[obj]\n        self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)\n"
    "    list(ThreadPool(8).imap(one, objects))\n    return objects\n"
    "distutils.ccompiler.CCompiler.compile = parallelCCompile\n"
    "setup(ext_modules=[Extension(f'{n}._e{i}', [f'csrc/e{i}.c', f'csrc/a{i}.c', f'csrc/b{i}.c']) for i in range({count})])\n",
}


def project(root: Path, shape: str, count: int, expr: str = "{i}") -> Path:
    n = f"p{shape}"
    folder = root / shape
    (folder / n).mkdir(parents=True)
    (folder / n / "__init__.py").write_text("")
    (folder / "pyproject.toml").write_text(PYPROJECT.format(n=n))
    (folder / "csrc").mkdir()
    for i in range(count):
        (folder / "csrc" / f"e{i}.c").write_text(MODULE.format(name=f"_e{i}", expr=expr.replace("{i}", str(i))))
        for part in "ab":
            (folder / "csrc" / f"{part}{i}.c").write_text(f"int {part}{i}(void) {{ return 0; }}\n")
    (folder / "setup.py").write_text(
        SETUPS.get(shape, SETUPS["plain"]).replace("{n}", n).replace("{count}", str(count))
    )
    return folder


def environment(root: Path, installed: bool, **extra: str) -> dict[str, str]:
    tool = root / "rec-cc"
    tool.write_text(LAUNCHER)
    tool.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("MAX_JOBS", "PYTHONPATH")}
    env.update(
        CC=str(tool),
        REC=str(root / "record.txt"),
        XDG_CACHE_HOME=str(root / "cache"),
        PIP_NO_CACHE_DIR="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        **extra,
    )
    if not installed:
        env["PYTHONPATH"] = str(ROOT)
    return env


def pip(folder: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-v",
        "--no-build-isolation",
        "--no-deps",
        "-w",
        str(out),
        str(folder),
        "-C",
        "rocm-build-backend.targets=gfx90a",
        "-C",
        "rocm-build-backend.max-jobs=2",
        "-C",
        "rocm-build-backend.compiler-check=false",
    ]


def records(root: Path) -> list[list[str]]:
    path = root / "record.txt"
    return [ln.split() for ln in path.read_text().splitlines()] if path.exists() else []


def most_at_once(rows: list[list[str]], kind: str | None = None) -> int:
    edges = sorted((float(r[4]), 1 if r[0] == "start" else -1) for r in rows if kind in (None, r[1]))
    now = most = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def alive(pids: list[int]) -> int:
    left = 0
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        left += state != "Z"
    return left


def answers(wheel: Path, root: Path, package: str, count: int) -> list[int]:
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(root / "site")
    code = f"import importlib; print(*[importlib.import_module('{package}._e%d' % i).answer() for i in range({count})])"
    out = subprocess.run([sys.executable, "-c", code], cwd=root / "site", capture_output=True, text=True, check=True)
    return [int(x) for x in out.stdout.split()]


def shape_flags(root: Path, installed: bool) -> str:
    folder = project(root, "flags", 20, expr="WHICH")
    subprocess.run(pip(folder, root / "out"), env=environment(root, installed), capture_output=True, check=True)
    got = answers(next((root / "out").glob("*.whl")), root, "pflags", 20)
    return f"{sum(1 for i, a in enumerate(got) if a != i)} of 20 extensions built with another's flags"


def shape_own(root: Path, installed: bool) -> str:
    folder = project(root, "own", 30)
    subprocess.run(
        pip(folder, root / "out"), env=environment(root, installed, SLOW="0.2"), capture_output=True, check=True
    )
    rows = records(root)
    return f"{most_at_once(rows)} compilers at once (budget 2), {sum(1 for r in rows if r[0] == 'start')} runs"


def shape_links(root: Path, installed: bool) -> str:
    folder = project(root, "links", 30)
    subprocess.run(
        pip(folder, root / "out"), env=environment(root, installed, SLOW_LINK="0.3"), capture_output=True, check=True
    )
    rows = records(root)
    return f"{most_at_once(rows, 'link')} links at once, {most_at_once(rows)} compilers and links at once (2 slots)"


def shape_failure(root: Path, installed: bool) -> str:
    folder = project(root, "failure", 30)
    (folder / "csrc" / "e0.c").write_text("#error fails\n/*" + " " * 5000 + "*/\n")
    subprocess.run(pip(folder, root / "out"), env=environment(root, installed), capture_output=True)
    rows = records(root)
    failed = next(i for i, r in enumerate(rows) if r[0] == "end" and r[5] != "0")
    after = [r for r in rows[failed + 1 :] if r[0] == "start"]
    return (
        f"after the failure: {sum(r[1] == 'compile' for r in after)} compiles and "
        f"{sum(r[1] == 'link' for r in after)} links started"
    )


def _signal_run(
    root: Path, argv: list[str], env: dict[str, str], signum: int, group: bool
) -> tuple[int, int, int, float]:
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    while sum(1 for r in records(root) if r[:2] == ["start", "compile"]) < 6:
        time.sleep(0.02)
    before = sum(1 for r in records(root) if r[0] == "start")
    sent = time.monotonic()
    os.killpg(proc.pid, signum) if group else proc.send_signal(signum)
    code = proc.wait()
    took = time.monotonic() - sent
    time.sleep(2)  # what an orphaned build still starts
    rows = records(root)
    pids = [int(r[3]) for r in rows if r[0] == "start"]
    return code, sum(1 for r in rows if r[0] == "start") - before, alive(pids), took


def shape_signal(root: Path, installed: bool) -> str:
    folder = project(root, "signal", 30)
    code, after, left, took = _signal_run(
        root, pip(folder, root / "out"), environment(root, installed, SLOW="1"), signal.SIGINT, group=True
    )
    return f"Ctrl-C: pip exit {code} after {took:.1f} s, {after} compiler runs started after it, {left} left running"


def shape_build(root: Path, installed: bool) -> str:
    folder = project(root, "build", 30)
    out = root / "out"
    argv = [
        sys.executable,
        "-m",
        "rocm_build_backend",
        "build",
        str(folder),
        "-o",
        str(out),
        "--targets",
        "gfx90a",
        "-C",
        "rocm-build-backend.max-jobs=2",
        "-C",
        "rocm-build-backend.compiler-check=false",
    ]
    code, after, left, took = _signal_run(
        root, argv, environment(root, installed, SLOW="1"), signal.SIGTERM, group=False
    )
    time.sleep(30 if installed else 0)  # an orphaned build goes on: see what it leaves
    files = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    return (
        f"SIGTERM: exit {code} after {took:.1f} s, {after} compiler runs started after it, {left} left running, "
        f"output folder {files}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--installed", action="store_true", help="measure the installed rocm-build-backend")
    parser.add_argument("shapes", nargs="*", default=["flags", "own", "links", "failure", "signal", "build"])
    args = parser.parse_args()
    for shape in args.shapes:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"{shape:8} {globals()['shape_' + shape](Path(tmp), args.installed)}", flush=True)


if __name__ == "__main__":
    main()
