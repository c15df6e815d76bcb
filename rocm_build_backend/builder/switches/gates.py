"""What a CMake project's off-by-default options gate: ``evaluate`` walks its build the way CMake
would enter it (never running it) and says, for each ``option(X ... OFF)``, which vendors' GPU
builds turning it on adds, and why an option must be left alone.

As much CMake as that needs, not more: ``option()``; ``if()``/``elseif()``/``else()``/``endif()``
on them (a command inside ``if(X)`` is gated by X; inside ``else()`` or ``if(NOT X)`` it is not);
``set(Y ON)`` (or ``set(Y ${X})``) under ``if(X)`` makes Y stand for X; ``add_subdirectory`` and
``include`` into the project's folders, paths with variables resolved where the files set them.
What a gated command adds:

- the chosen vendor's language, toolkit or sources: ``enable_language(CUDA|HIP)``,
  ``project(... CUDA|HIP)``, ``find_package(CUDAToolkit|CUDA)`` (NVIDIA), ``find_package(hip)``
  and the ROCm libraries (``hipblas``, ``rocblas``, ...; AMD), ``CUDA::`` / ``hip::`` targets,
  ``.cu`` / ``.hip`` sources (a weaker sign: counted only when no language or toolkit is);
- another API: ``find_package(OpenCL|SYCL|IntelSYCL|Vulkan|Metal|Boost.Compute)``, ``-fsycl``,
  ``-framework Metal``, ``OpenCL::``/``Vulkan::`` targets: such an option is never applied.

An option is vendored (never applied) when its file lies under ``third_party/``, ``external/``,
``external_libs/``, ``deps/``, ``vendor/`` (and the like), or in a subproject: a folder below the
top one whose ``CMakeLists.txt`` calls ``project()``. Fallback target lists (a
``set(CMAKE_CUDA_ARCHITECTURES ...)`` inside an ``if`` on that same variable) are marked so.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rocm_build_backend.builder.switches.cmakelang import Command

VENDORED = (
    "third_party",
    "third-party",
    "thirdparty",
    "3rdparty",
    "external",
    "external_libs",
    "extern",
    "deps",
    "vendor",
    "vendored",
    "submodules",
)
_OFF = ("OFF", "FALSE", "NO", "0", "N", "")
_KEYWORDS = frozenset(
    {
        "NOT",
        "AND",
        "OR",
        "DEFINED",
        "STREQUAL",
        "STRLESS",
        "STRGREATER",
        "EQUAL",
        "LESS",
        "GREATER",
        "MATCHES",
        "VERSION_LESS",
        "VERSION_GREATER",
        "VERSION_EQUAL",
        "EXISTS",
        "COMMAND",
        "POLICY",
        "TARGET",
        "TEST",
        "IS_DIRECTORY",
        "IN_LIST",
        "ON",
        "OFF",
        "TRUE",
        "FALSE",
        "YES",
        "NO",
        "CACHE",
        "ENV",
    }
)
# Patterns, compiled (and kept by ``re``) when CMake files are read: not on every build's import.
_NV_PKG = r"(?i)(CUDAToolkit|CUDA|CUDAToolkit_\w+|NCCL|cuDNN|CUTLASS)$"
_AMD_PKG = r"(?i)(hip|HIP|hip\w+|roc\w+|rocm\w*|rccl|miopen|MIOpen)$"
_OTHER_PKG = r"(?i)(OpenCL|SYCL|IntelSYCL|Vulkan|Metal|MetalKit|oneDPL|OpenGL_OpenCL|ComputeCpp)$"
_OTHER_WORD = r"(^|[^A-Za-z])(-fsycl|OpenCL::|Vulkan::|SYCL::|Metal\b|MetalKit\b|CL/cl\.h)"
_VAR = r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}"
MAX_DEPTH, MAX_REFS, MAX_ARGS = 32, 8, 64  # if-nesting levels, names and words of one condition tracked
ARCH_VARS = frozenset({"CMAKE_CUDA_ARCHITECTURES", "CMAKE_HIP_ARCHITECTURES", "GPU_TARGETS", "AMDGPU_TARGETS"})


@dataclass
class Option:
    """An ``option(NAME ... OFF)`` and what turning it on adds."""

    name: str
    file: str
    line: int
    vendored: str = ""  # why it is vendored code ("under external_libs/"), else ""
    adds: dict[str, str] = field(default_factory=dict)  # vendor -> the first command that adds it ("... at f Ln")
    weak: dict[str, str] = field(default_factory=dict)  # vendor -> the first source file that adds it
    other: str = ""  # the first command needing another API

    def vendors(self) -> dict[str, str]:
        return dict(self.adds) if self.adds else dict(self.weak)


@dataclass
class Walk:
    """The state of one walk over a project's CMake files."""

    root: Path
    read: Callable[[Path], list[Command] | None]  # a file's commands, or None (outside, unreadable, budget)
    options: dict[str, Option] = field(default_factory=dict)
    aliases: dict[str, set[str]] = field(default_factory=dict)  # variable -> the options it stands for
    variables: dict[str, str] = field(default_factory=dict)
    fallbacks: set[tuple[str, int]] = field(default_factory=set)  # (file, line) of fallback target lists
    seen: set[Path] = field(default_factory=set)
    files: list[tuple[str, list[Command]]] = field(default_factory=list)  # every file read, in order
    subprojects: list[str] = field(default_factory=list)  # folders (relative) with their own project()


def vendored_reason(rel: str, subprojects: list[str]) -> str:
    """Why a file (relative to the project's folder) is vendored code, or ""."""
    parts = rel.split("/")[:-1]
    for p in parts:
        if p.lower() in VENDORED:
            return f"vendored code under {p}/"
    for sub in subprojects:
        if rel.startswith(sub + "/"):
            return f"a subproject with its own project() in {sub}/"
    return ""


def _refs(args: tuple[str, ...], walk: Walk) -> list[tuple[str, int]]:
    """(option, +1/-1) for each option (or variable standing for options) a condition names."""
    out: list[tuple[str, int]] = []
    negate = False
    for a in args:
        word = a.strip()
        m = re.fullmatch(_VAR, word)
        word = m.group(1) if m else word
        if word.upper() == "NOT":
            negate = not negate
            continue
        if word in ("(", ")") or word.upper() in _KEYWORDS or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", word):
            negate = False if word.upper() in ("AND", "OR") else negate
            continue
        sign = -1 if negate else 1
        for name in walk.aliases.get(word, {word}):
            out.append((name, sign))
        negate = False
    return out


def _expand(value: str, here: Path, walk: Walk) -> str | None:
    """``value`` with the variables the walk knows substituted; None when one stays unknown."""
    known = dict(walk.variables)
    known.update(
        {
            "CMAKE_CURRENT_SOURCE_DIR": str(here),
            "CMAKE_CURRENT_LIST_DIR": str(here),
            "PROJECT_SOURCE_DIR": str(walk.root),
            "CMAKE_SOURCE_DIR": str(walk.root),
        }
    )
    out = re.sub(_VAR, lambda m: known.get(m.group(1), "\0"), value)
    return None if "\0" in out or "$" in out else out


def _target(command: str, raw: str, here: Path, walk: Walk) -> Path | None:
    path_text = _expand(raw, here, walk)
    if path_text is None:
        return None
    path = Path(os.path.normpath(path_text if Path(path_text).is_absolute() else here / path_text))
    if command == "add_subdirectory":
        return path / "CMakeLists.txt"
    if path_text.endswith(".cmake"):
        return path
    for p in (
        here / "cmake" / f"{path_text}.cmake",
        walk.root / "cmake" / f"{path_text}.cmake",
        here / f"{path_text}.cmake",
    ):
        try:
            if p.is_file():
                return p
        except OSError:
            return None
    return None


def _evidence(cmd: Command) -> tuple[dict[str, str], dict[str, str], str]:
    """(vendor -> what, strongly; vendor -> what, from sources; another API) a command adds."""
    strong: dict[str, str] = {}
    weak: dict[str, str] = {}
    other = ""
    args = cmd.args
    if cmd.name in ("enable_language", "project", "check_language"):
        for a in args:
            if a.upper() == "CUDA":
                strong["nvidia"] = f"{cmd.name}(CUDA)"
            elif a.upper() == "HIP":
                strong["amd"] = f"{cmd.name}(HIP)"
    elif cmd.name == "find_package" and args:
        pkg = args[0]
        if re.match(_OTHER_PKG, pkg) or (pkg == "Boost" and "compute" in (a.lower() for a in args)):
            other = f"find_package({pkg})"
        elif re.match(_NV_PKG, pkg):
            strong["nvidia"] = f"find_package({pkg})"
        elif re.match(_AMD_PKG, pkg):
            strong["amd"] = f"find_package({pkg})"
    for a in args:
        for word in a.split(";"):
            if not other and re.search(_OTHER_WORD, word):
                other = f"{cmd.name}(... {word[:60]} ...)"
            if "CUDA::" in word:
                strong.setdefault("nvidia", f"{cmd.name}(... {word[:60]} ...)")
            elif re.search(r"(^|[^A-Za-z])(hip|roc)::", word):
                strong.setdefault("amd", f"{cmd.name}(... {word[:60]} ...)")
            elif word.endswith((".cu", ".cuh")):
                weak.setdefault("nvidia", f"the source {word.rsplit('/', 1)[-1][:60]}")
            elif word.endswith(".hip"):
                weak.setdefault("amd", f"the source {word.rsplit('/', 1)[-1][:60]}")
    return strong, weak, other


def _note(walk: Walk, gate: list[tuple[str, int]], cmd: Command, rel: str) -> None:
    strong, weak, other = _evidence(cmd)
    if not (strong or weak or other):
        return
    at = f" at {rel} L{cmd.line}"
    for name in {n for n, sign in gate if sign > 0}:
        opt = walk.options.get(name)
        if opt is None:
            continue
        for vendor, what in strong.items():
            opt.adds.setdefault(vendor, what + at)
        for vendor, what in weak.items():
            opt.weak.setdefault(vendor, what + at)
        if other and not opt.other:
            opt.other = other + at


def _gate(stack: list[list[tuple[str, int]]], inherited: list[tuple[str, int]]) -> list[tuple[str, int]]:
    return inherited + [ref for frame in stack[:MAX_DEPTH] for ref in frame]  # deeper levels track nothing


def _branch(cmd: Command, stack: list[list[tuple[str, int]]], tests: list[list[tuple[str, int]]], walk: Walk) -> None:
    """Update the condition stack for if/elseif/else/endif. Bounded: at most ``MAX_DEPTH`` levels
    and ``MAX_REFS`` names a level are tracked (a file of nested ``if`` stays linear to read)."""
    if cmd.name == "if":
        refs = _refs(cmd.args[:MAX_ARGS], walk)[:MAX_REFS] if len(stack) < MAX_DEPTH else []
        stack.append(refs)
        tests.append(refs)
    elif cmd.name in ("elseif", "else") and stack:
        before = [(n, -s) for n, s in tests[-1]]
        refs = _refs(cmd.args[:MAX_ARGS], walk)[:MAX_REFS] if cmd.name == "elseif" and len(stack) <= MAX_DEPTH else []
        stack[-1] = (before + refs)[: 2 * MAX_REFS]
        tests[-1] = (tests[-1] + refs)[:MAX_REFS]
    elif cmd.name == "endif" and stack:
        stack.pop()
        tests.pop()


def _set(cmd: Command, gate: list[tuple[str, int]], rel: str, here: Path, walk: Walk) -> None:
    if not cmd.args:
        return
    var, values = cmd.args[0], [a for a in cmd.args[1:] if a not in ("CACHE", "PARENT_SCOPE", "FORCE")]
    if var in ARCH_VARS and any(n == var for n, _ in gate):
        walk.fallbacks.add((rel, cmd.line))
    positive = {n for n, s in gate if s > 0 and n in walk.options}
    first = values[0] if values else ""
    m = re.fullmatch(_VAR, first)
    if m and m.group(1) in walk.options:
        walk.aliases.setdefault(var, set()).add(m.group(1))
    elif positive and first.upper() in ("ON", "TRUE", "YES", "1"):
        walk.aliases.setdefault(var, set()).update(positive)
    if len(values) == 1:
        expanded = _expand(values[0], here, walk)
        if expanded is not None:
            walk.variables[var] = expanded


def _option(cmd: Command, rel: str, walk: Walk) -> None:
    if len(cmd.args) < 2 or cmd.args[0] in walk.options:
        return
    default = cmd.args[2] if len(cmd.args) > 2 else "OFF"
    if default.upper() in _OFF:
        walk.options[cmd.args[0]] = Option(cmd.args[0], rel, cmd.line, vendored=vendored_reason(rel, walk.subprojects))


def walk_file(path: Path, walk: Walk, inherited: list[tuple[str, int]], *, top: bool = False) -> None:
    """Walk one file's commands, following ``add_subdirectory`` and ``include`` with the gate they sit under."""
    if path in walk.seen:
        return
    walk.seen.add(path)
    cmds = walk.read(path)
    if cmds is None:
        return
    rel = path.relative_to(walk.root).as_posix()
    walk.files.append((rel, cmds))
    here = path.parent
    if not top and path.name == "CMakeLists.txt" and any(c.name == "project" for c in cmds):
        walk.subprojects.append(here.relative_to(walk.root).as_posix())
    stack: list[list[tuple[str, int]]] = []
    tests: list[list[tuple[str, int]]] = []
    gate = list(inherited)
    for cmd in cmds:
        if cmd.name in ("if", "elseif", "else", "endif"):
            _branch(cmd, stack, tests, walk)
            if len(stack) <= MAX_DEPTH:  # deeper levels track nothing: the gate is unchanged
                gate = _gate(stack, inherited)
            continue
        if cmd.name == "option":
            _option(cmd, rel, walk)
        elif cmd.name == "set":
            _set(cmd, gate, rel, here, walk)
        elif cmd.name in ("add_subdirectory", "include") and cmd.args:
            nxt = _target(cmd.name, cmd.args[0], here, walk)
            if nxt is not None:
                walk_file(nxt, walk, gate)
            continue
        _note(walk, gate, cmd, rel)
