"""Per-project knobs as data: what a known project reads, in its own syntax, for every vendor.

Every build gets its vendor's generic knobs (``PYTORCH_ROCM_ARCH``, ``TORCH_CUDA_ARCH_LIST``,
...). Some projects read others: flash-attention ``GPU_ARCHS`` (AMD) and
``FLASH_ATTN_CUDA_ARCHS`` (NVIDIA), xformers ``HIP_ARCHITECTURES`` (space-separated),
bitsandbytes the CMake variable ``BNB_ROCM_ARCH``, causal-conv1d
``CAUSAL_CONV1D_FORCE_BUILD=TRUE`` (for every vendor). Those live in ``data/profiles.json``, one
entry per project with the file and line each was read from: vendor-neutral variables (always
constants) at the top, and one section per vendor whose variables apply to builds for that
vendor and may be templates in the vendor's placeholders (``BuildVendor.profile_values``). A
new project is a new entry, not new code::

    profile = profile_for("flash_attn")          # normalized name match; None if unknown
    profile = select_profile("auto", name)       # the project's profile, else target_list_profile()
    profile.env(targets)           # {"FLASH_ATTENTION_FORCE_BUILD": "TRUE", "GPU_ARCHS": "gfx90a;gfx942", ...}
    profile.cmake_defines(targets) # {} here; {"COMPUTE_BACKEND": "hip", "BNB_ROCM_ARCH": ...} for bitsandbytes

A project with no profile still gets every knob marked ``target_list`` in the data (a pure list
of targets under a name several projects read, ``GPU_ARCHS``, ``HIP_ARCHITECTURES``): that is
``target_list_profile()``. Behaviour switches (``FORCE_CUDA``, ``BUILD_TARGET``, ...) stay with
their project's profile. The name to match comes from ``builder/projectname.py``.

Everything here is pure; the JSON is read on first use. No vendor is named here: the sections'
keys are the vendor registry's names.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from rocm_build_backend.data import path as data_path
from rocm_build_backend.gpu.targets import GpuTarget, vendor_name
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.gpu.vendor import vendor_names

_DATA = data_path("profiles.json")
_PLACEHOLDER = re.compile(r"\{([a-z_]*)\}")
_KINDS = frozenset({"env", "cmake"})
ANY = "any"  # the vendor of a top-level (vendor-neutral) variable
_TOP = {
    "name",
    "title",
    "distributions",
    "backend",
    "source",
    "variables",
    "conflicts",
    "no_device_code_hint",
    "limitations",
    "vendors",
}
_SECTION = {
    "source",
    "reads",
    "detects",
    "variables",
    "conflicts",
    "omit",
    "no_device_code_hint",
    "verified_by",
    "limitations",
}
_VARIABLE = {"name", "kind", "value", "separator", "source", "note", "target_list"}


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares it: ``Flash_Attn`` -> ``flash-attn``."""
    return re.sub(r"[-_.]+", "-", name).lower().strip()


class Variable(NamedTuple):  # NamedTuples: a tenth of a frozen dataclass to create, at every build's import
    """One knob a project reads: an environment variable or a CMake cache variable.

    ``value`` is a constant (``"TRUE"``) or a per-target template in the placeholders of its
    vendor (``"{processor}"``, ``"--offload-arch={target}"``, ``"{number}"``); the rendered items
    are de-duplicated in order and joined with ``separator``. ``vendor`` is ``"any"`` for a
    vendor-neutral constant; ``options`` are the vendor's own keys (NVIDIA's ``code``).
    """

    name: str
    kind: str
    value: str
    separator: str = ";"
    vendor: str = ANY
    source: str = ""
    note: str = ""
    target_list: bool = False  # a pure target list: also given to projects without a profile
    options: tuple[tuple[str, str], ...] = ()

    @property
    def is_template(self) -> bool:
        return bool(_PLACEHOLDER.search(self.value))

    def render(self, targets: Sequence[GpuTarget]) -> str | None:
        """The value for these targets, or None when the variable does not apply to them."""
        if self.vendor == ANY:
            return self.value
        mine = [t for t in targets if vendor_name(t) == self.vendor]
        if not mine:
            return None
        if not self.is_template:
            return self.value
        side, options = build_side(self.vendor), dict(self.options)
        items: list[str] = []
        for t in mine:
            values = side.profile_values(t, options)
            if values is None:
                continue
            item = _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.value)
            if item not in items:
                items.append(item)
        return self.separator.join(items) if items else None


class Conflict(NamedTuple):
    """A variable that, set in the build environment, sends the project down a wrong path (or,
    under ``omit``, a generic knob the project must not get)."""

    name: str
    why: str
    source: str = ""
    vendor: str = ANY


class Section(NamedTuple):
    """What one vendor's builds of a project read and get."""

    vendor: str
    source: str = ""
    reads: tuple[str, ...] = ()
    detects: tuple[str, ...] = ()
    variables: tuple[Variable, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    omit: tuple[Conflict, ...] = ()
    no_device_code_hint: str | None = None
    verified_by: tuple[str, ...] = ()
    limitations: tuple[str, ...] = ()


class Profile(NamedTuple):
    """What one project reads, what the shim sets for it, and what to say when it goes wrong."""

    name: str
    title: str
    distributions: tuple[str, ...]
    backend: str | None
    source: str
    common: tuple[Variable, ...] = ()  # vendor-neutral
    common_conflicts: tuple[Conflict, ...] = ()
    common_hint: str | None = None
    common_limitations: tuple[str, ...] = ()
    sections: tuple[Section, ...] = ()

    def section(self, vendor: str) -> Section | None:
        return next((s for s in self.sections if s.vendor == vendor), None)

    @property
    def variables(self) -> tuple[Variable, ...]:
        """Every variable: the neutral ones, then each vendor's."""
        return self.common + tuple(v for s in self.sections for v in s.variables)

    @property
    def conflicts(self) -> tuple[Conflict, ...]:
        return self.common_conflicts + tuple(c for s in self.sections for c in s.conflicts)

    @property
    def verified_by(self) -> tuple[str, ...]:
        return tuple(v for s in self.sections for v in s.verified_by)

    @property
    def limitations(self) -> tuple[str, ...]:
        return self.common_limitations + tuple(x for s in self.sections for x in s.limitations)

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

    def omitted(self, vendor: str) -> tuple[Conflict, ...]:
        """The generic knobs of ``vendor`` this project must not get."""
        found = self.section(vendor)
        return found.omit if found else ()

    def no_device_code_hint(self, vendor: str) -> str | None:
        """What to do when a build for ``vendor`` made no device code: the vendor's own hint,
        else the neutral one."""
        found = self.section(vendor)
        return (found.no_device_code_hint if found else None) or self.common_hint

    def conflicting(self, env: Mapping[str, str] | None, vendor: str | None = None) -> list[Conflict]:
        """The conflicts present (set and non-empty) in ``env``: the neutral ones and those of
        ``vendor`` (every vendor's when None)."""
        env = env or {}
        return [c for c in self.conflicts if env.get(c.name) and (vendor is None or c.vendor in (ANY, vendor))]

    def describe(self) -> str:
        """One line for ``plan``: which profile applied and where its knowledge comes from."""
        return f"{self.name} ({self.title}; read from {self.source})"


def _checked(raw: Mapping[str, Any], allowed: set[str], where: str) -> Mapping[str, Any]:
    unknown = set(raw) - allowed
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    return raw


def _variable(raw: Mapping[str, Any], vendor: str, where: str) -> Variable:
    options: dict[str, str] = {}
    allowed_options: Mapping[str, tuple[str, ...]] = {}
    if vendor != ANY:
        allowed_options = build_side(vendor).profile_options
        for key, choices in allowed_options.items():
            if key in raw:
                if raw[key] not in choices:
                    raise ValueError(f"{where}: {key} {raw[key]!r} is not one of {list(choices)}")
                options[key] = raw[key]
    _checked(raw, _VARIABLE | set(allowed_options), where)
    var = Variable(
        name=raw["name"],
        kind=raw["kind"],
        value=raw["value"],
        separator=raw.get("separator", ";"),
        vendor=vendor,
        source=raw.get("source", ""),
        note=raw.get("note", ""),
        target_list=raw.get("target_list", False),
        options=tuple(sorted(options.items())),
    )
    if var.kind not in _KINDS:
        raise ValueError(f"{where}: kind {var.kind!r} is not one of {sorted(_KINDS)}")
    allowed = frozenset() if vendor == ANY else build_side(vendor).profile_placeholders
    bad = set(_PLACEHOLDER.findall(var.value)) - allowed
    if bad:
        what = "a vendor-neutral variable is a constant" if vendor == ANY else f"{vendor} has {sorted(allowed)}"
        raise ValueError(f"{where}: unknown placeholders {sorted(bad)} in {var.value!r} ({what})")
    if var.target_list is not True and var.target_list is not False:
        raise ValueError(f"{where}: target_list must be true or false")
    if var.target_list and (var.kind != "env" or not var.is_template):
        raise ValueError(f"{where}: a target_list variable is an environment variable with a {{placeholder}} template")
    return var


def _conflicts(raw: Iterable[Mapping[str, Any]], vendor: str) -> tuple[Conflict, ...]:
    return tuple(Conflict(c["name"], c["why"], c.get("source", ""), vendor) for c in raw)


def _section(vendor: str, raw: Mapping[str, Any], where: str) -> Section:
    if vendor not in vendor_names():
        raise ValueError(f"{where}: vendor {vendor!r} is not one of {list(vendor_names())}")
    _checked(raw, _SECTION, f"{where} {vendor}")
    return Section(
        vendor=vendor,
        source=raw.get("source", ""),
        reads=tuple(raw.get("reads", ())),
        detects=tuple(raw.get("detects", ())),
        variables=tuple(
            _variable(v, vendor, f"{where} {vendor} variable {i}") for i, v in enumerate(raw.get("variables", ()))
        ),
        conflicts=_conflicts(raw.get("conflicts", ()), vendor),
        omit=_conflicts(raw.get("omit", ()), vendor),
        no_device_code_hint=raw.get("no_device_code_hint"),
        verified_by=tuple(raw.get("verified_by", ())),
        limitations=tuple(raw.get("limitations", ())),
    )


def _profile(raw: Mapping[str, Any]) -> Profile:
    where = f"profile {raw.get('name')!r}"
    _checked(raw, _TOP, where)
    return Profile(
        name=raw["name"],
        title=raw.get("title", raw["name"]),
        distributions=tuple(normalize(d) for d in raw["distributions"]),
        backend=raw.get("backend"),
        source=raw.get("source", ""),
        common=tuple(_variable(v, ANY, f"{where} variable {i}") for i, v in enumerate(raw.get("variables", ()))),
        common_conflicts=_conflicts(raw.get("conflicts", ()), ANY),
        common_hint=raw.get("no_device_code_hint"),
        common_limitations=tuple(raw.get("limitations", ())),
        sections=tuple(_section(vendor, sec, where) for vendor, sec in (raw.get("vendors") or {}).items()),
    )


def load_profiles(data: Mapping[str, Any]) -> tuple[Profile, ...]:
    """Build profiles from the parsed JSON document; ValueError on a malformed entry."""
    if data.get("schema_version") != 2:
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
    by_vendor: dict[str, list[Variable]] = {}
    for var in variables.values():
        by_vendor.setdefault(var.vendor, []).append(var)
    return Profile(
        name=TARGET_LISTS,
        title="no profile for this project: the target lists known projects read",
        distributions=(),
        backend=None,
        source="; ".join(f"{name} as {', '.join(who)} read it" for name, who in origins.items()),
        sections=tuple(Section(vendor=v, variables=tuple(vs)) for v, vs in by_vendor.items()),
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
