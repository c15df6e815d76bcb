"""The shim and the install side with the oldest and the newest build tools users run.

Each set of ``tests/version_matrix.json`` gets a virtual environment of its own with exactly
those versions of pip, setuptools, wheel, build, uv, scikit-build-core and hatchling (the
oldest the docs promise; the newest on the index), and the shim installed from a wheel of this
tree (with its own dependencies at the set's versions). Every frontend then builds a real HIP
sample through the shim with real hipcc, and the install side (``rocm-build-backend install``,
which drives that environment's pip) installs the result. The wheels must hold exactly the
asked targets, stamped. Where the shim relies on details the tools do not promise, the matrix
checks them at both ends: the ``pool`` cell builds setuptools extensions side by side through the
compile pool (``setuptools._distutils``' private compile steps, ``build_ext``'s parallel
method, ``CCompiler.spawn`` behind the compiler cache, ``compiler_so_cxx``); every set's pip
has its options in ``install``'s tables (``wheel/install/args.py``); and ``zipfile``'s private
fields (``wheel/zipcopy.py``) are checked in every CPython of ``pythons`` installed here.

CI runs the cells the file marks ``ci``; ``tools/matrix.sh`` (``ROCM_BUILD_BACKEND_MATRIX=full``)
runs every cell. Installing a set needs pip's configured index.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.api import read_stamp
from helpers import ROOT, TESTS, clean_build_env, copy_sample, install_table_gaps, only_wheel, run

MATRIX = json.loads((TESTS / "version_matrix.json").read_text())
FULL = os.environ.get("ROCM_BUILD_BACKEND_MATRIX") == "full"
FRONTENDS = ("pip-wheel", "python-build", "uv-build", "skbuild", "hatchling", "install", "pool")
CELLS = [(s, f) for s in MATRIX["sets"] for f in FRONTENDS if FULL or [s, f] in MATRIX["ci"]]

needs_hipcc = pytest.mark.skipif(not shutil.which("hipcc"), reason="hipcc is not installed")


@pytest.fixture(scope="session")
def shim_wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shim")
    proc = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", out, ROOT])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return next(out.glob("*.whl"))


_VENVS: dict[str, Path] = {}


def venv_for(name: str, shim: Path, base: Path) -> Path:
    """The set's environment (made once per session): its python."""
    if name in _VENVS:
        return _VENVS[name]
    pins = MATRIX["sets"][name]
    home = base / name
    subprocess.run([sys.executable, "-m", "venv", home], check=True)
    python = home / "bin" / "python"
    # the set's pip sees neither this process's pip settings nor its PYTHONPATH (a checkout there,
    # with its egg-info, would read as the shim already installed)
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "PYTHONPATH" and (not k.startswith("PIP_") or k in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"))
    }
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    first = run([*pip, "--upgrade", f"pip=={pins['pip']}" if pins["pip"] else "pip"], env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    reqs = [f"{k}=={v}" if v else k for k, v in pins.items() if k != "pip"]
    proc = run([*pip, "--upgrade", *reqs, shim], env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _VENVS[name] = python
    return python


def versions(python: Path) -> dict[str, str]:
    code = "import importlib.metadata as m, json, sys; print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
    names = list(MATRIX["sets"]["oldest"])
    return json.loads(subprocess.run([python, "-c", code, *names], capture_output=True, text=True, check=True).stdout)


def stamped_targets(wheel: Path) -> tuple[list[str], list[list[str]]]:
    """What the stamp says was asked for, and what its audit found in each file."""
    stamp = read_stamp(wheel)
    assert stamp is not None
    return list(stamp["requested"]["targets"]), [f["targets"] for f in stamp["audit"]["files"].values()]


@needs_hipcc
@pytest.mark.parametrize(("name", "frontend"), CELLS, ids=[f"{s}-{f}" for s, f in CELLS])
def test_a_frontend_of_the_set_builds_through_the_shim(tmp_path, tmp_path_factory, shim_wheel, name, frontend):
    python = venv_for(name, shim_wheel, tmp_path_factory.getbasetemp() / "matrix-venvs")
    pins = {k: v for k, v in MATRIX["sets"][name].items() if v}
    got = versions(python)
    assert {k: got[k] for k in pins} == pins  # the set is what runs, not what was there before
    env = {
        **clean_build_env(tmp_path),
        "HIP_PLATFORM": "amd",
        "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("PYTHONPATH", None)  # the shim from the set's environment, not from this tree
    out = tmp_path / "out"
    sample = "skbuild_hip" if frontend == "skbuild" else "hatch_pure" if frontend == "hatchling" else "setuptools_hip"
    project = copy_sample(sample, tmp_path)
    target = "gfx908" if frontend in ("python-build", "install") else "gfx90a"
    env["ROCM_BUILD_BACKEND_TARGETS"] = target
    if frontend == "pool":
        return check_the_pool(name, python, env, tmp_path)
    if frontend in ("pip-wheel", "skbuild", "hatchling", "install"):
        argv = [python, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", out, project.resolve()]
    elif frontend == "python-build":
        argv = [python, "-m", "build", "--wheel", "--no-isolation", "-o", out, project]
    else:
        argv = [
            python.parent / "uv",
            "build",
            "--wheel",
            "--no-build-isolation",
            "-o",
            out,
            "--python",
            python,
            project,
        ]
    proc = run(argv, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheel = only_wheel(out)
    if frontend == "hatchling":  # a pure project: the shim passes it through, no device code, no stamp
        with zipfile.ZipFile(wheel) as zf:
            assert not any(n.endswith(".so") for n in zf.namelist())
        return
    assert stamped_targets(wheel) == ([target], [[target]])
    if frontend == "install":
        done = run(
            [python.parent / "rocm-build-backend", "install", "--targets", target, "--python", python, "--", wheel],
            env=env,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "rocm-sample-hip 0.1.0" in done.stdout and "loads here" in done.stdout
        shown = run([python, "-m", "pip", "show", "rocm-sample-hip"], env=env)
        assert shown.returncode == 0 and "Version: 0.1.0" in shown.stdout


# ----------------------------------------------------------------- what the tools do not promise

MODULE = """#include <Python.h>
{decls}
static PyObject* answer(PyObject* self, PyObject* args) {{ return PyLong_FromLong({expr}); }}
static PyMethodDef methods[] = {{{{"answer", answer, METH_NOARGS, NULL}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, methods}};
PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&def); }}
"""
POOL_PYPROJECT = """[build-system]
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
# torch's shape without torch: BuildExtension with use_ninja=False, read from setup.py (never run)
TORCH_SHAPE = """from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext as BuildExtension


def with_options(use_ninja=True):
    return BuildExtension


setup(ext_modules=[Extension("{name}._one", ["csrc/_one.c"]), Extension("{name}._two", ["csrc/_two.c"])],
      cmdclass={{"build_ext": with_options(use_ninja=False)}})
"""


def pool_project(root: Path, name: str, torch_shape: bool) -> Path:
    """Three C extensions (``_multi`` of three sources, ``_one``, ``_two``), or torch's shape of two."""
    project = root / name
    (project / name).mkdir(parents=True)
    (project / name / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text(POOL_PYPROJECT.format(name=name))
    (project / "csrc").mkdir()
    for ext, value in (("_one", 1), ("_two", 2)):
        (project / "csrc" / f"{ext}.c").write_text(MODULE.format(name=ext, decls="", expr=value))
    if torch_shape:
        (project / "setup.py").write_text(TORCH_SHAPE.format(name=name))
        return project
    for part in ("a", "b"):
        (project / "csrc" / f"{part}.c").write_text(f"int part_{part}(void) {{ return 10; }}\n")
    (project / "csrc" / "_multi.c").write_text(
        MODULE.format(name="_multi", decls="int part_a(void); int part_b(void);", expr="part_a() + part_b()")
    )
    (project / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        f"setup(ext_modules=[Extension('{name}._multi', ['csrc/_multi.c', 'csrc/a.c', 'csrc/b.c']),\n"
        f"                   Extension('{name}._one', ['csrc/_one.c']), Extension('{name}._two', ['csrc/_two.c'])])\n"
    )
    return project


def pool_build(python: Path, project: Path, out: Path, env: dict[str, str], cache: str) -> str:
    settings = ("max-jobs=2", "compiler-check=false", f"compiler-cache={cache}")  # pip 23.0 has no -C
    argv = [
        python,
        "-m",
        "pip",
        "wheel",
        "-v",
        "--no-build-isolation",
        "--no-deps",
        "-w",
        out,
        project,
        *(f"--config-settings=rocm-build-backend.{s}" for s in settings),
    ]
    proc = run(argv, env=env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    return log


def answers(python: Path, wheel: Path, folder: Path, package: str, modules: list[str]) -> list[int]:
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(folder)
    code = f"import importlib; print([importlib.import_module('{package}.' + m).answer() for m in {modules!r}])"
    proc = subprocess.run([python, "-c", code], cwd=folder, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout))


def check_the_pool(name: str, python: Path, env: dict[str, str], tmp_path: Path) -> None:
    """setuptools' private compile steps, as the compile pool, the compiler cache and the split
    of the job budget use them (builder/pool.py, poolext.py, cachespawn.py, parallel.py), with the
    set's setuptools: the pool compiles every source (5 compiles), ccache sees each one through
    the replaced ``spawn``, and torch's shape without ninja is pooled only where this setuptools
    compiles C++ with a ``compiler_so_cxx`` of its own (not setuptools 64)."""
    cache = "ccache" if shutil.which("ccache") else "off"
    env = {**env, "CCACHE_DIR": str(tmp_path / "ccache")}
    log = pool_build(python, pool_project(tmp_path, "pool_ext", False), tmp_path / "out", env, cache)
    assert "compile pool: 2 slots shared by 3 extensions, largest first" in log, log[-4000:]
    assert "compile pool: 5 compiles from 3 compile calls" in log, log[-4000:]
    if cache == "ccache":
        assert "compiler cache: ccache: 0 hits, 5 misses" in log, log[-4000:]
    wheel = only_wheel(tmp_path / "out")
    assert answers(python, wheel, tmp_path / "site", "pool_ext", ["_multi", "_one", "_two"]) == [20, 1, 2]
    log = pool_build(python, pool_project(tmp_path, "shape_ext", True), tmp_path / "out2", env, "off")
    if name == "oldest":
        assert "this setuptools has no compiler_so_cxx" in log and "compile pool:" not in log, log[-4000:]
    else:
        assert "2 extensions without ninja: 2 at once, their compiles through one pool" in log, log[-4000:]
        assert "compile pool: 2 compiles from 2 compile calls" in log, log[-4000:]
    assert answers(python, only_wheel(tmp_path / "out2"), tmp_path / "site2", "shape_ext", ["_one", "_two"]) == [1, 2]


@pytest.mark.parametrize("name", [s for s in MATRIX["sets"] if FULL or any(c[0] == s for c in MATRIX["ci"])])
def test_the_sets_pip_has_its_options_in_installs_tables(tmp_path_factory, shim_wheel, name):
    """pip has no machine-readable list of its options: ``install`` keeps tables of them, checked
    here against the set's pip (as tests/unit/test_install_args.py checks this one's)."""
    python = venv_for(name, shim_wheel, tmp_path_factory.getbasetemp() / "matrix-venvs")
    assert install_table_gaps(python) == []


ZIPCOPY = """
import hashlib, io, sys, zipfile
sys.path.insert(0, sys.argv[1])
from rocm_build_backend.wheel import zipcopy

data = bytes(range(256)) * 4096
src = io.BytesIO()
with zipfile.ZipFile(src, "w") as z:
    z.writestr(zipfile.ZipInfo("demo/lib.so", (2020, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED, 1)
zin = zipfile.ZipFile(src)
info = zin.getinfo("demo/lib.so")
dst = io.BytesIO()
zout = zipfile.ZipFile(dst, "w")
assert zipcopy.can_copy_raw(zout, info), "zipfile lacks the private fields the raw copy uses"
zipcopy.copy_raw(src, len(src.getvalue()), info, zout, zipcopy.new_info(info, "demo/lib.so"), hashlib.sha256().update)
zout.writestr("demo/after.txt", "a member written through the public API after the raw one")
zout.close()
back = zipfile.ZipFile(io.BytesIO(dst.getvalue()))
assert back.testzip() is None and back.read("demo/lib.so") == data
got = back.getinfo("demo/lib.so")
start = got.header_offset + 30 + len(got.filename.encode()) + len(got.extra)
raw = dst.getvalue()[start:start + got.compress_size]
first = src.getvalue()[info.header_offset + 30 + len(info.filename.encode()) + len(info.extra):][:info.compress_size]
assert raw == first, "the member was compressed again, not copied"
print("ok", sys.version_info[:2])
"""


def _installed_python(version: str) -> str | None:
    """``python<version>`` on PATH when it runs and is that version (pyenv's shims may not)."""
    exe = shutil.which(f"python{version}")
    if exe is None:
        return None
    probe = subprocess.run(
        [exe, "-c", "import sys; print(*sys.version_info[:2], sep='.')"], capture_output=True, text=True
    )
    return exe if probe.returncode == 0 and probe.stdout.strip() == version else None


def test_zipfiles_private_fields_copy_a_member_raw_in_every_python():
    """``wheel/zipcopy.py`` writes a member's compressed bytes through ``zipfile``'s private
    fields (no public call copies without recompressing): in each CPython the shim supports that
    is installed here (this interpreter's at least), the copy must be raw (the same compressed
    bytes, not recompressed) and the zip valid, with a member written through the public API after it."""
    found = {v: exe for v in MATRIX["pythons"] if (exe := _installed_python(v))}
    assert f"{sys.version_info[0]}.{sys.version_info[1]}" in found, (MATRIX["pythons"], found)
    for version, exe in found.items():
        proc = subprocess.run([exe, "-I", "-S", "-c", ZIPCOPY, str(ROOT)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and proc.stdout.startswith("ok"), (version, proc.stdout + proc.stderr)
