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

from rocm_build_backend.builder.switches.findings import Budget, Finding
from rocm_build_backend.builder.switches.names import option_role, role, vendor, vendor_switches
from rocm_build_backend.gpu.vendor import vendor_of

_OPTION = re.compile(r"^\s*option\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s+(\"[^\"]*\"|\S+)\s+(OFF|FALSE|NO|0)\s*\)", re.I | re.M)
_ENV = re.compile(r"ENV\{([A-Za-z_][A-Za-z0-9_]*)\}")  # $ENV{X} and if(DEFINED ENV{X})
_ARCH_SET = re.compile(r"^\s*set\s*\(\s*(CMAKE_CUDA_ARCHITECTURES|CMAKE_HIP_ARCHITECTURES|GPU_TARGETS|AMDGPU_TARGETS)"
                       r"\s+([^)$]*?)\s*(?:CACHE[^)]*)?\)", re.I | re.M)
_PROP = re.compile(r"(?<![A-Za-z_])(?:CUDA|HIP)_ARCHITECTURES\s+(\"[0-9a-z;\- ]+\"|[0-9a-z;\-]+)", re.I)
_FOLLOW = re.compile(r"^\s*(add_subdirectory|include)\s*\(\s*\"?([^\s\")]+)", re.I | re.M)
_VARS = ("CMAKE_CURRENT_SOURCE_DIR", "CMAKE_CURRENT_LIST_DIR", "PROJECT_SOURCE_DIR", "CMAKE_SOURCE_DIR")
_TEXT = 160


def _line_of(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def _strip_comments(text: str) -> str:
    """``#`` comments blanked (keeping every offset), so a commented-out option is no option."""
    return re.sub(r"#[^\n]*", lambda m: " " * len(m.group(0)), text)


def _targets(kind: str, values: str) -> list[str]:
    """Target names in a CMake value: ``gfx908``, ``sm_90``; CMake's ``80`` (SASS and PTX),
    ``80-real``, ``80-virtual`` as ``sm_80 compute_80``, ``sm_80``, ``compute_80``."""
    out: list[str] = []
    for v in re.split(r"[;\s]+", values.strip().strip('"')):
        m = re.fullmatch(r"(\d{2,3}[af]?)(-real|-virtual)?", v)
        if m:
            out += ([f"sm_{m.group(1)}"] if m.group(2) != "-virtual" else []) + \
                   ([f"compute_{m.group(1)}"] if m.group(2) != "-real" else [])
        elif re.fullmatch(r"gfx[0-9a-z]+|(sm|compute)_\d+[af]?", v):
            out.append(v)
    return out


def scan_text(text: str, file: str) -> list[Finding]:
    """The switches of one CMake file."""
    code = _strip_comments(text)
    lines = text.splitlines()

    def show(n: int) -> str:
        return lines[n - 1].strip()[:_TEXT] if 0 < n <= len(lines) else ""

    found: list[Finding] = []
    for m in _OPTION.finditer(code):
        name = m.group(1)
        kind = option_role(name)
        if kind:
            n = _line_of(code, m.start(1))
            found.append(Finding(file, n, "cmake-option", name, kind, "ON", "OFF", vendor=vendor(name, "gpu-on-cmake"),
                                 text=show(n)))
    for m in _ENV.finditer(code):
        name = m.group(1)
        kind = role(name)
        if kind:
            n = _line_of(code, m.start())
            found.append(Finding(file, n, "cmake-env", name, kind, text=show(n)))
    for m in _ARCH_SET.finditer(code):
        targets = _targets(m.group(1), m.group(2))
        if targets:
            n = _line_of(code, m.start(1))
            found.append(Finding(file, n, "hard-coded", m.group(1), "hard-coded", " ".join(targets),
                                 vendor=vendor_of(targets[0]).name, text=show(n)))
    hits = list(_PROP.finditer(code))
    targets = list(dict.fromkeys(t for h in hits for t in _targets("ARCHITECTURES", h.group(1))))
    if targets:
        n = _line_of(code, hits[0].start())
        found.append(Finding(file, n, "hard-coded", hits[0].group(0).split()[0].upper(), "hard-coded",
                             " ".join(targets), vendor=vendor_of(targets[0]).name, text=show(n)))
    code_lines = code.splitlines()
    for name, sw in vendor_switches():  # the vendors' compiler options: --offload-arch=, -gencode
        listed: list[str] = []
        first = 0
        for n, line in enumerate(code_lines, 1):
            here = [t for t in sw.flag_targets(line) if t not in listed]
            if here:
                first = first or n
                listed += here
        if listed:
            found.append(Finding(file, first, "hard-coded", sw.flag, "hard-coded", " ".join(listed), vendor=name,
                                 text=show(first)))
    return sorted(found, key=lambda f: f.line)


def _resolve(raw: str, here: Path, root: Path, command: str) -> Path | None:
    for var in _VARS:
        raw = raw.replace("${" + var + "}", str(root if var in ("PROJECT_SOURCE_DIR", "CMAKE_SOURCE_DIR") else here))
    if "${" in raw:
        return None
    path = Path(raw) if Path(raw).is_absolute() else here / raw
    if command == "add_subdirectory":
        path = path / "CMakeLists.txt"
    elif not raw.endswith(".cmake"):
        path = next((p for p in (here / "cmake" / f"{raw}.cmake", root / "cmake" / f"{raw}.cmake",
                                 here / f"{raw}.cmake") if p.is_file()), here / f"{raw}.cmake")
    try:
        resolved = path.resolve()
        resolved.relative_to(root.resolve())
    except (OSError, ValueError):
        return None  # outside the project: not ours to read
    return resolved


def scan_cmake(source_dir: Path, budget: Budget) -> list[Finding]:
    """The switches of ``CMakeLists.txt`` and the files it reaches inside the project."""
    root = source_dir.resolve()
    queue = [root / "CMakeLists.txt"]
    seen: set[Path] = set()
    found: list[Finding] = []
    while queue:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        text = budget.read(path)
        if text is None:
            continue
        rel = path.relative_to(root).as_posix()
        found += scan_text(text, rel)
        for m in _FOLLOW.finditer(_strip_comments(text)):
            nxt = _resolve(m.group(2), path.parent, root, m.group(1).lower())
            if nxt is not None and nxt not in seen:
                queue.append(nxt)
    return found


def _defines(table: Any) -> dict[str, Any]:
    cmake = table.get("cmake") if isinstance(table, dict) else None
    define = cmake.get("define") if isinstance(cmake, dict) else None
    return define if isinstance(define, dict) else {}


def scan_pyproject(text: str, file: str) -> list[Finding]:
    """scikit-build-core's ``cmake.define`` entries that are GPU switches."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return []
    tool: dict[str, Any] = data["tool"] if isinstance(data.get("tool"), dict) else {}
    lines = text.splitlines()
    found: list[Finding] = []
    for name, value in _defines(tool.get("scikit-build")).items():
        n = next((i for i, t in enumerate(lines, 1) if re.match(rf"\s*{re.escape(name)}\s*=", t)), 0)
        show = lines[n - 1].strip()[:_TEXT] if n else ""
        if isinstance(value, dict) and isinstance(value.get("env"), str):
            env = value["env"]
            kind = role(env) or option_role(name)
            if kind:
                found.append(Finding(file, n, "skbuild-define", env, kind, "ON" if kind == "gpu-on" else None,
                                     str(value.get("default")) if "default" in value else None,
                                     vendor=vendor(name, "gpu-on-cmake"), text=show))
        elif isinstance(value, (str, bool)) and str(value).upper() in ("OFF", "FALSE", "0") and option_role(name):
            found.append(Finding(file, n, "skbuild-define", name, "gpu-on", "ON", str(value),
                                 vendor=vendor(name, "gpu-on-cmake"),
                                 text=show))
    return found
