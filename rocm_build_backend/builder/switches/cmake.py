"""Switches in ``CMakeLists.txt`` (and the CMake files it includes) and in ``pyproject.toml``.

CMake, read as text, never run: ``option(NAME "doc" OFF)`` for a backend's main switch
(``GGML_CUDA``, ``USE_ROCM``; ``names.option_role``), ``$ENV{NAME}`` reads of GPU switches, and
hard-coded targets (``set(CMAKE_CUDA_ARCHITECTURES 80 90)``, ``CUDA_ARCHITECTURES``,
``--offload-arch=gfx908``, ``-gencode``). From the top ``CMakeLists.txt`` it follows
``add_subdirectory(dir)`` and ``include(file)`` into files inside the project (paths with
``${CMAKE_CURRENT_SOURCE_DIR}``, ``${CMAKE_CURRENT_LIST_DIR}``, ``${PROJECT_SOURCE_DIR}``,
``${CMAKE_SOURCE_DIR}`` resolved, a module name looked up in ``cmake/``), within the read budget.

``pyproject.toml``: scikit-build-core's ``[tool.scikit-build] cmake.define`` entries that a GPU
switch reads from the environment (``{env = "GGML_CUDA", default = "OFF"}``) or sets OFF.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from rocm_build_backend.builder.switches.cmakelang import Command, commands
from rocm_build_backend.builder.switches.findings import Budget, Finding, first_lines
from rocm_build_backend.builder.switches.gates import ARCH_VARS, Walk, walk_file
from rocm_build_backend.builder.switches.names import option_role, role, vendor, vendor_switches
from rocm_build_backend.gpu.vendor import vendor_of

_ENV = re.compile(r"ENV\{([A-Za-z_][A-Za-z0-9_]*)\}")  # $ENV{X} and if(DEFINED ENV{X})
_PROPS = ("CUDA_ARCHITECTURES", "HIP_ARCHITECTURES")
_TEXT = 160


def _targets(values: str) -> list[str]:
    """Target names in a CMake value: ``gfx908``, ``sm_90``; CMake's ``80`` (SASS and PTX),
    ``80-real``, ``80-virtual`` as ``sm_80 compute_80``, ``sm_80``, ``compute_80``."""
    out: list[str] = []
    for v in re.split(r"[;\s]+", values.strip().strip('"')):
        m = re.fullmatch(r"(\d{2,3}[af]?)(-real|-virtual)?", v)
        if m:
            out += ([f"sm_{m.group(1)}"] if m.group(2) != "-virtual" else []) + (
                [f"compute_{m.group(1)}"] if m.group(2) != "-real" else []
            )
        elif re.fullmatch(r"gfx[0-9a-z]+|(sm|compute)_\d+[af]?", v):
            out.append(v)
    return out


def _arch_value(cmd: Command) -> tuple[str, list[str]] | None:
    """(variable or property, targets) a ``set()`` or a target property command hard-codes."""
    args = cmd.args
    if cmd.name == "set" and args and args[0].upper() in ARCH_VARS and "$" not in " ".join(args[1:]):
        values = []
        for a in args[1:]:
            if a.upper() in ("CACHE", "PARENT_SCOPE", "FORCE"):
                break
            values.append(a)
        targets = _targets(" ".join(values))
        return (args[0], targets) if targets else None
    for i, a in enumerate(args[:-1]):
        if a.upper() in _PROPS:
            targets = _targets(args[i + 1])
            if targets:
                return a.upper(), targets
    return None


def _file_findings(rel: str, cmds: list[Command], lines: list[str], walk: Walk) -> list[Finding]:
    """The environment reads and hard-coded target lists of one file."""

    def show(n: int) -> str:
        return lines[n - 1].strip()[:_TEXT] if 0 < n <= len(lines) else ""

    found: list[Finding] = []
    flagged: dict[str, tuple[int, list[str]]] = {}
    vendors = vendor_switches()
    for cmd in cmds:
        for a in cmd.args:
            for name in dict.fromkeys(_ENV.findall(a)):
                kind = role(name)
                if kind:
                    found.append(Finding(rel, cmd.line, "cmake-env", name, kind, text=show(cmd.line)))
        hard = _arch_value(cmd)
        if hard:
            found.append(
                Finding(
                    rel,
                    cmd.line,
                    "hard-coded",
                    hard[0],
                    "hard-coded",
                    " ".join(hard[1]),
                    vendor=vendor_of(hard[1][0]).name,
                    text=show(cmd.line),
                    fallback=(rel, cmd.line) in walk.fallbacks,
                )
            )
        for name, sw in vendors:  # the vendors' compiler options: --offload-arch=, -gencode
            here = [t for a in cmd.args for t in sw.flag_targets(a)]
            if here:
                first, have = flagged.get(name, (cmd.line, []))
                flagged[name] = (first, have + [t for t in here if t not in have])
    flags = dict((name, sw.flag) for name, sw in vendors)
    found += [
        Finding(rel, line, "hard-coded", flags[name], "hard-coded", " ".join(listed), vendor=name, text=show(line))
        for name, (line, listed) in flagged.items()
    ]
    return found


def _option_findings(walk: Walk, texts: dict[str, list[str]]) -> list[Finding]:
    """One finding per off-by-default option: what it gates, or why it is left alone."""
    found = []
    for opt in walk.options.values():
        lines = texts.get(opt.file, [])
        text = lines[opt.line - 1].strip()[:_TEXT] if 0 < opt.line <= len(lines) else ""
        vendors = opt.vendors()
        by_name = option_role(opt.name)
        kind = "gpu-on" if vendors or by_name == "gpu-on" else "targets" if by_name == "targets" else "option"
        named = vendor(opt.name, "gpu-on-cmake")
        owner = next(iter(vendors)) if len(vendors) == 1 else (named if not vendors else None)
        left = opt.vendored or (f"it needs another API: {opt.other}" if opt.other else "")
        found.append(
            Finding(
                opt.file,
                opt.line,
                "cmake-option",
                opt.name,
                kind,
                "ON",
                "OFF",
                vendor=owner,
                text=text,
                gates=tuple(sorted(vendors)),
                evidence="; ".join(vendors[v] for v in sorted(vendors)),
                left_off=left,
            )
        )
    return found


def _walk(root: Path, top: Path, budget: Budget) -> tuple[Walk, dict[str, list[str]]]:
    texts: dict[str, list[str]] = {}

    def read(path: Path) -> list[Command] | None:
        text = budget.read(path)
        if text is None:
            return None
        try:
            texts[path.relative_to(root).as_posix()] = text.splitlines()
        except ValueError:
            return None
        return commands(text)

    walk = Walk(root=root, read=read)
    walk_file(top, walk, [], top=True)
    return walk, texts


def _scan(root: Path, top: Path, budget: Budget) -> list[Finding]:
    walk, texts = _walk(root, top, budget)
    found: list[Finding] = []
    for rel, cmds in walk.files:
        found += _file_findings(rel, cmds, texts.get(rel, []), walk)
    found += _option_findings(walk, texts)
    order = {rel: i for i, (rel, _) in enumerate(walk.files)}
    return sorted(found, key=lambda f: (order.get(f.file, 0), f.line))


def scan_text(text: str, file: str) -> list[Finding]:
    """The switches of one CMake file, alone (what it includes is not read)."""
    root = Path("/nonexistent-root")
    cmds = commands(text)
    walk = Walk(root=root, read=lambda path: cmds if path == root / file else None)
    walk_file(root / file, walk, [], top=True)
    found = _file_findings(file, cmds, text.splitlines(), walk)
    found += _option_findings(walk, {file: text.splitlines()})
    return sorted(found, key=lambda f: f.line)


def scan_cmake(source_dir: Path, budget: Budget, subdir: str = "") -> list[Finding]:
    """The switches of ``CMakeLists.txt`` (in ``subdir``: scikit-build-core's ``cmake.source-dir``)
    and the files it reaches inside the project."""
    root = source_dir.resolve()
    top = (root / subdir / "CMakeLists.txt") if subdir else root / "CMakeLists.txt"
    return _scan(root, top, budget)


def _defines(table: Any) -> dict[str, Any]:
    cmake = table.get("cmake") if isinstance(table, dict) else None
    define = cmake.get("define") if isinstance(cmake, dict) else None
    return define if isinstance(define, dict) else {}


def cmake_source_dir(text: str) -> str:
    """scikit-build-core's ``cmake.source-dir`` (a folder inside the project), else ""."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return ""
    tool = data.get("tool")
    table = tool.get("scikit-build") if isinstance(tool, dict) else None
    cmake = table.get("cmake") if isinstance(table, dict) else None
    value = cmake.get("source-dir") if isinstance(cmake, dict) else None
    if not isinstance(value, str) or value.startswith("/") or ".." in value.split("/"):
        return ""
    return value.strip("./") if value not in (".", "./") else ""


def scan_pyproject(text: str, file: str) -> list[Finding]:
    """scikit-build-core's ``cmake.define`` entries that are GPU switches."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return []
    tool: dict[str, Any] = data["tool"] if isinstance(data.get("tool"), dict) else {}
    lines = text.splitlines()
    first = first_lines(lines, lower=False)
    found: list[Finding] = []
    for name, value in _defines(tool.get("scikit-build")).items():
        n = first.get(name, 0)
        show = lines[n - 1].strip()[:_TEXT] if n else ""
        if isinstance(value, dict) and isinstance(value.get("env"), str):
            env = value["env"]
            kind = role(env) or option_role(name)
            if kind:
                found.append(
                    Finding(
                        file,
                        n,
                        "skbuild-define",
                        env,
                        kind,
                        "ON" if kind == "gpu-on" else None,
                        str(value.get("default")) if "default" in value else None,
                        vendor=vendor(name, "gpu-on-cmake"),
                        text=show,
                    )
                )
        elif isinstance(value, (str, bool)) and str(value).upper() in ("OFF", "FALSE", "0") and option_role(name):
            found.append(
                Finding(
                    file,
                    n,
                    "skbuild-define",
                    name,
                    "gpu-on",
                    "ON",
                    str(value),
                    vendor=vendor(name, "gpu-on-cmake"),
                    text=show,
                )
            )
    return found
