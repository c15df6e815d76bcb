"""Enforcement for AMD builds: every HIP compile and ``-fgpu-rdc`` link builds exactly the chosen targets.

Appending ``--no-offload-arch=all --offload-arch=<each target>`` is not enough (clang resolves
``--offload-arch=native`` before the reset applies; hipcc's link steps do not get
``HIPCC_COMPILE_FLAGS_APPEND``), so the command lines are rewritten by the pinned HIP compiler
(``hip_launcher.py``), which the build reaches three ways:

- hipcc runs the clang of ``HIP_CLANG_PATH`` (HIP 5.x's hipcc.pl and 6.x's hipcc both read it):
  it points at a *view* of hipcc's clang folder whose ``clang``/``clang++`` (every clang driver
  name the real folder has) are ours and whose other entries, and those of the folder above
  (``../lib/clang/<version>/include``, which hipcc adds), link to the real ones. So torch's
  ``cpp_extension`` (``ROCM_HOME/bin/hipcc``), Makefile-style setup.py files and CMake projects
  that call hipcc have every compile and link rewritten;
- CMake's HIP language runs clang++ itself: ``CMAKE_HIP_COMPILER_LAUNCHER`` runs the program in
  front of every compile (a launcher the user already has, ``ccache``, runs after ours). CMake
  has no linker launcher for HIP: when ``HIPCXX`` names the clang (one word), it is replaced by
  the same name in a view of its folder (the one above for hipcc, or one of its own; the HIP
  package finds ``../lib/clang`` beside the compiler), so a new build tree's links (a
  ``-fgpu-rdc`` link that lists its own targets) are rewritten too; the launcher passes a
  compile to that compiler untouched, so it is decided once;
- hipcc appends ``HIPCC_COMPILE_FLAGS_APPEND`` to its compiles: the plan puts the reset and the
  targets there (``plan_env``), which holds a hipcc whose clang is not reached; the pinned
  compiler knows that copy as the build's own.

A project that runs clang itself from its own path with its own ``--offload-arch`` is not
reached: the audit finds what it built. Pure: it reads hipcc's folders, ``builder/enforcedir.py`` writes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path
from typing import Mapping, Sequence

from rocm_build_backend.gpu.amd import hip_launcher
from rocm_build_backend.gpu.build import FolderEntry

VARIABLES = ("HIPCC_COMPILE_FLAGS_APPEND", "CMAKE_HIP_COMPILER_LAUNCHER", "HIP_CLANG_PATH", "HIPCXX")
RESET = "--no-offload-arch=all"
MARKER = ".rocm-build-backend-view.json"
_DRIVER = re.compile(r"(amd)?clang(\+\+)?(-\d+)?")  # the clang names hipcc runs
#: What the build log adds when no compile came through the launcher.
UNCOUNTED = (
    "hipcc compiles whose clang is not the one of HIP_CLANG_PATH take the flags from "
    "HIPCC_COMPILE_FLAGS_APPEND and are not counted"
)


def flags(targets: Sequence[str]) -> list[str]:
    """The options that end every HIP compile: the reset, then each target."""
    return [RESET] + [f"--offload-arch={t}" for t in targets]


def describe(targets: Sequence[str], ptx: str) -> list[str]:
    """The plan's words for what enforcement does (pure)."""
    chosen = " ".join(f"--offload-arch={t}" for t in targets)
    return [
        f"enforce: every HIP compile and -fgpu-rdc link is rewritten to {chosen} by a pinned HIP "
        "compiler (hipcc: HIP_CLANG_PATH; CMake's HIP language: CMAKE_HIP_COMPILER_LAUNCHER, HIPCXX; response "
        "files read, native replaced, an option it cannot read stops the build), and "
        f"HIPCC_COMPILE_FLAGS_APPEND ends with {' '.join(flags(targets))}, whatever targets the project lists"
    ]


def outcome(listed: Sequence[str], targets: Sequence[str]) -> str:
    """What a HIP compile that lists ``listed`` builds (for the plan's words): the targets, always."""
    return f"every HIP compile and -fgpu-rdc link is rewritten to {' '.join(targets)}"


def plan_env(targets: Sequence[str], ptx: str, planned: Mapping[str, str]) -> dict[str, str]:
    """``HIPCC_COMPILE_FLAGS_APPEND`` with the reset before the plan's ``--offload-arch`` flags
    (nothing when the plan left the user's value alone: one that does not split as shell words)."""
    if "HIPCC_COMPILE_FLAGS_APPEND" not in planned:
        return {}
    words = shlex.split(planned["HIPCC_COMPILE_FLAGS_APPEND"])
    others = [w for w in words if w != RESET and not w.startswith("--offload-arch=")]
    return {"HIPCC_COMPILE_FLAGS_APPEND": shlex.join(others + flags(targets))}


def program_text(targets: Sequence[str]) -> str:
    source = Path(hip_launcher.__file__).read_text(encoding="utf-8")
    cfg = {"flags": flags(targets), "targets": list(targets)}
    return source + "\n\nCONFIG = " + repr(cfg) + '\nif __name__ == "__main__":\n    main(CONFIG)\n'


def starter(python: str, program: Path, compiler: str = "") -> str:
    """The ``sh`` program that starts the launcher; with ``compiler``, a clang of the view that
    runs that real compiler through it."""
    what = (
        "clang written by rocm-build-backend: it holds each HIP compile and -fgpu-rdc link to the\n"
        "# targets chosen for the build, then runs the real clang"
        if compiler
        else "HIP compile launcher written by rocm-build-backend: it holds each compile to the targets\n"
        "# chosen for the build, then runs it"
    )
    real = f" {shlex.quote(compiler)}" if compiler else ""
    view = "export ROCM_BUILD_BACKEND_HIP_VIEW=1  # hipcc runs this clang: a cache stands in front of hipcc\n"
    return (
        "#!/bin/sh\n"
        f"# {what} (see the program it starts).\n"
        f"py={shlex.quote(python)}\n"
        '[ -x "$py" ] || py=python3  # the interpreter of the build that wrote this is gone\n'
        + (view if compiler else "")
        + f'exec "$py" -I -S {shlex.quote(str(program))}{real} "$@"\n'
    )


def _has_driver(folder: Path) -> bool:
    try:
        return any(_DRIVER.fullmatch(n) for n in os.listdir(folder))
    except OSError:
        return False


def clang_folder(env: Mapping[str, str]) -> Path | None:
    """The folder whose clang hipcc runs, found as hipcc does: ``HIP_CLANG_PATH``, else
    ``<ROCm>/llvm/bin``, else ``<ROCm>/bin`` for ``ROCM_PATH``, ``HIP_PATH`` and the folder above
    hipcc's own (``/usr`` for a distribution's hipcc in ``/usr/bin``). A view of ours stands for
    the folder it was made from; None when there is no hipcc or no clang beside it."""
    given = env.get("HIP_CLANG_PATH", "")
    if given:
        real = _real_folder(Path(given))
        return real if _has_driver(real) else None
    roots = [env.get("ROCM_PATH", ""), env.get("HIP_PATH", "")]
    found = shutil.which("hipcc", path=env.get("PATH", os.defpath))
    if found:
        roots.append(str(Path(os.path.realpath(found)).parent.parent))
    for root in filter(None, roots):
        for folder in (Path(root) / "llvm" / "bin", Path(root) / "bin"):
            if _has_driver(folder):
                return folder
    return None


def _listing(folder: Path) -> list[str]:
    """What names the view (the folder above's entries, the clang drivers); the other entries of
    ``folder`` are left out, so that a tool installed beside clang does not move the folder."""
    try:
        return sorted(os.listdir(folder.parent)) + sorted(n for n in os.listdir(folder) if _DRIVER.fullmatch(n))
    except OSError:
        return []


def _real_folder(folder: Path) -> Path:
    """The folder a view of ours was made from (``folder`` itself when it is none)."""
    try:
        return Path(json.loads((folder.parent / MARKER).read_text(encoding="utf-8"))["bin"])
    except (OSError, ValueError, KeyError, TypeError):
        return folder


def hip_compiler(env: Mapping[str, str]) -> Path | None:
    """The clang that ``HIPCXX`` names for CMake's HIP language (one word, a clang driver's name),
    found on PATH, a view of ours standing for the folder it was made from; None when it is unset
    or not a clang."""
    word = env.get("HIPCXX", "").strip()
    found = shutil.which(word, path=env.get("PATH", os.defpath)) if word and " " not in word else None
    if not found or not _DRIVER.fullmatch(Path(found).name):
        return None
    return _real_folder(Path(found).parent) / Path(found).name


def identity(targets: Sequence[str], ptx: str, env: Mapping[str, str], python: str) -> str:
    """Everything the folder will hold, as text (its hash names the folder)."""
    folder = clang_folder(env)
    view = f"\n{folder}\n" + "\n".join(_listing(folder)) if folder else ""
    cxx = hip_compiler(env)
    if cxx is not None and cxx.parent != folder:
        view += f"\n{cxx.parent}\n" + "\n".join(_listing(cxx.parent))
    return program_text(targets) + starter(python, Path("x")) + view


def _view(prefix: str, folder: Path, python: str, program: Path) -> dict[str, FolderEntry]:
    """The view at ``prefix``: the folder above ``folder`` with ``folder``'s clang drivers ours
    (each runs the real one through the launcher) and every other entry a link to the real one."""
    out: dict[str, FolderEntry] = {prefix: ("dir", "", 0), f"{prefix}/bin": ("dir", "", 0)}
    above, real = str(folder.parent), str(folder)  # os.path.join: as str(folder / name), at a thousand names
    for name in os.listdir(above):
        if name != folder.name and name != "bin":
            out[f"{prefix}/{name}"] = ("link", os.path.join(above, name), 0)
    for name in os.listdir(real):
        if _DRIVER.fullmatch(name):
            out[f"{prefix}/bin/{name}"] = ("file", starter(python, program, os.path.join(real, name)).encode(), 0o111)
        else:
            out[f"{prefix}/bin/{name}"] = ("link", os.path.join(real, name), 0)
    out[f"{prefix}/{MARKER}"] = ("file", (json.dumps({"bin": str(folder)}) + "\n").encode(), 0)
    return out


def contents(
    home: Path, targets: Sequence[str], ptx: str, env: Mapping[str, str], python: str
) -> dict[str, FolderEntry]:
    """What the folder at ``home`` holds: the launcher program, its ``sh`` starter and the view
    of hipcc's clang folder (when there is a hipcc); nothing is written."""
    program = home / "hip_launcher.py"
    out: dict[str, FolderEntry] = {
        "hip_launcher.py": ("file", program_text(targets).encode(), 0),
        "hip-launcher": ("file", starter(python, program).encode(), 0o111),
        "targets.json": ("file", (json.dumps(list(targets)) + "\n").encode(), 0),
    }
    folder = clang_folder(env)
    if folder is not None:
        out.update(_view("llvm", folder, python, program))
    cxx = hip_compiler(env)
    if cxx is not None and cxx.parent != folder:
        out.update(_view("cxx", cxx.parent, python, program))
    return out


def variables(directory: Path, env: Mapping[str, str]) -> dict[str, str]:
    """``CMAKE_HIP_COMPILER_LAUNCHER``: ours, then the user's own launcher when there is one;
    ``HIP_CLANG_PATH``: the view's ``bin`` when there is one; ``HIPCXX``: ours in front of the
    user's clang when they named one."""
    ours = str(directory / "hip-launcher")
    user = env.get("CMAKE_HIP_COMPILER_LAUNCHER", "").strip()
    out = {"CMAKE_HIP_COMPILER_LAUNCHER": ours + (";" + user if user and ours not in user else "")}
    if (directory / "llvm" / MARKER).is_file():
        out["HIP_CLANG_PATH"] = str(directory / "llvm" / "bin")
    cxx = hip_compiler(env)
    for view in (directory / "llvm", directory / "cxx"):
        if cxx is not None and (view / MARKER).is_file() and _real_folder(view / "bin") == cxx.parent:
            out["HIPCXX"] = str(view / "bin" / cxx.name)
            break
    return out


class AmdEnforcer:
    """AMD's ``gpu.build.Enforcer`` (``BuildVendor.enforce``): the functions above, for the code
    targets of a plan (the ``ptx`` choice is already applied, so none is passed on)."""

    uncounted = UNCOUNTED

    def describe(self, targets: Sequence[str]) -> list[str]:
        return describe(targets, "none")

    def outcome(self, listed: Sequence[str], targets: Sequence[str]) -> str:
        return outcome(listed, targets)

    def plan_env(self, targets: Sequence[str], planned: Mapping[str, str]) -> dict[str, str]:
        return plan_env(targets, "none", planned)

    def identity(self, targets: Sequence[str], env: Mapping[str, str], python: str) -> str:
        return identity(targets, "none", env, python)

    def contents(
        self, home: Path, targets: Sequence[str], env: Mapping[str, str], python: str
    ) -> dict[str, FolderEntry]:
        return contents(home, targets, "none", env, python)

    def variables(self, directory: Path, env: Mapping[str, str]) -> dict[str, str]:
        return variables(directory, env)


__all__ = ["VARIABLES", "AmdEnforcer", "contents", "describe", "flags", "identity", "plan_env", "variables"]
