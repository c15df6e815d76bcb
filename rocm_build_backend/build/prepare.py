"""Steps 2-4 of a build: which GPU targets, whether the compiler accepts them, and the plan.

Targets come from explicit settings, else ``PYTORCH_ROCM_ARCH``, else detection on this
machine; never a default list. ``prepare`` reads the world (the host's cores and memory,
the compiler) and changes nothing; ``make_plan`` in ``plan.py`` stays pure.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from rocm_build_backend.build.log import log
from rocm_build_backend.build.settings import Settings
from rocm_build_backend.build.source import Project
from rocm_build_backend.errors import ConfigError

if TYPE_CHECKING:
    from rocm_build_backend.build.plan import BuildPlan, Host
    from rocm_build_backend.build.toolchain import Compiler
    from rocm_build_backend.gpu.amd.detect import Detection
    from rocm_build_backend.gpu.targets import GpuTarget


def _where(settings: Settings) -> str:
    return {"-C": "-C rocm-build-backend.targets", "env": "ROCM_BUILD_BACKEND_TARGETS",
            "pyproject": "[tool.rocm-build-backend] targets"}.get(settings.source_of("targets"), "targets")


@dataclass(frozen=True)
class Resolved:
    """The targets of a build and where they came from.

    ``source`` is the stamp's ``requested.source``: ``settings``, ``PYTORCH_ROCM_ARCH`` or
    ``detected:<probe>``; ``detail`` says the same in words for the log.
    """

    targets: list[GpuTarget]
    source: str
    detail: str
    detection: Detection | None = None


def resolve_targets(settings: Settings, env: Mapping[str, str]) -> Resolved:
    """The targets, where they came from, and the Detection when they were detected.

    Never a default list."""
    from rocm_build_backend.gpu.targets import join_targets, parse_targets

    user_arch = env.get("PYTORCH_ROCM_ARCH", "").strip()
    if settings.targets != "auto":
        targets = parse_targets(settings.targets)
        where = _where(settings)
        if user_arch and parse_targets(user_arch, where=" in PYTORCH_ROCM_ARCH") != targets:
            raise ConfigError(
                [f"{where} asks for {join_targets(targets)} but PYTORCH_ROCM_ARCH={user_arch} is set"],
                hint="unset PYTORCH_ROCM_ARCH, or make both name the same targets",
            )
        return Resolved(targets, "settings", f"from {where}")
    if user_arch:
        return Resolved(parse_targets(user_arch, where=" in PYTORCH_ROCM_ARCH"), "PYTORCH_ROCM_ARCH",
                        "from PYTORCH_ROCM_ARCH")
    from rocm_build_backend.gpu.amd.detect import detect, require_targets

    found = detect(root=Path(settings.sysfs_root), env=env, keep_features=settings.features)
    return Resolved(require_targets(found), f"detected:{found.source}", f"detected by {found.source}", found)


def host_facts() -> Host:
    from rocm_build_backend.build.plan import Host

    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        cpus = os.cpu_count() or 1
    mem = None
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    mem = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError):
        pass
    return Host(cpus=cpus, mem_available=mem)


@dataclass
class Prepared:
    project: Project
    plan: BuildPlan
    compiler: Compiler | None
    detection: Detection | None


def prepare(project: Project, env: Mapping[str, str] | None = None, *, check_compiler: bool = True) -> Prepared:
    """Steps 2-4: targets, toolchain check, plan. Reads the world, changes nothing."""
    from rocm_build_backend.build.backend import backend_kind
    from rocm_build_backend.build.plan import make_plan

    env = os.environ if env is None else env
    settings = project.settings
    resolved = resolve_targets(settings, env)
    targets = resolved.targets
    compiler = None
    # a project that declares it has no GPU code (verify = "off") compiles nothing for the targets
    if check_compiler and settings.compiler_check and settings.verify != "off":
        from rocm_build_backend.build.toolchain import find_compiler, require_supported

        compiler = find_compiler(settings.compiler, env=env)
        if compiler is not None:
            require_supported(compiler, targets, env=env)
    plan = make_plan(targets, resolved.source, settings, env, backend_kind=backend_kind(settings.backend),
                     config_settings=project.forward, host=host_facts(), dist_name=project.dist_name,
                     source_detail=resolved.detail)
    return Prepared(project, plan, compiler, resolved.detection)


def show(prepared: Prepared) -> None:
    """The plan in the build log."""
    plan = prepared.plan
    for line in plan.summary():
        log(line)
    if prepared.compiler is not None:
        log(f"compiler {prepared.compiler.describe()} accepts {' '.join(str(t) for t in plan.targets)}")
    elif prepared.project.settings.compiler_check and prepared.project.settings.verify != "off":
        log("compiler: no HIP compiler found to check the targets with (hipcc, amdclang++, clang)")
