"""Steps 2-4 of a build: which GPU targets, whether the compiler accepts them, and the plan.

Targets come from explicit settings, else ``PYTORCH_ROCM_ARCH`` (AMD) or
``TORCH_CUDA_ARCH_LIST`` (NVIDIA), else detection on this machine; never a default list. A build
targets one vendor: ``choose_vendor`` picks it from the targets, else from the GPUs found. ``prepare`` reads the world (the host's cores and memory,
the compiler) and changes nothing; ``make_plan`` in ``plan.py`` stays pure.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from rocm_build_backend.builder.backend import backend_kind
from rocm_build_backend.builder.log import log
from rocm_build_backend.builder.plan import BuildPlan, Host, make_plan
from rocm_build_backend.builder.settings import Settings
from rocm_build_backend.builder.source import Project
from rocm_build_backend.builder.toolchain import Compiler, find_compiler, require_supported
from rocm_build_backend.errors import ConfigError, NoGpuDetectedError
from rocm_build_backend.gpu.detect import Detection, detect, require_targets
from rocm_build_backend.gpu.nvidia.knobs import torch_arch_list, with_ptx
from rocm_build_backend.gpu.nvidia.plan import choose_vendor
from rocm_build_backend.gpu.nvidia.targets import parse_torch_arch_list
from rocm_build_backend.gpu.nvidia.toolchain import Nvcc, check_nvcc
from rocm_build_backend.gpu.targets import GpuTarget, join_targets, parse_targets

#: Each vendor's variable that a user sets to ask for targets, read as an explicit request.
_VENDOR_VARS = (("PYTORCH_ROCM_ARCH", "amd"), ("TORCH_CUDA_ARCH_LIST", "nvidia"))


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
    vendor: str = "amd"


def _cuda_request(value: str) -> list[GpuTarget]:
    """``TORCH_CUDA_ARCH_LIST`` as the targets it names (``9.0+PTX`` -> sm_90 compute_90)."""
    return [GpuTarget(str(t)) for t in parse_torch_arch_list(value)]


def _same_cuda_request(value: str, targets: list[GpuTarget], ptx: str) -> bool:
    """Whether ``TORCH_CUDA_ARCH_LIST=value`` names the code the targets build (after ``ptx``)."""
    code = with_ptx([str(t) for t in targets], ptx)
    return value == torch_arch_list(code)[0] or [str(t) for t in _cuda_request(value)] == [str(t) for t in code]


def _env_request(settings: Settings, env: Mapping[str, str]) -> tuple[str, str] | None:
    """The vendor variable that asks for targets (``PYTORCH_ROCM_ARCH`` or ``TORCH_CUDA_ARCH_LIST``)
    and its value; a vendor setting other than ``auto`` reads only its own vendor's variable."""
    asked = [(var, env.get(var, "").strip()) for var, vendor in _VENDOR_VARS
             if settings.vendor in ("auto", vendor) and env.get(var, "").strip()]
    if len(asked) > 1:
        raise ConfigError([f"both {asked[0][0]}={asked[0][1]} and {asked[1][0]}={asked[1][1]} are set: "
                           "a build targets one vendor"],
                          hint="set vendor = \"amd\" or \"nvidia\" (or targets), or unset one of them")
    return asked[0] if asked else None


def _explicit(settings: Settings, env: Mapping[str, str]) -> Resolved:
    """The targets setting, checked against the same vendor's variable in the environment."""
    targets = parse_targets(settings.targets)
    vendor = choose_vendor(settings.vendor, targets, [])
    where = _where(settings)
    var = dict((v, k) for k, v in _VENDOR_VARS)[vendor]
    user = env.get(var, "").strip()
    if user:
        same = (_same_cuda_request(user, targets, settings.ptx) if vendor == "nvidia"
                else parse_targets(user, where=f" in {var}") == targets)
        if not same:
            raise ConfigError([f"{where} asks for {join_targets(targets)} but {var}={user} is set"],
                              hint=f"unset {var}, or make both name the same targets")
    return Resolved(targets, "settings", f"from {where}", vendor=vendor)


def resolve_targets(settings: Settings, env: Mapping[str, str]) -> Resolved:
    """The targets, where they came from, their vendor, and the Detection when they were detected.

    Never a default list."""
    if settings.targets != "auto":
        return _explicit(settings, env)
    request = _env_request(settings, env)
    if request is not None:
        var, value = request
        targets = _cuda_request(value) if var == "TORCH_CUDA_ARCH_LIST" else parse_targets(value, where=f" in {var}")
        return Resolved(targets, var, f"from {var}", vendor=choose_vendor(settings.vendor, targets, []))

    found = detect(root=Path(settings.sysfs_root), env=env, keep_features=settings.features)
    detected = require_targets(found)
    vendor = choose_vendor(settings.vendor, [], detected)
    targets = [t for t in detected if t.vendor == vendor]
    if not targets:
        seen = " ".join(str(t) for t in detected)
        raise NoGpuDetectedError(f"vendor = \"{vendor}\" but no {vendor} GPU was found (found {seen})",
                                 hint="set targets for that vendor, e.g. targets = \"sm_90\" or \"gfx942\"")
    return Resolved(targets, f"detected:{found.source}", f"detected by {found.source}", found, vendor)


def host_facts() -> Host:
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
    compiler: Compiler | Nvcc | None
    detection: Detection | None


def _check_toolchain(resolved: Resolved, settings: Settings, env: Mapping[str, str]) -> Compiler | Nvcc | None:
    """Step 3: the compiler must accept every target (nvcc for NVIDIA, the HIP compiler for AMD)."""
    if resolved.vendor == "nvidia":
        return check_nvcc(with_ptx([str(t) for t in resolved.targets], settings.ptx), env)

    compiler = find_compiler(settings.compiler, env=env)
    if compiler is not None:
        require_supported(compiler, resolved.targets, env=env)
    return compiler


def prepare(project: Project, env: Mapping[str, str] | None = None, *, check_compiler: bool = True) -> Prepared:
    """Steps 2-4: targets, toolchain check, plan. Reads the world, changes nothing."""
    env = os.environ if env is None else env
    settings = project.settings
    resolved = resolve_targets(settings, env)
    targets = resolved.targets
    compiler: Compiler | Nvcc | None = None
    # a project that declares it has no GPU code (verify = "off") compiles nothing for the targets
    if check_compiler and settings.compiler_check and settings.verify != "off":
        compiler = _check_toolchain(resolved, settings, env)
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
        log("compiler: no HIP compiler found to check the targets with (hipcc, amdclang++, clang)"
            if plan.vendor == "amd" else "compiler: not checked")
