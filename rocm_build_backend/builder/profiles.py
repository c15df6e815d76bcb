"""Per-project knobs as data: which variables a known project reads, in its own syntax.

Every build gets the generic knobs (``PYTORCH_ROCM_ARCH``, ``GPU_TARGETS``, ...). Some projects
read others: flash-attention ``GPU_ARCHS``, xformers ``HIP_ARCHITECTURES`` (space-separated),
bitsandbytes the CMake variable ``BNB_ROCM_ARCH``, torchvision ``FORCE_CUDA=1``. Those live in
``data/profiles.json``, one entry per project with the file and line each was read from, so a new
project is a new entry, not new code::

    profile = profile_for("flash_attn")          # normalized name match; None if unknown
    profile = select_profile("auto", name)       # the project's profile, else target_list_profile()
    profile.env(targets)           # {"GPU_ARCHS": "gfx90a;gfx942", "FLASH_ATTENTION_FORCE_BUILD": "TRUE", ...}
    profile.cmake_defines(targets) # {} here; {"COMPUTE_BACKEND": "hip", "BNB_ROCM_ARCH": ...} for bitsandbytes

A project with no profile still gets every knob marked ``target_list`` in the data (a pure list
of targets under a name several projects read, ``GPU_ARCHS``, ``HIP_ARCHITECTURES``): that is
``target_list_profile()``. Behaviour switches (``FORCE_CUDA``, ``BUILD_TARGET``, ...) stay with
their project's profile. The name to match comes from ``builder/projectname.py``.

Everything here is pure; the JSON is read on first use.
"""

from __future__ import annotations

from rocm_build_backend.data import path as data_path

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Sequence

from rocm_build_backend.gpu.targets import GpuTarget

_DATA = data_path("profiles.json")
_PLACEHOLDER = re.compile(r"\{([a-z_]*)\}")
_PLACEHOLDERS = frozenset({"target", "processor"})
_KINDS = frozenset({"env", "cmake"})
_VENDORS = frozenset({"amd", "nvidia", "any"})


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares it: ``Flash_Attn`` -> ``flash-attn``."""
    return re.sub(r"[-_.]+", "-", name).lower().strip()


@dataclass(frozen=True)
class Variable:
    """One knob a project reads: an environment variable or a CMake cache variable.

    ``value`` is a constant (``"TRUE"``) or a per-target template (``"{processor}"``,
    ``"{target}"``, ``"--offload-arch={target}"``); the rendered items are de-duplicated in
    order and joined with ``separator``.
    """

    name: str
    kind: str
    value: str
    separator: str = ";"
    vendor: str = "amd"
    source: str = ""
    note: str = ""
    target_list: bool = False  # a pure target list: also given to projects without a profile

    @property
    def is_template(self) -> bool:
        return bool(_PLACEHOLDER.search(self.value))

    def render(self, targets: Sequence[GpuTarget]) -> str | None:
        """The value for these targets, or None when the variable does not apply to them."""
        mine = [t for t in targets if self.vendor == "any" or t.vendor == self.vendor]
        if not mine and self.vendor != "any":
            return None
        if not self.is_template:
            return self.value
        if not mine:
            return None
        items: list[str] = []
        for t in mine:
            item = self.value.replace("{target}", str(t)).replace("{processor}", t.processor)
            if item not in items:
                items.append(item)
        return self.separator.join(items)


@dataclass(frozen=True)
class Conflict:
    """A variable that, set in the build environment, sends the project down a wrong path."""

    name: str
    why: str
    source: str = ""


@dataclass(frozen=True)
class Profile:
    """What one project reads, what the shim sets for it, and what to say when it goes wrong."""

    name: str
    title: str
    distributions: tuple[str, ...]
    backend: str | None
    source: str
    reads: tuple[str, ...]
    detects: tuple[str, ...]
    variables: tuple[Variable, ...]
    conflicts: tuple[Conflict, ...]
    no_device_code_hint: str | None
    verified_by: tuple[str, ...]
    limitations: tuple[str, ...]

    def _render(self, kind: str, targets: Sequence[GpuTarget]) -> dict[str, str]:
        out: dict[str, str] = {}
        for var in self.variables:
            if var.kind == kind:
                value = var.render(targets)
                if value is not None:
                    out[var.name] = value
        return out

    def env(self, targets: Sequence[GpuTarget]) -> dict[str, str]:
        """The environment variables this project needs for these targets, on top of the generic ones."""
        return self._render("env", targets)

    def cmake_defines(self, targets: Sequence[GpuTarget]) -> dict[str, str]:
        """The CMake cache variables (``-DNAME=VALUE``) this project needs for these targets."""
        return self._render("cmake", targets)

    def cmake_args(self, targets: Sequence[GpuTarget]) -> list[str]:
        """``cmake_defines`` as ``-DNAME=VALUE`` arguments, in the profile's order."""
        return [f"-D{name}={value}" for name, value in self.cmake_defines(targets).items()]

    def conflicting(self, env: dict[str, str] | None) -> list[Conflict]:
        """The conflicts present (set and non-empty) in ``env``."""
        env = env or {}
        return [c for c in self.conflicts if env.get(c.name)]

    def describe(self) -> str:
        """One line for ``plan``: which profile applied and where its knowledge comes from."""
        return f"{self.name} ({self.title}; read from {self.source})"


def _variable(raw: dict[str, Any], where: str) -> Variable:
    unknown = set(raw) - {"name", "kind", "value", "separator", "vendor", "source", "note", "target_list"}
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    var = Variable(
        name=raw["name"],
        kind=raw["kind"],
        value=raw["value"],
        separator=raw.get("separator", ";"),
        vendor=raw.get("vendor", "amd"),
        source=raw.get("source", ""),
        note=raw.get("note", ""),
        target_list=raw.get("target_list", False),
    )
    if var.kind not in _KINDS:
        raise ValueError(f"{where}: kind {var.kind!r} is not one of {sorted(_KINDS)}")
    if var.vendor not in _VENDORS:
        raise ValueError(f"{where}: vendor {var.vendor!r} is not one of {sorted(_VENDORS)}")
    bad = set(_PLACEHOLDER.findall(var.value)) - _PLACEHOLDERS
    if bad:
        raise ValueError(f"{where}: unknown placeholders {sorted(bad)} in {var.value!r}")
    if var.target_list is not True and var.target_list is not False:
        raise ValueError(f"{where}: target_list must be true or false")
    if var.target_list and (var.kind != "env" or not var.is_template):
        raise ValueError(f"{where}: a target_list variable is an environment variable with a {{target}} "
                         "or {processor} template")
    return var


def _profile(raw: dict[str, Any]) -> Profile:
    where = f"profile {raw.get('name')!r}"
    unknown = set(raw) - {
        "name", "title", "distributions", "backend", "source", "reads", "detects",
        "variables", "conflicts", "no_device_code_hint", "verified_by", "limitations",
    }
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    return Profile(
        name=raw["name"],
        title=raw.get("title", raw["name"]),
        distributions=tuple(normalize(d) for d in raw["distributions"]),
        backend=raw.get("backend"),
        source=raw.get("source", ""),
        reads=tuple(raw.get("reads", ())),
        detects=tuple(raw.get("detects", ())),
        variables=tuple(
            _variable(v, f"{where} variable {i}") for i, v in enumerate(raw.get("variables", ()))
        ),
        conflicts=tuple(
            Conflict(c["name"], c["why"], c.get("source", "")) for c in raw.get("conflicts", ())
        ),
        no_device_code_hint=raw.get("no_device_code_hint"),
        verified_by=tuple(raw.get("verified_by", ())),
        limitations=tuple(raw.get("limitations", ())),
    )


def load_profiles(data: dict[str, Any]) -> tuple[Profile, ...]:
    """Build profiles from the parsed JSON document; ValueError on a malformed entry."""
    if data.get("schema_version") != 1:
        raise ValueError(f"unsupported profiles schema_version {data.get('schema_version')!r}")
    profiles = tuple(_profile(raw) for raw in data["profiles"])
    seen: dict[str, str] = {}
    for p in profiles:
        for dist in p.distributions:
            if dist in seen:
                raise ValueError(f"distribution {dist!r} is claimed by {seen[dist]!r} and {p.name!r}")
            seen[dist] = p.name
    lists: dict[str, tuple[str, Variable]] = {}
    for p in profiles:
        for var in p.variables:
            if not var.target_list:
                continue
            first = lists.setdefault(var.name, (p.name, var))
            if (first[1].value, first[1].separator, first[1].vendor) != (var.value, var.separator, var.vendor):
                raise ValueError(f"target list {var.name!r} is written differently by {first[0]!r} and {p.name!r}")
    return profiles


@lru_cache(maxsize=None)
def all_profiles() -> tuple[Profile, ...]:
    """Every shipped profile, in the file's order (read on first use)."""
    with open(_DATA, encoding="utf-8") as fh:
        return load_profiles(json.load(fh))


@lru_cache(maxsize=None)
def _by_distribution() -> dict[str, Profile]:
    return {dist: p for p in all_profiles() for dist in p.distributions}


def profile_for(dist_name: str | None) -> Profile | None:
    """The profile for a distribution name (normalized: ``Flash_Attn`` finds ``flash-attn``)."""
    if not dist_name:
        return None
    return _by_distribution().get(normalize(dist_name))


TARGET_LISTS = "target-lists"


@lru_cache(maxsize=None)
def target_list_profile() -> Profile:
    """For a project without a profile: every target-list variable of the shipped profiles, once."""
    variables: dict[str, Variable] = {}
    origins: dict[str, list[str]] = {}
    for p in all_profiles():
        for var in p.variables:
            if var.target_list:
                variables.setdefault(var.name, var)
                origins.setdefault(var.name, []).append(p.name)
    return Profile(
        name=TARGET_LISTS,
        title="no profile for this project: the target lists known projects read",
        distributions=(),
        backend=None,
        source="; ".join(f"{name} as {', '.join(who)} read it" for name, who in origins.items()),
        reads=(), detects=(), variables=tuple(variables.values()), conflicts=(),
        no_device_code_hint=None, verified_by=(), limitations=(),
    )


def select_profile(setting: str, dist_name: str | None) -> Profile | None:
    """The profile a build uses: ``setting`` is ``[tool.rocm-build-backend] profile``.

    ``auto``: the profile of ``dist_name``, else ``target_list_profile()``; ``none``: None; any
    other value names a profile (by name or distribution), None when there is no such profile.
    """
    if setting == "none":
        return None
    if setting == "auto":
        return profile_for(dist_name) or target_list_profile()
    return profile_for(setting) or next((p for p in all_profiles() if p.name == setting), None)


def profile_names() -> list[str]:
    return [p.name for p in all_profiles()]


def known_distributions() -> Iterable[str]:
    return _by_distribution().keys()
