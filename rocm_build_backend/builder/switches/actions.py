"""What the build does about each switch: ``resolve`` (pure).

For each finding, one of:

- ``set``: the build sets it (the shim's own knobs, or the project's profile), with the value;
- ``kept``: the user's environment already sets it (``warn`` when that skips the GPU code);
- ``enforced``: a hard-coded target list, or a target variable nobody sets, that the pinned
  compilers hold to the chosen targets (``enforce = true``);
- ``todo``: nothing sets it and the GPU build needs it: the exact variable or ``-C`` setting to
  give (``CAUSAL_CONV1D_FORCE_BUILD=TRUE``, ``-C cmake.define.GGML_CUDA=ON``), a target variable
  rendered in the form of the project's own default (``80;90`` becomes ``90``);
- ``warn`` / ``info``: worth knowing, nothing to give (a ``torch.cuda.is_available()`` guard, a
  switch for the other vendor's builds).

The todo lines are what a build that comes out without device code names in its hint.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Mapping, Sequence

from rocm_build_backend.builder.enforce import enforcer
from rocm_build_backend.builder.switches.findings import Finding, Switch
from rocm_build_backend.builder.switches.names import vendor as vendor_of
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.gpu.vendor import vendor_named

#: The knobs every build gets; any other variable the plan sets comes from the project's profile.
GENERIC = frozenset(
    {
        "TORCH_CUDA_ARCH_LIST",
        "CUDAARCHS",
        "NVCC_APPEND_FLAGS",
        "CMAKE_ARGS",
        "PYTORCH_ROCM_ARCH",
        "GPU_TARGETS",
        "AMDGPU_TARGETS",
        "HCC_AMDGPU_TARGET",
        "HIP_PLATFORM",
        "HIPCC_COMPILE_FLAGS_APPEND",
        "MAX_JOBS",
        "CMAKE_BUILD_PARALLEL_LEVEL",
    }
)
_ON = ("1", "TRUE", "ON", "YES", "Y")


def _label(vendor: str) -> str:
    found = vendor_named(vendor)
    return found.label if found is not None else vendor


def render(targets: Sequence[str], default: str | None, name: str, vendor: str) -> str:
    """The targets in the form of ``default``, with its separator: the vendor spells them
    (``BuildVendor.switches.spell``: NVIDIA's ``80;90;100`` -> numbers, ``8.0;9.0`` -> compute
    capabilities, ``sm_80,sm_90``, PTX targets left out; AMD's as they are)."""
    sep = next((s for s in (";", ",", " ") if default and s in default.strip()), ";")
    sample = (default or "").strip().split(sep)[0] if default else ""
    switches = build_side(vendor).switches
    return sep.join(switches.spell(targets, sample, name) if switches is not None else targets)


def _defined(name: str, env_out: Mapping[str, str], forwarded: Mapping[str, Any]) -> str | None:
    """The value the build gives CMake variable ``name`` (``-C cmake.define``, ``CMAKE_ARGS``)."""
    for key in (f"cmake.define.{name}", f"skbuild.cmake.define.{name}"):
        if key in forwarded:
            return str(forwarded[key])
    try:
        words = shlex.split(env_out.get("CMAKE_ARGS", ""))
    except ValueError:
        return None
    for w in reversed(words):
        m = re.match(rf"-D{re.escape(name)}(?::[A-Z]+)?=(.*)", w)
        if m:
            return m.group(1)
    return None


def _by(name: str, profile: str | None) -> str:
    return f"the {profile} profile" if profile and name not in GENERIC else "rocm-build-backend"


def _env(f: Finding, ctx: dict[str, Any]) -> Switch:
    name, env_out, user = f.name, ctx["env_out"], ctx["env_user"]
    if name in env_out and env_out[name] != user.get(name):
        return Switch(f, "set", f"set by {_by(name, ctx['profile'])}: {name}={env_out[name]}")
    if name in user:
        value = user[name]
        if f.role == "gpu-off" and (value.upper() in _ON or value == f.value):
            return Switch(
                f, "warn", f"{name}={value} in the environment skips the project's GPU code: unset it", f"unset {name}"
            )
        if f.role == "gpu-on" and f.value is not None and value.upper() not in _ON and value != f.value:
            return Switch(
                f,
                "warn",
                f"{name}={value} in the environment keeps the project's GPU code out: "
                f"{name}={f.value} builds it (a value you give wins)",
                f"{name}={f.value}",
            )
        return Switch(f, "kept", f"set in the environment: {name}={value}")
    return _unset(f, ctx)


def _unset(f: Finding, ctx: dict[str, Any]) -> Switch:
    name = f.name
    default = f" (its default: {f.default})" if f.default not in (None, "") else ""
    if f.role == "gpu-on" and f.left_off:
        return Switch(f, "info", f"not set{default}: left off: {f.left_off}")
    if f.role == "gpu-on":
        if (
            f.value is not None
            and f.default is not None
            and (f.default == f.value or (f.default.upper() in _ON and f.value.upper() in _ON))
        ):
            return Switch(f, "info", f"on by default ({name}={f.default})")
        if f.value is None:
            return Switch(
                f,
                "info",
                f"not set{default}: the project decides by it; give it when its default is not the GPU build you want",
            )
        todo = f"{name}={f.value}"
        if f.gates and ctx["vendor"] not in f.gates:
            return Switch(f, "info", f"not set{default}: it turns on {f.evidence}, for {_label(f.gates[0])} builds")
        if ctx["apply"] and (ctx["vendor"] in f.gates or _gpu_option(f, ctx)):
            why = f.evidence or "the CMake option it is passed on to gates the GPU build"
            return Switch(f, "set", f"applied {todo}: {why}", todo, applied=todo)
        return Switch(f, "todo", f"not set{default}: set {todo} to build the GPU code", todo)
    if f.role == "prebuilt":
        fetch = next((d for d in ctx["findings"] if d.kind == "download" and d.file == f.file), None)
        if ctx["apply"] and fetch is not None:
            todo = f"{name}={f.value or 'TRUE'}"
            return Switch(
                f,
                "set",
                f"applied {todo}: without it the build downloads a prebuilt wheel "
                f"({fetch.where}) with the publisher's targets",
                todo,
                applied=todo,
            )
        return Switch(
            f,
            "todo",
            f"not set: the build first tries to download a prebuilt wheel (the network, and "
            f"the publisher's targets); set {name}={f.value or 'TRUE'} to build from source",
            f"{name}={f.value or 'TRUE'}",
        )
    if f.role == "gpu-off":
        return Switch(f, "info", f"not set, as it must stay ({name}={f.value or '1'} skips the GPU code)")
    if f.role == "targets" and f.fallback:
        return Switch(f, "info", f"a fallback{default}, used only when {name} is not set: the build sets it")
    if f.role == "targets":
        value = render(ctx["targets"], f.default, name, ctx["vendor"])
        if ctx["enforce"]:
            return Switch(
                f,
                "enforced",
                f"not set{default}: the compiler is held to the targets anyway; "
                f"{name}={value} says them in the project's own terms",
                f"{name}={value}",
            )
        return Switch(f, "todo", f"not set{default}: set {name}={value}", f"{name}={value}")
    if f.role == "flags" and ctx["enforce"]:
        return Switch(f, "info", "compiler flags from the environment: target options in them are held to the targets")
    return Switch(f, "info", f"not set{default}")


def _gpu_option(f: Finding, ctx: dict[str, Any]) -> bool:
    """Whether turning the CMake option named like ``f`` on adds the chosen vendor's GPU build, and it
    may be applied (not vendored, no other API): read from what it gates."""
    options = [o for o in ctx["findings"] if o.kind == "cmake-option" and o.name == f.name]
    return any(ctx["vendor"] in o.gates and not o.left_off for o in options)


def _cmake_todo(f: Finding, ctx: dict[str, Any]) -> str:
    return (
        f"-C cmake.define.{f.name}={f.value}"
        if ctx["backend_kind"] == "scikit-build-core"
        else f"CMAKE_ARGS=-D{f.name}={f.value}"
    )


def _option(f: Finding, ctx: dict[str, Any]) -> Switch:
    vendor = ctx["vendor"]
    if f.gates and vendor not in f.gates or not f.gates and f.vendor and f.vendor != vendor:
        return Switch(
            f,
            "info",
            f"for {_label(f.gates[0] if f.gates else f.vendor or '')} builds"
            + (f" ({f.evidence})" if f.evidence else ""),
        )
    passed = [e for e in ctx["findings"] if e.kind == "env" and e.name == f.name]
    if passed and f.kind == "cmake-option":
        return Switch(f, "info", f"{passed[0].where} passes the environment variable {f.name} on to CMake")
    given = _defined(f.name, ctx["env_out"], ctx["forwarded"])
    if given is not None:
        return Switch(f, "set" if given.upper() in _ON else "kept", f"given {f.name}={given}")
    todo = _cmake_todo(f, ctx)
    if f.left_off:
        return Switch(f, "info", f"left off: {f.left_off}")
    if f.role != "gpu-on":
        return Switch(
            f, "info", "left off: OFF by default; turning it on adds no CUDA or HIP language, toolkit or sources"
        )
    if not f.gates:
        return Switch(
            f,
            "todo",
            f"OFF by default: give {todo} to build the GPU code (not applied: no CUDA or HIP "
            "language, toolkit or sources were seen behind it)",
            todo,
        )
    if ctx["apply"]:
        return Switch(f, "set", f"applied {todo}: turning it on adds {f.evidence}", todo, applied=todo)
    return Switch(f, "todo", f"OFF by default: give {todo} to build the GPU code ({f.evidence})", todo)


def _related(f: Finding, switches: list[Switch], roles: tuple[str, ...]) -> list[Switch]:
    return [
        s
        for s in switches
        if s.finding.file == f.file and s.finding.role in roles and s.finding.kind in ("env", "cmake-env")
    ]


def _guard(f: Finding, done: list[Switch]) -> Switch:
    near = _related(f, done, ("gpu-on",))
    if near:
        names = ", ".join(f"{s.finding.name} ({s.finding.where})" for s in near)
        return Switch(f, "info", f"False where torch sees no GPU (a build machine without one): then {names} decide")
    return Switch(
        f,
        "warn",
        "False where torch sees no GPU (a build machine without one), and no switch to force "
        "the GPU build was found: build where torch sees the GPU",
    )


def _download(f: Finding, done: list[Switch]) -> Switch:
    near = _related(f, done, ("prebuilt",))
    for s in near:
        if s.action in ("set", "kept") and s.applied:
            return Switch(f, "info", f"skipped: {s.applied} is applied ({s.finding.where})")
        if s.action in ("set", "kept"):
            return Switch(f, "info", f"skipped: {s.detail.split(': ', 1)[-1]}")
    if near:
        s = near[0]
        return Switch(
            f, "todo", f"downloads a prebuilt wheel unless {s.finding.name}={s.finding.value or 'TRUE'}", s.todo
        )
    return Switch(f, "warn", "downloads a prebuilt wheel; no switch to build from source was found")


def _hard(f: Finding, ctx: dict[str, Any]) -> Switch:
    if f.vendor and f.vendor != ctx["vendor"]:
        return Switch(f, "info", f"for {_label(f.vendor)} builds")
    if f.fallback:
        return Switch(f, "info", f"a fallback ({f.value}), used only when {f.name} is not set: the build sets it")
    chosen = " ".join(ctx["targets"])
    held = enforcer(ctx["vendor"]) if ctx["enforce"] else None
    if held is not None:
        listed = (f.value or "").split()
        return Switch(f, "enforced", f"lists {f.value}; enforced: " + held.outcome(listed, list(ctx["targets"])))
    return Switch(f, "warn", f"lists {f.value}; enforce = false: the compiler builds that list, not {chosen}")


def resolve(
    findings: Sequence[Finding],
    *,
    vendor: str,
    targets: Sequence[str],
    env_out: Mapping[str, str],
    env_user: Mapping[str, str],
    forwarded: Mapping[str, Any],
    backend_kind: str,
    enforce: bool,
    profile: str | None,
    apply: bool = False,
) -> list[Switch]:
    """What the build does about each finding, in their order. Pure. ``apply``: turn on the switches
    that gate the vendor's GPU build (``Switch.applied`` says how; ``apply_switches`` does it)."""
    ctx: dict[str, Any] = {
        "vendor": vendor,
        "targets": list(targets),
        "env_out": env_out,
        "env_user": env_user,
        "forwarded": forwarded,
        "backend_kind": backend_kind,
        "enforce": enforce,
        "profile": profile,
        "findings": list(findings),
        "apply": apply,
    }
    done: list[Switch] = []
    later: list[Finding] = []
    for f in findings:
        other = f.vendor or vendor_of(f.name, f.role)
        if f.kind in ("env", "cmake-env") and other and other != ctx["vendor"]:
            done.append(
                Switch(
                    f, "info", f"for {_label(other)} builds" + (" (read in a branch for them only)" if f.vendor else "")
                )
            )
        elif f.kind in ("env", "cmake-env", "skbuild-define", "setup-cfg"):
            done.append(_env(f, ctx) if f.kind != "skbuild-define" or f.role != "gpu-on" else _option(f, ctx))
        elif f.kind == "cmake-option":
            done.append(_option(f, ctx))
        elif f.kind == "hard-coded":
            done.append(_hard(f, ctx))
        elif f.kind == "more":
            done.append(Switch(f, "info", f.text))
        else:
            later.append(f)
    for f in later:
        done.append(_guard(f, done) if f.kind == "cuda-guard" else _download(f, done))
    order = {id(f): i for i, f in enumerate(findings)}
    return _same_variable(sorted(done, key=lambda s: order[id(s.finding)]))


def _same_variable(switches: list[Switch]) -> list[Switch]:
    """Other reads of a variable the build sets to turn the GPU build on say so (set once)."""
    applied = {
        s.applied.partition("=")[0]: s
        for s in switches
        if s.applied and s.finding.kind == "env" and not s.applied.startswith(("-C", "CMAKE_ARGS"))
    }
    out = []
    for s in switches:
        first = applied.get(s.finding.name)
        if first is not None and first is not s and s.finding.kind == "env" and s.action == "todo":
            s = Switch(s.finding, "set", f"{first.applied} is applied ({first.finding.where})")
        out.append(s)
    return out


def needed(switches: Sequence[Switch]) -> list[Switch]:
    """The switches a build without device code most likely missed: what the user must give or unset."""
    return [
        s
        for s in switches
        if s.action == "todo"
        and s.finding.role in ("gpu-on", "prebuilt")
        or s.action == "warn"
        and s.finding.role in ("gpu-off", "guard", "gpu-on")
    ]


def apply_switches(switches: Sequence[Switch], env: dict[str, str], config_settings: dict[str, Any]) -> None:
    """Give the build what turns on each applied switch: a ``-C cmake.define`` setting, a ``-D`` in
    ``CMAKE_ARGS``, or an environment variable (``env``: the variables the build gets, changed in place)."""
    for s in switches:
        how = s.applied
        if not how:
            continue
        if how.startswith("-C cmake.define."):
            key, _, value = how[3:].partition("=")
            config_settings[key] = value
        elif how.startswith("CMAKE_ARGS="):
            env["CMAKE_ARGS"] = " ".join(w for w in (env.get("CMAKE_ARGS", ""), how.split("=", 1)[1]) if w)
        else:
            name, _, value = how.partition("=")
            env[name] = value
