"""The plan: everything a build gets, computed from its inputs and nothing else.

``make_plan`` is pure: targets, settings, the environment it is handed, the wrapped
backend's kind and a few host facts in; a BuildPlan out. It reads no files, no clock
and no ``os.environ``; ``build.applied(plan)`` is the one place that sets variables.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from rocm_build_backend.errors import ConfigError
from rocm_build_backend.build.settings import Settings
from rocm_build_backend.gpu.targets import GpuTarget, join_targets, parse_targets

_GIB = 1 << 30
# CMake variables that name HIP targets, in rocm-cmake's order of precedence.
CMAKE_VARS = ("CMAKE_HIP_ARCHITECTURES", "GPU_TARGETS", "AMDGPU_TARGETS")
_ARCH_FLAG = re.compile(r"^--(?:offload-arch|amdgpu-target)=")
_CMAKE_DEF = re.compile(r"^-D(" + "|".join(CMAKE_VARS) + r")(?::[A-Z]+)?=")


@dataclass(frozen=True)
class Host:
    """What the plan needs to know about the machine (gathered by the caller)."""

    cpus: int = 1
    mem_available: int | None = None  # bytes


@dataclass(frozen=True)
class BuildPlan:
    targets: list[GpuTarget]
    source: str  # where the targets came from, in words
    env: dict[str, str]  # every variable the build gets (ours, and the user's we keep)
    kept: dict[str, str]  # the user's values kept because they agree with the targets
    replaced: dict[str, tuple[str, str]]  # variable -> (the user's value, ours)
    config_settings: dict[str, Any]  # forwarded to the wrapped backend
    backend: str
    max_jobs: int
    jobs_reason: str
    profile: str | None = None
    pinned_tools: bool = True
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "targets": [str(t) for t in self.targets],
            "source": self.source,
            "backend": self.backend,
            "env": dict(self.env),
            "kept": dict(self.kept),
            "replaced": {k: {"was": a, "now": b} for k, (a, b) in self.replaced.items()},
            "config_settings": dict(self.config_settings),
            "max_jobs": self.max_jobs,
            "max_jobs_reason": self.jobs_reason,
            "profile": self.profile,
            "pinned_tools": self.pinned_tools,
            "notes": list(self.notes),
        }

    def summary(self) -> list[str]:
        """The lines a build log shows (without the prefix)."""
        lines = [f"targets {join_targets(self.targets, ' ')} ({self.source})",
                 f"backend {self.backend}; MAX_JOBS={self.max_jobs} ({self.jobs_reason})"]
        shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items() if k not in ("MAX_JOBS", "PATH"))
        lines.append(f"environment {shown}")
        if self.config_settings:
            lines.append("config settings " + " ".join(f"-C{k}={v}" for k, v in self.config_settings.items()))
        for var, (was, now) in self.replaced.items():
            lines.append(f"warning: replaced {var}={was!r} with {now!r} to match the targets")
        if self.profile:
            lines.append(f"profile {self.profile}")
        if self.pinned_tools:
            lines.append("pinned rocminfo, rocm_agent_enumerator, amdgpu-arch, offload-arch report the targets")
        lines += self.notes
        return lines


def _same_targets(value: str, targets: Sequence[GpuTarget]) -> bool:
    try:
        return parse_targets(value) == list(targets)
    except Exception:
        return False


def _max_jobs(settings: Settings, env: Mapping[str, str], host: Host) -> tuple[int, str]:
    if isinstance(settings.max_jobs, int):
        return settings.max_jobs, f"max-jobs from {settings.source_of('max-jobs')}"
    user = env.get("MAX_JOBS", "").strip()
    if user.isdigit() and int(user) > 0:
        return int(user), "MAX_JOBS set by the user"
    cpus = max(1, host.cpus)
    if host.mem_available is None:
        return cpus, f"{cpus} cores; available memory unknown"
    by_mem = max(1, host.mem_available // (settings.memory_per_job * _GIB))
    jobs = min(cpus, by_mem)
    return jobs, (f"{cpus} cores, {host.mem_available / _GIB:.0f} GiB available at "
                  f"{settings.memory_per_job} GiB a job")


def make_plan(
    targets: Sequence[GpuTarget],
    source: str,
    settings: Settings,
    env: Mapping[str, str],
    *,
    backend_kind: str,
    config_settings: Mapping[str, Any] | None = None,
    host: Host = Host(),
    dist_name: str | None = None,
) -> BuildPlan:
    """Compute the variables and config settings a build gets. Pure."""
    targets = list(targets)
    if any(t.vendor != "amd" for t in targets):
        nv = join_targets([t for t in targets if t.vendor != "amd"], ", ")
        raise ConfigError([f"NVIDIA targets ({nv}) are read by the audit but not built for yet"],
                          hint="give AMD targets only, e.g. gfx942")
    semi, comma = join_targets(targets, ";"), join_targets(targets, ",")
    wanted: dict[str, str] = {
        "PYTORCH_ROCM_ARCH": semi,
        "GPU_TARGETS": semi,
        "AMDGPU_TARGETS": semi,
        "HCC_AMDGPU_TARGET": comma,
        "HIP_PLATFORM": "amd",
    }
    out: dict[str, str] = {}
    kept: dict[str, str] = {}
    replaced: dict[str, tuple[str, str]] = {}
    for var, value in wanted.items():
        user = env.get(var)
        if user is not None and (user == value or (var != "HIP_PLATFORM" and _same_targets(user, targets))):
            kept[var] = out[var] = user
        else:
            if user is not None:
                replaced[var] = (user, value)
            out[var] = value

    # hipcc: our --offload-arch flags, after the user's other flags
    flags = [f"--offload-arch={t}" for t in targets]
    user_flags = shlex.split(env.get("HIPCC_COMPILE_FLAGS_APPEND", ""))
    others = [f for f in user_flags if not _ARCH_FLAG.match(f)]
    if [f for f in user_flags if _ARCH_FLAG.match(f)] not in ([], flags):
        replaced["HIPCC_COMPILE_FLAGS_APPEND"] = (env["HIPCC_COMPILE_FLAGS_APPEND"], shlex.join(others + flags))
    out["HIPCC_COMPILE_FLAGS_APPEND"] = shlex.join(others + flags)

    # CMake: definitions through CMAKE_ARGS (read by scikit-build-core, llama-cpp-python, ...)
    defs = [f"-D{var}={semi}" for var in CMAKE_VARS]
    user_args = shlex.split(env.get("CMAKE_ARGS", ""))
    keep_args = [a for a in user_args if not _CMAKE_DEF.match(a)]
    old_defs = {a for a in user_args if _CMAKE_DEF.match(a)}
    if old_defs and not old_defs <= set(defs):
        replaced["CMAKE_ARGS"] = (env["CMAKE_ARGS"], shlex.join(keep_args + defs))
    out["CMAKE_ARGS"] = shlex.join(keep_args + defs)

    jobs, why = _max_jobs(settings, env, host)
    out["MAX_JOBS"] = str(jobs)
    if "CMAKE_BUILD_PARALLEL_LEVEL" not in env:
        out["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs)

    forwarded = dict(config_settings or {})
    problems = []
    if backend_kind == "scikit-build-core":
        for var in CMAKE_VARS:
            key = f"cmake.define.{var}"
            given = forwarded.get(key) or forwarded.get(f"skbuild.{key}")
            if given is not None and not _same_targets(str(given), targets):
                problems.append(f"-C {key}={given} conflicts with the targets {semi}")
            forwarded.setdefault(key, semi)

    profile_name = None
    notes: list[str] = []
    if settings.profile != "none":
        from rocm_build_backend.build.profiles import profile_names, select_profile

        profile = select_profile(settings.profile, dist_name)  # auto: the project's, else the target lists
        if profile is None:
            import difflib

            near = difflib.get_close_matches(settings.profile, profile_names(), n=1)
            problems.append(f"unknown profile '{settings.profile}'" + (f" (did you mean '{near[0]}'?)" if near else "")
                            + "; known: " + ", ".join(profile_names()))
        if profile is not None:
            profile_name = profile.name
            for var, value in profile.env(targets).items():
                if var in env and env[var] != value and not _same_targets(env[var], targets):
                    replaced[var] = (env[var], value)
                out[var] = value
            if backend_kind == "scikit-build-core":
                for var, value in profile.cmake_defines(targets).items():
                    forwarded.setdefault(f"cmake.define.{var}", value)
            else:
                extra = [f"-D{var}={value}" for var, value in profile.cmake_defines(targets).items()]
                if extra:
                    out["CMAKE_ARGS"] = shlex.join(shlex.split(out["CMAKE_ARGS"]) + extra)
    if problems:
        raise ConfigError(problems, hint="drop the -C cmake.define setting, or set the same targets")
    return BuildPlan(
        targets=targets, source=source, env=out, kept=kept, replaced=replaced,
        config_settings=forwarded, backend=settings.backend, max_jobs=jobs, jobs_reason=why,
        profile=profile_name, pinned_tools=settings.pinned_tools, notes=notes,
    )
