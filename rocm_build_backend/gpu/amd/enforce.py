"""Enforcement for AMD builds: the chosen targets come last on every HIP compile.

clang applies its offload options in order, and ``--no-offload-arch=all`` empties the list, so
``--no-offload-arch=all --offload-arch=<each target>`` at the end of a compile overrides whatever
the project listed before (``--offload-arch=gfx908``, ``--amdgpu-target=``, a CMake
``CMAKE_HIP_ARCHITECTURES`` of its own). Two ways put them last:

- hipcc appends ``HIPCC_COMPILE_FLAGS_APPEND`` to its clang command line (HIP 5.x's hipcc.pl and
  6.x's hipcc both read it): the plan puts the flags there (``plan_env``), after the user's
  other flags, so torch's ``cpp_extension`` (``ROCM_HOME/bin/hipcc``), Makefile-style setup.py
  files and CMake projects that call hipcc all get them;
- CMake's HIP language runs clang++ itself: ``CMAKE_HIP_COMPILER_LAUNCHER`` runs the launcher
  (``hip_launcher.py``) in front of every compile, which appends them (``fill``, ``variables``);
  a launcher the user already has (``ccache``) runs after ours.

A project that runs clang itself with its own ``--offload-arch`` is not reached: the audit finds
what it built. Pure apart from the one folder ``fill`` writes.
"""

from __future__ import annotations

import json
import shlex
import stat
from pathlib import Path
from typing import Mapping, Sequence

from rocm_build_backend.gpu.amd import hip_launcher

VARIABLES = ("HIPCC_COMPILE_FLAGS_APPEND", "CMAKE_HIP_COMPILER_LAUNCHER")
RESET = "--no-offload-arch=all"
#: What the build log adds when no compile came through the launcher.
UNCOUNTED = "hipcc compiles take the flags from HIPCC_COMPILE_FLAGS_APPEND and are not counted"


def flags(targets: Sequence[str]) -> list[str]:
    """The options that end every HIP compile: the reset, then each target."""
    return [RESET] + [f"--offload-arch={t}" for t in targets]


def describe(targets: Sequence[str], ptx: str) -> list[str]:
    """The plan's words for what enforcement does (pure)."""
    return [f"enforce: every HIP compile ends with {' '.join(flags(targets))} "
            "(hipcc: HIPCC_COMPILE_FLAGS_APPEND; CMake's HIP language: CMAKE_HIP_COMPILER_LAUNCHER), "
            "whatever targets the project lists"]


def outcome(listed: Sequence[str], targets: Sequence[str]) -> str:
    """What a HIP compile that lists ``listed`` builds (for the plan's words): the targets, always."""
    return f"every HIP compile ends with {' '.join(flags(targets))}"


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
    return (source + "\n\nCONFIG = " + repr(cfg) + "\n"
            "if __name__ == \"__main__\":\n    main(CONFIG)\n")


def starter(python: str, program: Path) -> str:
    return ("#!/bin/sh\n"
            "# HIP compile launcher written by rocm-build-backend: it puts the targets chosen for the\n"
            "# build last on the compile, then runs it (see the program it starts).\n"
            f"py={shlex.quote(python)}\n"
            "[ -x \"$py\" ] || py=python3  # the interpreter of the build that wrote this is gone\n"
            f"exec \"$py\" -I -S {shlex.quote(str(program))} \"$@\"\n")


def identity(targets: Sequence[str], ptx: str, env: Mapping[str, str], python: str) -> str:
    """Everything the folder will hold, as text (its hash names the folder)."""
    return program_text(targets) + starter(python, Path("x"))


def fill(directory: Path, home: Path, targets: Sequence[str], ptx: str, env: Mapping[str, str], python: str) -> None:
    """Write the launcher program and its ``sh`` starter into ``directory``, which is then moved
    to ``home`` (the starter names the program there)."""
    (directory / "hip_launcher.py").write_text(program_text(targets), encoding="utf-8")
    path = directory / "hip-launcher"
    path.write_text(starter(python, home / "hip_launcher.py"), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IRUSR | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    (directory / "targets.json").write_text(json.dumps(list(targets)) + "\n", encoding="utf-8")


def variables(directory: Path, env: Mapping[str, str]) -> dict[str, str]:
    """``CMAKE_HIP_COMPILER_LAUNCHER``: ours, then the user's own launcher when there is one."""
    ours = str(directory / "hip-launcher")
    user = env.get("CMAKE_HIP_COMPILER_LAUNCHER", "").strip()
    return {"CMAKE_HIP_COMPILER_LAUNCHER": ours + (";" + user if user and ours not in user else "")}


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

    def fill(self, directory: Path, home: Path, targets: Sequence[str], env: Mapping[str, str], python: str) -> None:
        fill(directory, home, targets, "none", env, python)

    def variables(self, directory: Path, env: Mapping[str, str]) -> dict[str, str]:
        return variables(directory, env)


__all__ = ["VARIABLES", "AmdEnforcer", "describe", "fill", "flags", "identity", "plan_env", "variables"]
