"""The HIP compile launcher: puts the chosen targets last on every compile CMake's HIP language runs.

CMake's HIP language calls clang++ itself and orders the flags its own way: ``CMAKE_HIP_FLAGS``
(from ``HIPFLAGS``) come before the ``--offload-arch`` flags of ``CMAKE_HIP_ARCHITECTURES``, and
a target's own ``target_compile_options(... --offload-arch=gfx908)`` come after both, so no
variable can have the last word. ``CMAKE_HIP_COMPILER_LAUNCHER`` runs a program in front of
every compile (``launcher clang++ ARGS``): this one appends ``--no-offload-arch=all`` and one
``--offload-arch=`` per chosen target, which clang applies in order, so the compile builds
exactly those (checked with clang 19: ``--offload-arch=gfx908 --offload-arch=gfx906
--no-offload-arch=all --offload-arch=gfx90a`` gives one gfx90a code object). Preprocessing
(``-E``) and dependency-only runs (``-M``, ``-MM``) and anything that is not a compile (no
``-c``) run as given. With ``ROCM_BUILD_BACKEND_CACHE_PROGRAM`` set, a compile runs through that
compiler cache with the final command line (the cache's key holds the targets).

Each compile is appended as one JSON line to the file named by
``ROCM_BUILD_BACKEND_ENFORCE_RECORD`` when it is set (CMake's own compiler checks, sources under
``CMakeFiles/``, get the flags too but are not recorded). This file runs as a program
(``python -I -S hip_launcher.py COMPILER ARGS``, configured by ``CONFIG`` at its end): the
standard library only, no import of the package. ``decide`` is pure and tested on its own.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: this program starts once per compile
if TYPE_CHECKING:
    from typing import Any, Sequence

RECORD_VAR = "ROCM_BUILD_BACKEND_ENFORCE_RECORD"
CACHE_VAR = "ROCM_BUILD_BACKEND_CACHE_PROGRAM"  # the compiler cache to run the compile through
ARCH_PREFIXES = ("--offload-arch=", "--amdgpu-target=", "--cuda-gpu-arch=")
NOT_COMPILES = frozenset({"-E", "-M", "-MM", "--preprocess"})
HIP_SUFFIXES = (".hip", ".cu", ".cpp", ".cc", ".cxx")


def decide(argv: Sequence[str], flags: Sequence[str]) -> tuple[str, list[str], list[str]]:
    """(action, the command to run, the targets the compile listed) for ``launcher``'s arguments
    ``argv`` (the compiler first). Actions: ``untouched``, ``kept`` (listed exactly the chosen
    ones), ``added`` (listed none), ``rewritten``."""
    args = list(argv)
    if len(args) < 2 or "-c" not in args or any(a in NOT_COMPILES for a in args):
        return "untouched", args, []
    listed: list[str] = []
    for a in args:
        if a.startswith(ARCH_PREFIXES):
            value = a.split("=", 1)[1]
            listed += [v for v in value.split(",") if v]
        elif a.startswith("--no-offload-arch="):
            value = a.split("=", 1)[1]
            listed = [] if value == "all" else [t for t in listed if t not in value.split(",")]
    chosen = [f.split("=", 1)[1] for f in flags if f.startswith("--offload-arch=")]
    listed = list(dict.fromkeys(listed))
    action = "kept" if sorted(listed) == sorted(chosen) else "added" if not listed else "rewritten"
    return action, args + list(flags), listed


def _probe(paths: Sequence[str]) -> bool:
    """Whether this is one of CMake's own probes of the compiler: it runs them under CMakeFiles/."""
    try:
        here = os.getcwd()
    except OSError:
        here = ""
    return any("CMakeFiles" in p.replace("\\", "/").split("/") for p in [here, *paths])


def json_line(line: dict[str, Any]) -> bytes:
    """One JSON object of strings and lists of strings, and a newline (``json`` is not imported:
    it would cost more than the rest of this program)."""
    def text(value: object) -> str:
        out = ['"']
        for ch in str(value):
            out.append("\\" + ch if ch in '"\\' else "\\u%04x" % ord(ch) if ord(ch) < 0x20 else ch)
        return "".join(out) + '"'

    def item(value: object) -> str:
        return "[" + ",".join(text(v) for v in value) + "]" if isinstance(value, list) else text(value)

    body = ",".join(text(k) + ":" + item(v) for k, v in line.items())
    return ("{" + body + "}\n").encode("utf-8", "replace")


def main(config: dict[str, Any], argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    action, command, listed = decide(args, config["flags"])
    record = os.environ.get(RECORD_VAR)
    paths = [a for a in args[1:] if not a.startswith("-") and a.endswith(HIP_SUFFIXES)]
    probe = _probe(paths)  # CMake's own compiler checks
    if record and action != "untouched" and not probe:
        sources = [os.path.basename(p) for p in paths]
        line = {"tool": "hip", "action": action, "listed": listed, "now": config["targets"], "sources": sources[:8]}
        try:
            fd = os.open(record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, json_line(line))
            finally:
                os.close(fd)
        except OSError:
            pass
    if not command:
        sys.stderr.write("hip-launcher (rocm-build-backend): no compiler to run\n")
        raise SystemExit(2)
    cache = os.environ.get(CACHE_VAR, "")
    if cache and action != "untouched" and os.path.basename(command[0]) not in ("ccache", "sccache"):
        command = [cache] + command  # the cache sees the targets this compile really builds
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"hip-launcher (rocm-build-backend): cannot run {command[0]}: {exc}\n")
        raise SystemExit(127) from None
