"""The plan: everything a build gets, computed from its inputs and nothing else.

``make_plan`` is pure: targets, settings, the environment it is handed, the wrapped backend's
kind and a few host facts in; a BuildPlan out. The targets' vendor gives its knobs and code
targets (``BuildVendor.knobs``: ``gpu/<vendor>/plan.py``); this module adds what every build
gets (``MAX_JOBS`` and its split between extensions built at once, the project's own job
variables, the project profile's knobs, enforcement's variables and words, what the build does
about the project's own GPU switches, warnings about our settings spelled without our prefix).
It reads no files, no clock and no ``os.environ`` (what the project's build files show comes in
as ``findings`` and ``extensions``); ``environment.applied(plan)`` is the one place that sets
variables. It branches on no vendor.
"""

from __future__ import annotations

import difflib
import shlex
from typing import Any, Mapping, NamedTuple, Sequence

from rocm_build_backend.builder import enforce
from rocm_build_backend.builder.cache import CacheChoice
from rocm_build_backend.builder.parallel import ALL_AT_ONCE, Extensions, Split, job_variables, split
from rocm_build_backend.builder.profiles import (
    TARGET_LISTS,
    profile_names,
    select_profile,
)
from rocm_build_backend.builder.settings import PREFIX, Settings
from rocm_build_backend.builder.switches import Finding, Switch
from rocm_build_backend.builder.switches.actions import apply_switches, resolve
from rocm_build_backend.errors import ConfigError
from rocm_build_backend.gpu.build import BuildInputs, Knobs, join_words, same_targets
from rocm_build_backend.gpu.targets import GpuTarget, join_targets, vendor_name
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.gpu.vendor import vendor_names

_GIB = 1 << 30
__all__ = ["BuildPlan", "Host", "build_inputs", "join_words", "make_plan"]


class Host(NamedTuple):
    """What the plan needs to know about the machine (gathered by the caller)."""

    cpus: int = 1
    mem_available: int | None = None  # bytes


class BuildPlan(NamedTuple):
    targets: list[GpuTarget]
    source: str  # where the targets came from: settings, PYTORCH_ROCM_ARCH or detected:<probe>
    env: dict[str, str]  # every variable the build gets (ours, and the user's we keep)
    kept: dict[str, str]  # the user's values kept because they agree with the targets
    replaced: dict[str, tuple[str, str]]  # variable -> (the user's value, ours)
    config_settings: dict[str, Any]  # forwarded to the wrapped backend
    backend: str
    max_jobs: int
    jobs_reason: str
    notes: list[str]
    switches: list[Switch]  # the project's own GPU switches, and what the build does
    profile: str | None = None
    pinned_tools: bool = True
    source_detail: str = ""  # the same in words, for the log: "from -C rocm-build-backend.targets"
    vendor: str = ""  # the one vendor the build targets (a name of the vendor registry)
    enforce: list[str] | None = None  # what enforcement does (None: not enforced, the notes say why)
    build_ext_parallel: int = 1  # setuptools extensions built at once (DIST_EXTRA_CONFIG)
    parallel_reason: str = ""
    compile_pool: int = 0  # slots of the compile pool the extensions' compiles share (builder.pool); 0: none
    compile_pool_aside: str = ""  # why the pool steps aside (gates the project's own compiles only); "": it does not
    cache: CacheChoice = CacheChoice()  # the compiler cache the compiles run through (builder.cache)
    ninja_apart: bool = False  # torch's ninja builds: a build_temp per extension (builder.apart)

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
            "enforce": {"enabled": self.enforce is not None, "how": list(self.enforce or [])},
            "build_ext_parallel": self.build_ext_parallel,
            "build_ext_parallel_reason": self.parallel_reason,
            "compile_pool": self.compile_pool,
            "compile_pool_aside": self.compile_pool_aside or None,
            "compiler_cache": self.cache.to_json(),
            "switches": [s.to_json() for s in self.switches],
        }

    def summary(self) -> list[str]:
        """The lines a build log shows (without the prefix)."""
        lines = [
            f"targets {join_targets(self.targets, ' ') or 'none'} ({self.source_detail or self.source})",
            f"backend {self.backend}; MAX_JOBS={self.max_jobs} ({self.jobs_reason})",
        ]
        if self.parallel_reason:
            lines.append(f"build_ext parallel = {self.build_ext_parallel} ({self.parallel_reason})")
        if self.compile_pool and self.compile_pool_aside:
            lines.append(
                f"compile pool steps aside: {self.compile_pool_aside}: one extension at a time, every "
                f"compiler process setuptools starts within {self.compile_pool} slots"
            )
        elif self.compile_pool:
            shared = (
                f"{self.build_ext_parallel} extensions"
                if self.build_ext_parallel < ALL_AT_ONCE
                else f"the extensions (up to {ALL_AT_ONCE} at once)"
            )
            lines.append(
                f"compile pool: {self.compile_pool} slots shared by {shared}, largest first, links "
                f"through the same slots, each extension's compiler settings its own"
            )
        shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items() if k not in ("MAX_JOBS", "PATH"))
        lines.append(f"environment {shown}")
        if self.config_settings:
            lines.append("config settings " + " ".join(f"-C{k}={v}" for k, v in self.config_settings.items()))
        for var, (was, now) in self.replaced.items():
            lines.append(f"warning: replaced {var}={was!r} with {now!r} to match the targets")
        if self.profile:
            lines.append(f"profile {self.profile}")
        if self.pinned_tools:
            lines.append(build_side(self.vendor).pinned_note)
        lines += self.enforce or []
        lines.append(self.cache.line())
        lines += [s.line() for s in self.switches]
        lines += self.notes
        return lines


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
    return jobs, (f"{cpus} cores, {host.mem_available / _GIB:.0f} GiB available at {settings.memory_per_job} GiB a job")


def _parallel(
    draft: Knobs,
    budget: int,
    extensions: Extensions | None,
    backend_kind: str,
    env: Mapping[str, str],
    dist_name: str | None,
) -> Split:
    """The budget split (``builder.parallel``), and the project's own job variables
    (``data/jobs.json``) for the jobs each."""
    if extensions is None:
        return Split(1, budget, "")
    got = split(budget, extensions, backend_kind=backend_kind)
    for var, (value, source) in job_variables(dist_name, got.each, budget).items():
        if var in env and env[var] != value:
            draft.notes.append(f"{var}={env[var]} kept (the project reads it: {source})")
            continue
        draft.env[var] = value
    if got.pool and not got.aside and extensions.per_extension:
        draft.notes.append(
            f"{extensions.per_extension}: each extension built beside the others gets the compiler "
            "settings it sets (a compiler state of its own)"
        )
    return got


def _unprefixed(forwarded: Mapping[str, Any]) -> list[str]:
    """A forwarded -C key that is one of our settings without our prefix: it goes to the wrapped
    backend as it is, which is rarely what was meant; say so, with the right spelling."""
    ours = set(Settings.keys())
    notes = []
    for key, value in forwarded.items():
        if key in ours:
            shown = ";".join(value) if isinstance(value, list) else str(value)
            notes.append(
                f"warning: -C {key}={shown} is not read by rocm-build-backend: it goes to the "
                f"wrapped backend as it is; rocm-build-backend's setting is -C {PREFIX}{key}={shown}"
            )
    return notes


def _profile(
    draft: Knobs, vendor: str, settings: Settings, env: Mapping[str, str], backend_kind: str, dist_name: str | None
) -> str | None:
    """The project profile's knobs for the code targets ``draft.code``; returns the profile's name, or None."""
    if settings.profile == "none":
        return None

    profile = select_profile(settings.profile, dist_name)  # auto: the project's, else the target lists
    if profile is None:
        near = difflib.get_close_matches(settings.profile, profile_names(), n=1)
        draft.problems.append(
            f"unknown profile '{settings.profile}'"
            + (f" (did you mean '{near[0]}'?)" if near else "")
            + "; known: "
            + ", ".join(profile_names())
        )
        return None
    targets = draft.code
    variables, defines = profile.env(targets), profile.cmake_defines(targets)
    if profile.name == TARGET_LISTS and not variables and not defines:
        return None  # no target list of a known project is this vendor's
    for var, value in variables.items():
        if var in env and env[var] != value and not same_targets(env[var], targets):
            draft.replaced[var] = (env[var], value)
        draft.env[var] = value
    if backend_kind == "scikit-build-core":
        for var, value in defines.items():
            draft.config_settings.setdefault(f"cmake.define.{var}", value)
    else:
        extra = [f"-D{var}={value}" for var, value in defines.items()]
        if extra and "CMAKE_ARGS" in draft.env:
            draft.env["CMAKE_ARGS"] = join_words(shlex.split(draft.env["CMAKE_ARGS"]) + extra)
    for knob in profile.omitted(vendor):
        if draft.env.pop(knob.name, None) is not None:
            draft.replaced.pop(knob.name, None)
            draft.notes.append(f"{knob.name} not set for {profile.title}: {knob.why}")
    return profile.name


def _enforce(draft: Knobs, settings: Settings, vendor: str) -> list[str] | None:
    """Enforcement's variables (into the draft) and its words; None when the build is not
    enforced (``enforce = false``, ``verify = "off"``, no targets, a vendor without enforcement:
    a note says which)."""
    if not draft.code:
        return None
    if not settings.enforce:
        draft.notes.append("enforce = false: the compiler builds the targets the project lists")
        return None
    if settings.verify == "off":  # the project declares no GPU code: no compiler to hold
        draft.notes.append('verify = "off" (the project has no GPU code): no pinned compilers')
        return None
    if enforce.enforcer(vendor) is None:
        draft.notes.append(enforce.not_enforced(vendor))
        return None
    names = [str(t) for t in draft.code]
    changed = enforce.plan_env(vendor, names, draft.env)
    for var, value in changed.items():
        if var in draft.replaced:
            draft.replaced[var] = (draft.replaced[var][0], value)
    draft.env.update(changed)
    return enforce.plan_lines(vendor, names, exact=settings.verify != "off")


def _switches(
    draft: Knobs,
    findings: Sequence[Finding],
    env: Mapping[str, str],
    *,
    vendor: str,
    backend_kind: str,
    enforced: bool,
    profile: str | None,
    apply: bool,
) -> list[Switch]:
    """What the build does about each of the project's own switches (``builder.switches``); with
    ``apply``, the switches that turn the vendor's GPU build on are given to the build."""
    if not findings:
        return []
    switches = resolve(
        findings,
        vendor=vendor,
        targets=[str(t) for t in draft.code],
        env_out=draft.env,
        env_user=env,
        forwarded=draft.config_settings,
        backend_kind=backend_kind,
        enforce=enforced,
        profile=profile,
        apply=apply,
    )
    apply_switches(switches, draft.env, draft.config_settings)
    return switches


def build_inputs(
    settings: Settings, env: Mapping[str, str], backend_kind: str, config_settings: Mapping[str, Any] | None = None
) -> BuildInputs:
    """What a vendor's knobs and checks are computed from, from the settings."""
    return BuildInputs(
        env=env,
        backend_kind=backend_kind,
        config_settings=dict(config_settings or {}),
        ptx=settings.ptx,
        compiler=settings.compiler,
        lenient=settings.verify == "off",
    )


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
    findings: Sequence[Finding] = (),
    extensions: Extensions | None = None,
    cache: CacheChoice = CacheChoice(),
) -> BuildPlan:
    """Compute the variables and config settings a build gets. Pure.

    ``findings``: the project's own switches (``builder.switches.scan``); ``extensions``: what its
    ``setup.py`` shows of its extensions (``builder.parallel.read_extensions``); ``cache``: the
    compiler cache found (``builder.cache.choose_cache``)."""
    targets = list(targets)
    vendors = {vendor_name(t) for t in targets}
    if len(vendors) > 1:
        raise ConfigError(
            [f"the targets {join_targets(targets)} name GPUs of more than one vendor"],
            hint="a build targets one vendor: build once per vendor",
        )
    vendor = vendors.pop() if vendors else vendor_names()[0]
    inputs = build_inputs(settings, env, backend_kind, config_settings)
    notes = _unprefixed(inputs.config_settings)
    if targets:
        draft = build_side(vendor).knobs(targets, inputs)  # the code targets: after the ptx choice
    else:  # verify = "off" and no GPU: the project compiles nothing for a GPU
        draft = Knobs(
            config_settings=dict(inputs.config_settings), notes=["no GPU targets: no target variables, no pinned tools"]
        )
    draft.notes[:0] = notes
    jobs, why = _max_jobs(settings, env, host)
    got = _parallel(draft, jobs, extensions, backend_kind, env, dist_name)
    at_once, each, parallel_why, pool, aside = got.at_once, got.each, got.why, got.pool, got.aside
    if pool and aside:
        why = f"a budget of {jobs} jobs ({why}): every compiler process setuptools starts within {pool} places"
    elif pool:
        why = f"a budget of {jobs} jobs ({why}): one compile pool of {pool} slots, 1 job each"
    elif at_once > 1:
        why = f"a budget of {jobs} jobs ({why}): {at_once} extensions at once x {each}"
    draft.env["MAX_JOBS"] = str(each)
    if "CMAKE_BUILD_PARALLEL_LEVEL" not in env:
        draft.env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(each)
    profile_name = _profile(draft, vendor, settings, env, backend_kind, dist_name) if targets else None
    enforced = _enforce(draft, settings, vendor)
    switches = _switches(
        draft,
        findings,
        env,
        vendor=vendor,
        backend_kind=backend_kind,
        enforced=enforced is not None,
        profile=profile_name,
        apply=settings.switches == "apply" and settings.verify != "off" and bool(targets),
    )
    if draft.problems:
        hint = (
            "fix the quoting in the variable, or unset it"
            if any(" shell words " in p for p in draft.problems)
            else "drop the -C cmake.define setting, or set the same targets"
        )
        raise ConfigError(draft.problems, hint=hint)
    return BuildPlan(
        targets=draft.code,
        source=source,
        env=draft.env,
        kept=draft.kept,
        replaced=draft.replaced,
        config_settings=draft.config_settings,
        backend=settings.backend,
        max_jobs=each,
        jobs_reason=why,
        profile=profile_name,
        pinned_tools=settings.pinned_tools and bool(targets),
        notes=draft.notes,
        source_detail=source_detail or source,
        vendor=vendor,
        enforce=enforced,
        switches=switches,
        build_ext_parallel=at_once,
        parallel_reason=parallel_why,
        compile_pool=pool,
        compile_pool_aside=aside,
        cache=cache,
        ninja_apart=got.apart,
    )
