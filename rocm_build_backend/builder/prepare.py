"""Steps 2-4 of a build: which GPU targets, whether the compiler accepts them, and the plan.

Targets come from explicit settings, else the variable a vendor's users set to ask for targets
(``BuildVendor.request_variable``: ``PYTORCH_ROCM_ARCH``, ``TORCH_CUDA_ARCH_LIST``), else
detection on this machine; never a default list. No GPU found: the build stops, unless the
project says it has no GPU code (``verify = "off"``): then it builds with no targets and no
target knobs (source ``none``). A build targets one vendor: ``gpu.build.choose_vendor`` picks
it from the targets, else from the GPUs found, and that vendor's build side checks its
compiler. ``prepare`` reads the world (the host's cores and memory, the compiler, the project's
build files for its own GPU switches and its extensions: read, never run) and changes nothing; ``make_plan`` in ``plan.py`` stays pure. It branches on no vendor.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, NamedTuple, TYPE_CHECKING

from rocm_build_backend.builder.backend import backend_kind
from rocm_build_backend.builder.cache import choose_cache
from rocm_build_backend.builder.log import log
from rocm_build_backend.builder.parallel import Extensions, read_extensions
from rocm_build_backend.builder.plan import BuildPlan, Host, build_inputs, make_plan
from rocm_build_backend.builder.settings import Settings
from rocm_build_backend.builder.source import Project
from rocm_build_backend.builder.switches import Finding, scan
from rocm_build_backend.errors import ConfigError, NoGpuDetectedError, ToolchainError
from rocm_build_backend.gpu.build import Toolchain, choose_vendor
from rocm_build_backend.gpu.detect import detect, require_targets
from rocm_build_backend.gpu.targets import join_targets, parse_targets, vendor_name
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.gpu.vendor import vendor_names

if TYPE_CHECKING:
    from rocm_build_backend.builder.plan import BuildPlan, Host
    from rocm_build_backend.gpu.detect import Detection
    from rocm_build_backend.gpu.targets import GpuTarget


#: The stamp's ``requested.source`` of a build without targets: ``verify = "off"`` and no GPU found.
NO_TARGETS = "none"


def _request_vars() -> list[tuple[str, str]]:
    """(variable, vendor) for each vendor's variable that a user sets to ask for targets."""
    return [(build_side(name).request_variable, name) for name in vendor_names()]


def _where(settings: Settings) -> str:
    return {
        "-C": "-C rocm-build-backend.targets",
        "env": "ROCM_BUILD_BACKEND_TARGETS",
        "pyproject": "[tool.rocm-build-backend] targets",
    }.get(settings.source_of("targets"), "targets")


class Resolved(NamedTuple):
    """The targets of a build and where they came from.

    ``source`` is the stamp's ``requested.source``: ``settings``, ``PYTORCH_ROCM_ARCH`` or
    ``detected:<probe>``; ``detail`` says the same in words for the log.
    """

    targets: list[GpuTarget]
    source: str
    detail: str
    detection: Detection | None = None
    vendor: str = ""  # a name of the vendor registry


def _env_request(settings: Settings, env: Mapping[str, str]) -> tuple[str, str] | None:
    """The vendor variable that asks for targets (``PYTORCH_ROCM_ARCH`` or ``TORCH_CUDA_ARCH_LIST``)
    and its value; a vendor setting other than ``auto`` reads only its own vendor's variable."""
    asked = [
        (var, env.get(var, "").strip())
        for var, vendor in _request_vars()
        if settings.vendor in ("auto", vendor) and env.get(var, "").strip()
    ]
    if len(asked) > 1:
        named = " or ".join(f'"{n}"' for n in vendor_names())
        raise ConfigError(
            [f"both {asked[0][0]}={asked[0][1]} and {asked[1][0]}={asked[1][1]} are set: a build targets one vendor"],
            hint=f"set vendor = {named} (or targets), or unset one of them",
        )
    return asked[0] if asked else None


def _explicit(settings: Settings, env: Mapping[str, str]) -> Resolved:
    """The targets setting, checked against the same vendor's variable in the environment."""

    targets = parse_targets(settings.targets)
    vendor = choose_vendor(settings.vendor, targets, [])
    where = _where(settings)
    side = build_side(vendor)
    var = side.request_variable
    user = env.get(var, "").strip()
    if user:
        code = side.code_targets(targets, build_inputs(settings, env, ""))
        if not side.same_request(user, code, where=f" in {var}"):
            raise ConfigError(
                [f"{where} asks for {join_targets(targets)} but {var}={user} is set"],
                hint=f"unset {var}, or make both name the same targets",
            )
    return Resolved(targets, "settings", f"from {where}", vendor=vendor)


def resolve_targets(settings: Settings, env: Mapping[str, str]) -> Resolved:
    """The targets, where they came from, their vendor, and the Detection when they were detected.

    Never a default list."""
    if settings.targets != "auto":
        return _explicit(settings, env)
    request = _env_request(settings, env)
    if request is not None:
        var, value = request
        asked_by = dict(_request_vars())[var]
        targets = build_side(asked_by).parse_request(value, where=f" in {var}")
        return Resolved(targets, var, f"from {var}", vendor=choose_vendor(settings.vendor, targets, []))

    asked = None if settings.vendor == "auto" else settings.vendor
    if settings.verify == "off" and not settings.local_version:  # no GPU code, no label: no detection
        return Resolved(
            [],
            NO_TARGETS,
            "no targets given, nothing detected (the project has no GPU code); "
            'verify = "off": building without GPU targets',
            None,
            asked or vendor_names()[0],
        )
    found = detect(root=Path(settings.sysfs_root), env=env, keep_features=settings.features)
    try:
        detected = require_targets(found, asked)
    except NoGpuDetectedError as exc:
        if settings.verify == "off":  # the project says it has no GPU code: nothing to target
            return Resolved(
                [],
                NO_TARGETS,
                'no GPU found and no targets given; verify = "off": building without GPU targets',
                found,
                asked or vendor_names()[0],
            )
        exc.hint = f'{exc.hint}; a project without GPU code sets verify = "off"'
        raise
    vendor = choose_vendor(settings.vendor, [], detected)
    return Resolved(
        [t for t in detected if vendor_name(t) == vendor],
        f"detected:{found.source}",
        f"detected by {found.source}",
        found,
        vendor,
    )


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


def read_source(source_dir: Path, kind: str, env: Mapping[str, str]) -> tuple[list[Finding], Extensions]:
    """What the project's build files show: its own GPU switches and its extensions (read, never run)."""
    cmake = True if kind == "scikit-build-core" else None
    return scan(source_dir, cmake=cmake), read_extensions(source_dir, env)


@dataclass
class Prepared:
    project: Project
    plan: BuildPlan
    compiler: Toolchain | None
    detection: Detection | None
    compiler_problem: ToolchainError | None = None  # ``plan`` only: the check failed, the plan goes on


def _check_toolchain(resolved: Resolved, settings: Settings, env: Mapping[str, str]) -> Toolchain | None:
    """Step 3: the vendor's compiler must emit every code target (the ``ptx`` choice applied)."""

    side = build_side(resolved.vendor)
    inputs = build_inputs(settings, env, "")
    return side.check_toolchain(side.code_targets(resolved.targets, inputs), inputs)


def prepare(
    project: Project, env: Mapping[str, str] | None = None, *, check_compiler: bool = True, keep_going: bool = False
) -> Prepared:
    """Steps 2-4: targets, toolchain check, plan. Reads the world, changes nothing. With
    ``keep_going`` (``plan``) a compiler that cannot emit a target is kept as
    ``compiler_problem`` and the plan is made all the same."""
    env = os.environ if env is None else env
    settings = project.settings
    resolved = resolve_targets(settings, env)
    targets = resolved.targets
    compiler: Toolchain | None = None
    # a project that declares it has no GPU code (verify = "off") compiles nothing for the targets
    problem: ToolchainError | None = None
    if check_compiler and settings.compiler_check and settings.verify != "off":
        try:
            compiler = _check_toolchain(resolved, settings, env)
        except ToolchainError as exc:
            if not keep_going:
                raise
            problem = exc
    kind = backend_kind(settings.backend)
    findings, extensions = read_source(project.source_dir, kind, env)
    plan = make_plan(
        targets,
        resolved.source,
        settings,
        env,
        backend_kind=kind,
        config_settings=project.forward,
        host=host_facts(),
        dist_name=project.dist_name,
        source_detail=resolved.detail,
        findings=findings,
        extensions=extensions,
        cache=choose_cache(settings.compiler_cache, env),
    )
    return Prepared(project, plan, compiler, resolved.detection, problem)


def show(prepared: Prepared) -> None:
    """The plan in the build log."""
    plan = prepared.plan
    for line in plan.summary():
        log(line)
    if prepared.compiler is not None:
        log(f"compiler {prepared.compiler.describe()} accepts {' '.join(str(t) for t in plan.targets)}")
    elif prepared.project.settings.compiler_check and prepared.project.settings.verify != "off":
        log(build_side(plan.vendor).toolchain_missing)
