"""The plan: everything a build gets, computed from its inputs and nothing else.

``make_plan`` is pure (for NVIDIA targets it calls ``gpu.nvidia.plan.nvidia_build_env``
instead of the AMD knobs): targets, settings, the environment it is handed, the wrapped
backend's kind and a few host facts in; a BuildPlan out. It reads no files, no clock
and no ``os.environ``; ``build.applied(plan)`` is the one place that sets variables.
"""

from __future__ import annotations

import difflib
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from rocm_build_backend.builder.profiles import profile_names, select_profile
from rocm_build_backend.builder.settings import PREFIX, Settings
from rocm_build_backend.errors import ConfigError
from rocm_build_backend.gpu.nvidia.plan import nvidia_build_env
from rocm_build_backend.gpu.targets import GpuTarget, join_targets, parse_targets

_GIB = 1 << 30
# CMake variables that name HIP targets, in rocm-cmake's order of precedence.
CMAKE_VARS = ("CMAKE_HIP_ARCHITECTURES", "GPU_TARGETS", "AMDGPU_TARGETS")
_ARCH_FLAG = re.compile(r"^--(?:offload-arch|amdgpu-target)=")
_CMAKE_DEF = re.compile(r"^-D(" + "|".join(CMAKE_VARS) + r")(?::[A-Z]+)?=")
_PLAIN_WORD = re.compile(r"[\w@%+=:,./;-]+", re.ASCII)  # shlex.quote's safe set, and ';'


def join_words(words: Sequence[str]) -> str:
    """Words as one variable that ``shlex.split`` (and a plain ``.split()``) gives back.

    ``shlex.join`` quotes every word holding ';' (``'-DGPU_TARGETS=gfx90a;gfx942'``), which made
    CMAKE_ARGS unreadable in the log and breaks readers that split on spaces; a ';' needs no
    quotes inside a word, so only words with spaces, quotes or other shell characters get them.
    """
    return " ".join(w if _PLAIN_WORD.fullmatch(w) else shlex.quote(w) for w in words)


@dataclass(frozen=True)
class Host:
    """What the plan needs to know about the machine (gathered by the caller)."""

    cpus: int = 1
    mem_available: int | None = None  # bytes


@dataclass(frozen=True)
class BuildPlan:
    targets: list[GpuTarget]
    source: str  # where the targets came from: settings, PYTORCH_ROCM_ARCH or detected:<probe>
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
    source_detail: str = ""  # the same in words, for the log: "from -C rocm-build-backend.targets"
    vendor: str = "amd"  # the one vendor the build targets: "amd" or "nvidia"

    def to_json(self) -> dict[str, Any]:
        return {
            "targets": [str(t) for t in self.targets],
            "vendor": self.vendor,
            "source": self.source,
            "source_detail": self.source_detail or self.source,
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
        lines = [f"targets {join_targets(self.targets, ' ')} ({self.source_detail or self.source})",
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
            lines.append("pinned nvidia-smi reports the targets (rocminfo & co. report no AMD GPU)"
                         if self.vendor == "nvidia" else
                         "pinned rocminfo, rocm_agent_enumerator, amdgpu-arch, offload-arch report the targets")
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


@dataclass
class _Draft:
    """The plan while it is being made: variables, the user's kept and replaced ones, problems."""

    env: dict[str, str] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    replaced: dict[str, tuple[str, str]] = field(default_factory=dict)
    forwarded: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lenient: bool = False  # verify = "off": the project declares no GPU code
    profile: str | None = None  # the NVIDIA profile nvidia_build_env applied

    def words(self, env: Mapping[str, str], var: str) -> list[str] | None:
        """The user's ``var`` split as the shell would; None (and a problem) when it does not split."""
        try:
            return shlex.split(env.get(var, ""))
        except ValueError as exc:
            what = f"{var} is not a list of shell words ({exc}): {env[var]!r}"
            if self.lenient:
                self.notes.append(f"warning: {what}; left as it is, the targets are not added to it")
            else:
                self.problems.append(what)
            return None


def _target_vars(draft: _Draft, targets: Sequence[GpuTarget], env: Mapping[str, str]) -> None:
    """The variables that name the targets; the user's value is kept when it names the same."""
    semi, comma = join_targets(targets, ";"), join_targets(targets, ",")
    wanted: dict[str, str] = {
        "PYTORCH_ROCM_ARCH": semi,
        "GPU_TARGETS": semi,
        "AMDGPU_TARGETS": semi,
        "HCC_AMDGPU_TARGET": comma,
        "HIP_PLATFORM": "amd",
    }
    for var, value in wanted.items():
        user = env.get(var)
        if user is not None and (user == value or (var != "HIP_PLATFORM" and _same_targets(user, targets))):
            draft.kept[var] = draft.env[var] = user
        else:
            if user is not None:
                draft.replaced[var] = (user, value)
            draft.env[var] = value


def _hipcc_flags(draft: _Draft, targets: Sequence[GpuTarget], env: Mapping[str, str]) -> None:
    """hipcc: our --offload-arch flags, after the user's other flags."""
    flags = [f"--offload-arch={t}" for t in targets]
    user_flags = draft.words(env, "HIPCC_COMPILE_FLAGS_APPEND")
    if user_flags is None:
        return
    others = [f for f in user_flags if not _ARCH_FLAG.match(f)]
    if [f for f in user_flags if _ARCH_FLAG.match(f)] not in ([], flags):
        draft.replaced["HIPCC_COMPILE_FLAGS_APPEND"] = (env["HIPCC_COMPILE_FLAGS_APPEND"], shlex.join(others + flags))
    draft.env["HIPCC_COMPILE_FLAGS_APPEND"] = shlex.join(others + flags)


def _cmake(draft: _Draft, targets: Sequence[GpuTarget], env: Mapping[str, str], backend_kind: str) -> None:
    """CMake: definitions through CMAKE_ARGS (read by scikit-build-core, llama-cpp-python, ...),
    and scikit-build-core's cmake.define.* config settings."""
    semi = join_targets(targets, ";")
    defs = [f"-D{var}={semi}" for var in CMAKE_VARS]
    user_args = draft.words(env, "CMAKE_ARGS")
    if user_args is not None:
        keep_args = [a for a in user_args if not _CMAKE_DEF.match(a)]
        old_defs = {a for a in user_args if _CMAKE_DEF.match(a)}
        if old_defs and not old_defs <= set(defs):
            draft.replaced["CMAKE_ARGS"] = (env["CMAKE_ARGS"], join_words(keep_args + defs))
        draft.env["CMAKE_ARGS"] = join_words(keep_args + defs)
    if backend_kind == "scikit-build-core":
        for var in CMAKE_VARS:
            key = f"cmake.define.{var}"
            given = draft.forwarded.get(key) or draft.forwarded.get(f"skbuild.{key}")
            if given is not None and not _same_targets(str(given), targets):
                draft.problems.append(f"-C {key}={given} conflicts with the targets {semi}")
            draft.forwarded.setdefault(key, semi)


def _nvidia(draft: _Draft, targets: Sequence[GpuTarget], settings: Settings, env: Mapping[str, str],
            backend_kind: str, dist_name: str | None) -> list[GpuTarget]:
    """The NVIDIA half of the plan (``gpu.nvidia.plan.nvidia_build_env``); returns the code
    targets after the ``ptx`` choice: what nvcc emits, the audit must find and the stamp names."""
    nv = nvidia_build_env([str(t) for t in targets], settings.ptx, env, backend_kind=backend_kind,
                          config_settings=draft.forwarded, dist_name=dist_name, profile=settings.profile)
    draft.env.update(nv.env)
    draft.kept.update(nv.kept)
    draft.replaced.update(nv.replaced)
    draft.forwarded = dict(nv.config_settings)
    draft.notes += nv.notes
    draft.profile = nv.profile
    return [GpuTarget(str(t)) for t in nv.code]


def _unprefixed(draft: _Draft) -> None:
    """A forwarded -C key that is one of our settings without our prefix: it goes to the wrapped
    backend as it is, which is rarely what was meant; say so, with the right spelling."""
    ours = set(Settings.keys())
    for key, value in draft.forwarded.items():
        if key in ours:
            shown = ";".join(value) if isinstance(value, list) else str(value)
            draft.notes.append(f"warning: -C {key}={shown} is not read by rocm-build-backend: it goes to the "
                               f"wrapped backend as it is; rocm-build-backend's setting is -C {PREFIX}{key}={shown}")


def _profile(draft: _Draft, targets: Sequence[GpuTarget], settings: Settings, env: Mapping[str, str],
             backend_kind: str, dist_name: str | None) -> str | None:
    """The project profile's knobs; returns the profile's name, or None."""
    if settings.profile == "none":
        return None

    profile = select_profile(settings.profile, dist_name)  # auto: the project's, else the target lists
    if profile is None:
        near = difflib.get_close_matches(settings.profile, profile_names(), n=1)
        draft.problems.append(f"unknown profile '{settings.profile}'"
                              + (f" (did you mean '{near[0]}'?)" if near else "")
                              + "; known: " + ", ".join(profile_names()))
        return None
    for var, value in profile.env(targets).items():
        if var in env and env[var] != value and not _same_targets(env[var], targets):
            draft.replaced[var] = (env[var], value)
        draft.env[var] = value
    if backend_kind == "scikit-build-core":
        for var, value in profile.cmake_defines(targets).items():
            draft.forwarded.setdefault(f"cmake.define.{var}", value)
    else:
        extra = [f"-D{var}={value}" for var, value in profile.cmake_defines(targets).items()]
        if extra and "CMAKE_ARGS" in draft.env:
            draft.env["CMAKE_ARGS"] = join_words(shlex.split(draft.env["CMAKE_ARGS"]) + extra)
    return profile.name


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
    source_detail: str = "",
) -> BuildPlan:
    """Compute the variables and config settings a build gets. Pure."""
    targets = list(targets)
    vendors = {t.vendor for t in targets}
    if len(vendors) > 1:
        raise ConfigError([f"the targets {join_targets(targets)} name GPUs of more than one vendor"],
                          hint="a build targets one vendor: build once per vendor")
    vendor = vendors.pop() if vendors else "amd"
    draft = _Draft(forwarded=dict(config_settings or {}), lenient=settings.verify == "off")
    _unprefixed(draft)
    if vendor == "nvidia":
        targets = _nvidia(draft, targets, settings, env, backend_kind, dist_name)
    else:
        _target_vars(draft, targets, env)
        _hipcc_flags(draft, targets, env)
        _cmake(draft, targets, env, backend_kind)
    jobs, why = _max_jobs(settings, env, host)
    draft.env["MAX_JOBS"] = str(jobs)
    if "CMAKE_BUILD_PARALLEL_LEVEL" not in env:
        draft.env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs)
    profile_name = draft.profile if vendor == "nvidia" else _profile(draft, targets, settings, env, backend_kind, dist_name)
    if draft.problems:
        hint = ("fix the quoting in the variable, or unset it" if any(" shell words " in p for p in draft.problems)
                else "drop the -C cmake.define setting, or set the same targets")
        raise ConfigError(draft.problems, hint=hint)
    return BuildPlan(
        targets=targets, source=source, env=draft.env, kept=draft.kept, replaced=draft.replaced,
        config_settings=draft.forwarded, backend=settings.backend, max_jobs=jobs, jobs_reason=why,
        profile=profile_name, pinned_tools=settings.pinned_tools, notes=draft.notes,
        source_detail=source_detail or source, vendor=vendor,
    )
