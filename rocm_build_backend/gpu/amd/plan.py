"""What a build for AMD targets gets: the generic HIP knobs merged with the user's environment.

``amd_build_env(targets, inputs)`` is pure (``gpu.build.BuildInputs`` in, ``gpu.build.Knobs``
out), the AMD counterpart of ``gpu/nvidia/plan.py``: a user's variable that names the same
targets is kept, another is replaced and reported; the user's other hipcc flags and CMake
arguments are kept, with ours after them; scikit-build-core gets ``cmake.define.*`` config
settings, and one that names other targets is a problem. Project profiles are applied by the
build layer, not here.
"""

from __future__ import annotations

import shlex
from typing import Mapping, Sequence

from rocm_build_backend.gpu.amd.knobs import (
    ARCH_FLAG,
    CMAKE_DEF,
    CMAKE_VARS,
    PLATFORM,
    cmake_definitions,
    offload_flags,
    target_variables,
)
from rocm_build_backend.gpu.build import BuildInputs, Knobs, join_words, same_targets
from rocm_build_backend.gpu.targets import GpuTarget, join_targets


def _words(out: Knobs, env: Mapping[str, str], var: str, lenient: bool) -> list[str] | None:
    """The user's ``var`` split as the shell would; None (and a problem) when it does not split."""
    try:
        return shlex.split(env.get(var, ""))
    except ValueError as exc:
        what = f"{var} is not a list of shell words ({exc}): {env[var]!r}"
        if lenient:
            out.notes.append(f"warning: {what}; left as it is, the targets are not added to it")
        else:
            out.problems.append(what)
        return None


def _target_vars(out: Knobs, targets: Sequence[GpuTarget], env: Mapping[str, str]) -> None:
    """The variables that name the targets; the user's value is kept when it names the same."""
    for var, value in target_variables(targets).items():
        user = env.get(var)
        if user is not None and (user == value or (var != PLATFORM and same_targets(user, targets))):
            out.kept[var] = out.env[var] = user
        else:
            if user is not None:
                out.replaced[var] = (user, value)
            out.env[var] = value


def _hipcc_flags(out: Knobs, targets: Sequence[GpuTarget], inputs: BuildInputs) -> None:
    """hipcc: our --offload-arch flags, after the user's other flags."""
    flags = offload_flags(targets)
    user_flags = _words(out, inputs.env, "HIPCC_COMPILE_FLAGS_APPEND", inputs.lenient)
    if user_flags is None:
        return
    others = [f for f in user_flags if not ARCH_FLAG.match(f)]
    if [f for f in user_flags if ARCH_FLAG.match(f)] not in ([], flags):
        out.replaced["HIPCC_COMPILE_FLAGS_APPEND"] = (
            inputs.env["HIPCC_COMPILE_FLAGS_APPEND"],
            shlex.join(others + flags),
        )
    out.env["HIPCC_COMPILE_FLAGS_APPEND"] = shlex.join(others + flags)


def _cmake(out: Knobs, targets: Sequence[GpuTarget], inputs: BuildInputs) -> None:
    """CMake: definitions through CMAKE_ARGS (read by scikit-build-core, llama-cpp-python, ...),
    and scikit-build-core's cmake.define.* config settings."""
    semi = join_targets(targets, ";")
    defs = [f"-D{var}={value}" for var, value in cmake_definitions(targets).items()]
    user_args = _words(out, inputs.env, "CMAKE_ARGS", inputs.lenient)
    if user_args is not None:
        keep_args = [a for a in user_args if not CMAKE_DEF.match(a)]
        old_defs = {a for a in user_args if CMAKE_DEF.match(a)}
        if old_defs and not old_defs <= set(defs):
            out.replaced["CMAKE_ARGS"] = (inputs.env["CMAKE_ARGS"], join_words(keep_args + defs))
        out.env["CMAKE_ARGS"] = join_words(keep_args + defs)
    if inputs.backend_kind == "scikit-build-core":
        for var in CMAKE_VARS:
            key = f"cmake.define.{var}"
            given = out.config_settings.get(key) or out.config_settings.get(f"skbuild.{key}")
            if given is not None and not same_targets(str(given), targets):
                out.problems.append(f"-C {key}={given} conflicts with the targets {semi}")
            out.config_settings.setdefault(key, semi)


def amd_build_env(targets: Sequence[GpuTarget], inputs: BuildInputs) -> Knobs:
    """The variables and config settings an AMD build gets. Pure; problems are returned, not raised."""
    out = Knobs(config_settings=dict(inputs.config_settings), code=list(targets))
    _target_vars(out, targets, inputs.env)
    _hipcc_flags(out, targets, inputs)
    _cmake(out, targets, inputs)
    return out
