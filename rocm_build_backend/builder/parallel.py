"""Every core: setuptools' parallel ``build_ext``, the compile pool, and the job budget split.

setuptools builds a project's extensions one after another; each compiles its files one at a
time, unless torch's ninja builds them (``MAX_JOBS`` jobs). A project with many extensions and
no ninja (torch-scatter's ``use_ninja=False``, plain ``Extension`` lists) then uses one core.
setuptools' own ``[build_ext] parallel = N`` (read from the file named by ``DIST_EXTRA_CONFIG``,
setuptools 64+) builds N extensions at once. The memory-aware budget of parallel jobs (``MAX_JOBS``
of the plan) is split so that the compiles at once stay within it:

- one extension, a CMake or other non-setuptools build: 1 x budget (nothing changes);
- torch's ``BuildExtension`` with ninja (its default): every extension writes
  ``build_temp/build.ninja`` (``_write_ninja_file_and_compile_objects``), so each gets a
  ``build_temp`` of its own (``apart.py``) and min(count, budget) build at once, largest first,
  budget // that jobs each (one ninja each); without ninja torch swaps the compiler object's
  ``compiler_so`` for nvcc while a .cu file compiles, which extensions side by side share: safe
  only where setuptools compiles C++ with a ``compiler_so_cxx`` of its own (setuptools 84 does),
  else one at a time (``pool.py`` keeps each compile's swap to itself);
- a project that compiles side by side itself (seen in ``setup.py`` by what it does: a
  ``compile`` attribute assigned, as the ``parallelCCompile`` monkeypatch does, or pybind11's
  ``ParallelCompile`` under any name): one extension at a time, the budget for its threads, and
  on POSIX the pool steps aside (``aside``): it compiles nothing itself, but every compiler
  process still takes one of ``budget`` places, so its threads stay within the budget;
- several extensions without ninja, or an unknown number made in a loop, on POSIX: all of them
  at once (up to ``ALL_AT_ONCE``), and their compiles through one compile pool of ``budget``
  slots shared by all, largest first (``pool.py``), 1 job each; elsewhere min(count, budget) at
  once, budget // that jobs each, or one at a time when a ``build_extension`` of ``setup.py`` sets
  the shared compiler's settings for its extension (``per_extension``: only the pool keeps those
  apart);
- a ``[build_ext] parallel`` the project (``setup.cfg``) or the user (``DIST_EXTRA_CONFIG``) set:
  theirs, with budget // theirs jobs each, and no pool.

``read_extensions`` reads ``setup.py`` with ``ast`` (never runs it); ``split`` is pure;
``merged_config`` writes the user's ``DIST_EXTRA_CONFIG`` plus ours into a new file in the
build's temporary folder (theirs is never edited). Project job variables other than
``MAX_JOBS`` (``NVCC_THREADS``, ``CUPY_NUM_BUILD_JOBS``) come from ``data/jobs.json``.
"""

from __future__ import annotations

import ast
import configparser
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, NamedTuple

from rocm_build_backend.builder.profiles import normalize
from rocm_build_backend.data import path as data_path
from rocm_build_backend.files import read_regular

_CONSTRUCTORS = frozenset(
    {"Extension", "CUDAExtension", "CppExtension", "Pybind11Extension", "HIPExtension", "SyclExtension"}
)
_MAX_SETUP = 1 << 20
ALL_AT_ONCE = 64  # extensions started together when the compile pool bounds their compiles


class Extensions(NamedTuple):
    """What ``setup.py`` shows of its extensions."""

    sites: int = 0  # constructor calls in the source
    looped: bool = False  # one of them in a loop or comprehension: the count is not known
    torch: bool = False  # torch.utils.cpp_extension's BuildExtension builds them
    ninja: bool = True  # False when it says use_ninja=False
    custom: bool = False  # a class of its own derived from Extension (CMake-style builds)
    theirs: int | None = None  # a [build_ext] parallel of the project's own (setup.cfg)
    user: int | None = None  # a [build_ext] parallel of the user's own (DIST_EXTRA_CONFIG)
    cxx_apart: bool = True  # setuptools compiles C++ with its own compiler_so_cxx (see split)
    own_pool: str = ""  # why setup.py is seen to compile side by side itself ("": it is not)
    per_extension: str = ""  # where its build_extension sets the compiler's settings ("": nowhere seen)
    pool: bool = True  # this host can pool setuptools' compiles (POSIX: the unix compiler, pool.py)


class Split(NamedTuple):
    """What ``split`` decided."""

    at_once: int  # extensions built at once ([build_ext] parallel)
    each: int  # jobs of each (MAX_JOBS)
    why: str
    pool: int = 0  # slots of the compile pool shared by all extensions; 0: no pool
    aside: str = ""  # the pool steps aside (the project compiles side by side itself): why
    apart: bool = False  # torch's ninja builds: each extension a build_temp of its own (apart.py)


def _name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def read_extensions(source_dir: Path, env: Mapping[str, str]) -> Extensions:
    """The extension facts of ``setup.py`` and ``setup.cfg``, and the user's ``DIST_EXTRA_CONFIG``
    (an empty answer when unreadable)."""
    theirs = _cfg_parallel(source_dir / "setup.cfg")
    user = user_parallel(env)
    try:  # a regular file inside the project only: never a FIFO (it would block), never a link out
        setup = source_dir / "setup.py"
        setup.resolve().relative_to(source_dir.resolve())
        tree = ast.parse(read_regular(setup, _MAX_SETUP, head=True))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError, RuntimeError):
        return Extensions(theirs=theirs, user=user)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    loops = (ast.For, ast.While, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp, ast.AsyncFor)
    sites, looped, torch, ninja, custom = 0, False, False, True, False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in _CONSTRUCTORS:
            sites += 1
            up = parents.get(node)
            while up is not None and not isinstance(up, (ast.FunctionDef, ast.Module)):
                looped = looped or isinstance(up, loops)
                up = parents.get(up)
        elif isinstance(node, ast.keyword) and node.arg == "use_ninja":
            ninja = not (isinstance(node.value, ast.Constant) and node.value.value is False)
        elif isinstance(node, (ast.Name, ast.Attribute)) and _name(node) == "BuildExtension":
            torch = True
        elif isinstance(node, ast.ClassDef) and any(_name(b) in _CONSTRUCTORS for b in node.bases):
            custom = True
    return Extensions(
        sites,
        looped,
        torch,
        ninja,
        custom,
        theirs,
        user,
        cxx_apart=_cxx_apart() if torch and not ninja else True,
        own_pool=_compiles_itself(tree),
        per_extension=_sets_compiler(tree),
        pool=os.name == "posix",
    )


_SETTERS = frozenset(
    {
        "set_executable",
        "set_executables",
        "define_macro",
        "undefine_macro",
        "add_include_dir",
        "set_include_dirs",
        "add_library",
        "set_libraries",
        "add_library_dir",
        "set_library_dirs",
        "add_runtime_library_dir",
        "set_runtime_library_dirs",
        "add_link_object",
        "set_link_objects",
    }
)


def _compiles_itself(tree: ast.AST) -> str:
    """Where ``setup.py`` puts a parallel compile of its own in place, by what the code does:
    something assigned to a ``compile`` attribute (``CCompiler.compile = parallelCCompile``),
    ``setattr(..., "compile", ...)``, or pybind11's ``ParallelCompile`` under any name."""
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if (
            isinstance(node, ast.Assign)
            and not isinstance(node.value, ast.Constant)
            and any(
                isinstance(t, ast.Attribute) and t.attr == "compile" and _name(t.value) != "self" for t in node.targets
            )
        ):
            return f"setup.py line {line} replaces a compiler's compile"  # not a command's option (self.compile = 0)
        if (
            isinstance(node, ast.Call)
            and _name(node.func) == "setattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value == "compile"
        ):
            return f"setup.py line {line} replaces a compiler's compile"
        if isinstance(node, ast.ImportFrom) and any(a.name == "ParallelCompile" for a in node.names):
            return f"setup.py line {line} imports pybind11's ParallelCompile"
        if isinstance(node, ast.Attribute) and node.attr == "ParallelCompile":
            return f"setup.py line {line} uses pybind11's ParallelCompile"
    return ""


def _line(node: ast.AST) -> int:
    return int(getattr(node, "lineno", 0))


def _sets_compiler(tree: ast.AST) -> str:
    """Where a ``build_extension`` of ``setup.py`` sets the compiler's settings for its extension
    (``self.compiler.compiler_so = ...``, ``self.compiler.set_executable(...)``,
    ``self.compiler.compiler_so.append(...)``)."""
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or func.name != "build_extension":
            continue
        for node in ast.walk(func):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AugAssign)
                else []
            )
            for target in targets:
                if isinstance(target, ast.Attribute) and _name(target.value) == "compiler":
                    return f"build_extension sets the compiler's {target.attr} (setup.py line {_line(node)})"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                if node.func.attr in _SETTERS and _name(owner) == "compiler":
                    return f"build_extension calls the compiler's {node.func.attr} (setup.py line {_line(node)})"
                if isinstance(owner, ast.Attribute) and _name(owner.value) == "compiler":
                    return f"build_extension changes the compiler's {owner.attr} (setup.py line {_line(node)})"
    return ""


def _cxx_apart() -> bool:
    """Whether this setuptools compiles C++ sources with ``compiler_so_cxx``, apart from the
    ``compiler_so`` that torch's non-ninja build swaps for nvcc while a .cu file compiles.

    Read from the private ``setuptools._distutils`` (setuptools says nothing public about which
    executables its compiler class has); a setuptools without it answers False, and the
    extensions build one at a time. Checked with setuptools 64.0.0 (False) and the newest (True)
    by the version matrix's ``pool`` cell."""
    try:  # an optional dependency, probed where it is used
        from setuptools._distutils.unixccompiler import UnixCCompiler
    except (ImportError, AttributeError):  # no setuptools here, or another layout: not side by side
        return False
    return "compiler_so_cxx" in getattr(UnixCCompiler, "executables", {})


def _cfg_parallel(path: Path, text: str | None = None) -> int | None:
    """``[build_ext] parallel`` of a setuptools configuration file, when it is a number."""
    parser = configparser.RawConfigParser(strict=False)
    try:
        if text is None:
            if not path.is_file():
                return None
            text = read_regular(path, _MAX_SETUP, head=True).decode("utf-8", "replace")
        parser.read_string(text)
        value = parser.get("build_ext", "parallel", fallback=None)
    except (OSError, configparser.Error):
        return None
    return int(value) if value and value.strip().isdigit() and int(value) > 0 else None


def user_parallel(env: Mapping[str, str]) -> int | None:
    """The ``[build_ext] parallel`` of the user's own ``DIST_EXTRA_CONFIG``, when they set one."""
    given = env.get("DIST_EXTRA_CONFIG")
    return _cfg_parallel(Path(given)) if given else None


def split(budget: int, ext: Extensions, *, backend_kind: str) -> Split:
    """Extensions at once, jobs of each, why, and the compile pool's slots. Pure."""
    budget = max(1, budget)
    given = ext.user or ext.theirs
    if given:
        who = "DIST_EXTRA_CONFIG" if ext.user else "setup.cfg"
        return Split(given, max(1, budget // given), f"[build_ext] parallel = {given} from {who}")
    if backend_kind != "setuptools" or ext.custom or ext.sites == 0:
        return Split(1, budget, "one build at a time (not a setuptools extension build)")
    if ext.sites == 1 and not ext.looped:
        return Split(1, budget, "one extension")
    if ext.torch and ext.ninja:
        at_once = min(budget, ALL_AT_ONCE) if ext.looped else min(ext.sites, budget, ALL_AT_ONCE)
        each = max(1, budget // at_once)
        return Split(
            at_once,
            each,
            (
                f"torch's ninja builds, each extension in a build_temp (and build.ninja) of its "
                f"own: {at_once} at once x {each} jobs each, largest first, within {budget}"
            ),
            apart=True,
        )
    if ext.torch and not ext.cxx_apart:
        return Split(
            1,
            budget,
            (
                "torch's build without ninja swaps the one shared compiler for nvcc while a .cu "
                "file compiles; this setuptools has no compiler_so_cxx, so extensions side by side "
                "could compile C++ with nvcc: one at a time"
            ),
        )
    if ext.own_pool:
        return Split(
            1,
            budget,
            f"setup.py compiles side by side itself ({ext.own_pool}): one extension at a time, {budget} jobs for it",
            pool=budget if ext.pool else 0,
            aside=f"setup.py compiles side by side itself ({ext.own_pool})" if ext.pool else "",
        )
    what = f"{'extensions made in a loop' if ext.looped else f'{ext.sites} extensions'}{' without ninja' if ext.torch else ''}"
    at_once = budget if ext.looped else min(ext.sites, budget)
    if at_once > 1 and ext.pool:
        every = ALL_AT_ONCE if ext.looped else min(ext.sites, ALL_AT_ONCE)
        return Split(
            every,
            1,
            (
                f"{what}: {'up to ' if ext.looped else ''}{every} at once, their compiles through "
                f"one pool of {budget} slots, largest first, 1 job each"
            ),
            pool=budget,
        )
    if at_once > 1 and ext.per_extension:  # no pool here to keep each extension's compiler settings its own
        return Split(
            1,
            budget,
            f"{what}: one at a time, {budget} jobs: {ext.per_extension}, and extensions side by "
            "side without the compile pool share one compiler",
        )
    return Split(
        at_once,
        max(1, budget // at_once),
        f"{what}: {at_once} at once x {max(1, budget // at_once)} jobs each, within {budget}",
    )


def merged_config(directory: Path, parallel: int, user: str | None) -> Path:
    """A configuration file: the user's ``DIST_EXTRA_CONFIG`` (when set and readable) with
    ``[build_ext] parallel`` added unless they set it. Written into ``directory``."""
    parser = configparser.RawConfigParser(strict=False)
    if user:
        try:
            parser.read(user, encoding="utf-8")
        except (OSError, configparser.Error):
            pass
    if not parser.has_section("build_ext"):
        parser.add_section("build_ext")
    if not parser.has_option("build_ext", "parallel"):
        parser.set("build_ext", "parallel", str(parallel))
    out = directory / "setuptools-extra.cfg"
    with open(out, "w", encoding="utf-8") as fh:
        parser.write(fh)
    return out


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(data_path("jobs.json").read_text(encoding="utf-8"))
    return data


def job_variables(dist_name: str | None, jobs: int, budget: int) -> dict[str, tuple[str, str]]:
    """The project's own job variables for ``jobs`` per extension within ``budget``:
    name -> (value, where the project reads it), from ``data/jobs.json``."""
    if not dist_name:
        return {}
    out: dict[str, tuple[str, str]] = {}
    for entry in _table()["projects"].get(normalize(dist_name), []):
        value = str(entry["value"]).replace("{jobs}", str(jobs)).replace("{budget}", str(budget))
        out[entry["name"]] = (value, entry.get("source", ""))
    return out
