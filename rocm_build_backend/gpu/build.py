"""The build side of a GPU vendor: what a build asks of it, and the vendor choice.

``gpu.vendor.Vendor`` says what a vendor's target names are, what loads where and how its GPUs
are found; :class:`BuildVendor` says how a build for its targets is steered and checked: the
variable a user sets to ask for targets, the knobs (variables, CMake definitions, config
settings) and the code targets a build gets, the compiler check, the pinned detection tools,
the placeholders of its profile variables, its part of the import guard, its variant provider
and its index families, whether a kernel module's code serves a requested target, how it holds
every compile to the targets (``Enforcer``) and how it shows in a project's own build files
(``Switches``).
``gpu.build.build_side(name)`` finds a vendor's object; each vendor package has one in its
``build.py``, built from the same modules (``knobs``, ``plan``, ``toolchain``, ``pinned``,
``profiles``, ``guard``, ``variant``, ``loader``, ``enforce``, ``switches``).

``choose_vendor`` is the one decision that is no vendor's own: which vendor a build is for.
This module holds no vendor's facts, imports no vendor package and runs nothing.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Protocol, Sequence

from rocm_build_backend.errors import ConfigError, NoGpuDetectedError
from rocm_build_backend.gpu.targets import GpuTarget, parse_targets, vendor_name
from rocm_build_backend.gpu.vendor import Vendor, entry_named, load, vendor_names

#: The ``ptx`` setting: also emit code that the driver compiles for newer GPUs (NVIDIA's PTX);
#: a vendor without such code reads nothing from it.
PTX_CHOICES = ("none", "highest", "all")
_PLAIN_WORD = re.compile(r"[\w@%+=:,./;-]+", re.ASCII)  # shlex.quote's safe set, and ';'
#: One entry of a folder of programs (``Enforcer.contents``): ``("dir", "", 0)``,
#: ``("file", its bytes, 0o111 for a program, else 0)`` or ``("link", where it points, 0)``.
FolderEntry = tuple[str, bytes | str, int]


def join_words(words: Sequence[str]) -> str:
    """Words as one variable that ``shlex.split`` (and a plain ``.split()``) gives back.

    ``shlex.join`` quotes every word holding ';' (``'-DGPU_TARGETS=gfx90a;gfx942'``), which made
    CMAKE_ARGS unreadable in the log and breaks readers that split on spaces; a ';' needs no
    quotes inside a word, so only words with spaces, quotes or other shell characters get them.
    """
    return " ".join(w if _PLAIN_WORD.fullmatch(w) else shlex.quote(w) for w in words)


def same_targets(value: str, targets: Sequence[GpuTarget]) -> bool:
    """Whether a target list in the user's spelling names exactly ``targets``."""
    try:
        return parse_targets(value) == list(targets)
    except Exception:  # noqa: BLE001 - a value we cannot read is not the same
        return False


class BuildInputs(NamedTuple):
    """What a vendor's knobs and checks are computed from, gathered by the build layer."""

    env: Mapping[str, str]  # the build's environment as the user gave it
    backend_kind: str = "setuptools"  # "scikit-build-core", "setuptools", ...: who reads config settings
    config_settings: Mapping[str, Any] = MappingProxyType({})  # forwarded to the wrapped backend
    ptx: str = "none"  # PTX_CHOICES
    compiler: str = "auto"  # the ``compiler`` setting
    lenient: bool = False  # verify = "off": the project declares no GPU code


@dataclass
class Knobs:
    """A vendor's part of a plan (``BuildVendor.knobs``)."""

    env: dict[str, str] = field(default_factory=dict)  # every variable the vendor sets
    kept: dict[str, str] = field(default_factory=dict)  # the user's values kept: they name the same
    replaced: dict[str, tuple[str, str]] = field(default_factory=dict)  # var -> (the user's, ours)
    config_settings: dict[str, Any] = field(default_factory=dict)  # all of them, the user's included
    code: list[GpuTarget] = field(default_factory=list)  # what the compiler emits and the audit must find
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # each one line; the plan raises them together


class Toolchain(Protocol):
    """A compiler that was checked against the targets (for the log and the stamp)."""

    def describe(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


class GuardPart(NamedTuple):
    """A vendor's part of the import guard (``wheel/guard.py`` writes them into one module).

    ``source`` is Python that uses the standard library only and defines two functions:
    ``probe(root, env, load) -> [(device, note)]`` (the machine's GPUs, ``[]`` when it cannot
    tell) and ``loads(device) -> bool`` (the wheel's code loads there); ``constants`` are the
    module-level names ``source`` reads, computed at build time.
    """

    constants: dict[str, object]
    source: str
    probe: str  # the probe function's name in ``source``
    loads: str  # the loads function's name in ``source``
    active: bool  # the wheel holds this vendor's code: its probe runs


class VariantProvider(Protocol):
    """A vendor's wheel-variant provider (PEP 817/825): namespace, feature and how values are earned."""

    namespace: str  # "amd"
    feature: str  # "gfx_arch"
    provider: Mapping[str, Any]  # its entry under variant.json's "providers": requires, plugin-api

    def values(self, codes: Sequence[str], serves_all: Callable[[Iterable[str]], bool]) -> list[str]:
        """The values a wheel holding ``codes`` (its complete targets of this vendor) earns;
        ``serves_all(devices)`` says whether the wheel loads on every one of those devices."""
        ...


class Enforcer(Protocol):
    """How a vendor holds every compile to the chosen targets (the ``enforce`` setting), even when
    the project lists its own. ``targets`` are the build's code targets (the ``ptx`` choice applied).

    ``describe``, ``outcome`` and ``plan_env`` are pure (for the plan); ``identity``, ``contents`` and
    ``variables`` make the programs a build runs, in one folder that ``builder/enforce.py`` names by
    ``identity``'s hash: ``contents`` says what it holds, computed without writing anything, and
    ``builder/enforcedir.py`` reuses a folder already there only when it holds exactly that, else
    writes it afresh. The programs append one JSON line per compile to the file named by
    ``ROCM_BUILD_BACKEND_ENFORCE_RECORD``.
    """

    uncounted: str  # the build log's words for compiles its programs see but do not count ("" when none)

    def describe(self, targets: Sequence[str]) -> list[str]:
        """The plan's words for what enforcement does."""
        ...

    def outcome(self, listed: Sequence[str], targets: Sequence[str]) -> str:
        """What becomes of a compile whose build file lists ``listed`` (for the plan's words)."""
        ...

    def plan_env(self, targets: Sequence[str], planned: Mapping[str, str]) -> dict[str, str]:
        """The plan's variables (``planned``) that enforcement changes, with their new values."""
        ...

    def identity(self, targets: Sequence[str], env: Mapping[str, str], python: str) -> str:
        """Everything the programs' folder will hold, as text; OSError when it cannot be made
        (FileNotFoundError: no toolkit to put in front of)."""
        ...

    def contents(
        self, home: Path, targets: Sequence[str], env: Mapping[str, str], python: str
    ) -> dict[str, FolderEntry]:
        """What the programs' folder at ``home`` holds, by path inside it (``a/b``), each folder
        above an entry listed too; computed, nothing written. OSError as ``identity``."""
        ...

    def variables(self, directory: Path, env: Mapping[str, str]) -> dict[str, str]:
        """The build's variables that lead its compiles to the programs in ``directory``."""
        ...


class Switches(Protocol):
    """How a vendor shows in a project's own build files (``builder/switches`` reads them, never
    runs them): which switch names are its alone, which ``if`` tests pick its toolchain, which
    compiler options name its targets, and how a project spells its targets."""

    flag: str  # the name a hard-coded target list in its compilers' options goes by ("--offload-arch")

    def owns_name(self, name: str, *, targets: bool) -> bool:
        """Whether a switch's name (upper case) holds a word of this vendor's alone; ``targets``:
        the name of a target list or of a CMake backend option, where more words say it."""
        ...

    def picks_toolchain(self, text: str) -> bool:
        """Whether a name or string in an ``if`` test asks for this vendor's toolchain."""
        ...

    def flag_targets(self, text: str) -> list[str]:
        """The targets its compilers' options in ``text`` name, in order, once each."""
        ...

    def spell(self, targets: Sequence[str], sample: str, name: str) -> list[str]:
        """``targets`` in the form of a project's own variable ``name`` whose default's first item
        is ``sample`` (``""``: no default)."""
        ...


class BuildVendor(Protocol):
    """One vendor's build side."""

    name: str  # the registry's name ("amd")
    request_variable: str  # the variable a user sets to ask for targets ("PYTORCH_ROCM_ARCH")
    example_target: str  # a target to show in hints ("gfx942")
    arch_flags: str  # how its compilers are told the targets, for hints ("--offload-arch")
    toolchain_missing: str  # the build log's line when no compiler was found to check with
    pinned_note: str  # the build log's line about the pinned tools in a build for this vendor
    profile_placeholders: frozenset[str]  # the {names} its profile variables may use
    profile_options: Mapping[str, tuple[str, ...]]  # extra keys of its profile variables: allowed values, default first
    index_families: Mapping[str, tuple[str, ...]]  # family index name -> its processors
    variant: VariantProvider | None
    enforce: Enforcer | None  # None: it has no way to hold a compile to the targets
    switches: Switches | None  # None: no switch or target option of a project's is known as its own

    def parse_request(self, value: str, *, where: str) -> list[GpuTarget]:
        """The targets ``request_variable=value`` asks for; UnknownTargetError for a bad value."""
        ...

    def same_request(self, value: str, code: Sequence[GpuTarget], *, where: str) -> bool:
        """Whether ``request_variable=value`` names exactly the code targets ``code``."""
        ...

    def code_targets(self, targets: Sequence[GpuTarget], inputs: BuildInputs) -> list[GpuTarget]:
        """What the compiler emits for ``targets`` (the ``ptx`` choice applied); ConfigError if none."""
        ...

    def check_toolchain(self, code: Sequence[GpuTarget], inputs: BuildInputs) -> Toolchain | None:
        """The compiler the build will use, after checking it emits every code target
        (ToolchainError naming the ones it rejects); None when none is found to ask."""
        ...

    def knobs(self, targets: Sequence[GpuTarget], inputs: BuildInputs) -> Knobs:
        """Every variable and config setting a build for ``targets`` gets from this vendor. Pure."""
        ...

    def profile_values(self, target: GpuTarget, options: Mapping[str, str]) -> Mapping[str, str] | None:
        """The placeholder values of a profile template for one code target; None when a
        variable with these ``options`` does not see this target."""
        ...

    def pinned_tools(self, targets: Sequence[GpuTarget]) -> dict[str, str]:
        """Script text per tool name that report ``targets`` (every vendor's, the build's code
        targets) to probes of this vendor; ``{}`` when it pins none for them. Pure."""
        ...

    def device_of(self, code: GpuTarget) -> GpuTarget:
        """The device target that code is split and indexed under (``sm_90a`` -> ``sm_90``)."""
        ...

    def covers(self, codes: Sequence[GpuTarget], request: GpuTarget, *, generic_ok: bool) -> str | None:
        """None when the code of one kernel module (``codes``, this vendor's) serves a request
        for ``request`` on every device configuration it stands for; else why not."""
        ...

    def guard_part(self, code: Sequence[GpuTarget]) -> GuardPart | None:
        """Its part of the import guard for a wheel holding ``code`` (every vendor's); None: no part."""
        ...


_BUILD: dict[str, BuildVendor] = {}  # a registry entry's ``module:attr`` -> its build side, loaded once


def build_side(vendor: str | Vendor) -> BuildVendor:
    """The build side of a vendor (by name or object), imported on first use.

    A name the registry does not hold is a KeyError: callers pass names that the settings,
    a target or ``choose_vendor`` produced, which are registered ones.
    """
    name = vendor if isinstance(vendor, str) else vendor.name
    entry = entry_named(name)
    if entry is None:
        raise KeyError(f"no vendor named {name!r} is registered")
    found = _BUILD.get(entry.build)
    if found is None:
        found = _BUILD[entry.build] = load(entry.build)
    return found


def choose_vendor(setting: str, requested: Sequence[GpuTarget], detected: Sequence[GpuTarget]) -> str:
    """The one vendor a build is for. ``requested``/``detected`` hold targets with ``.vendor``
    (``GpuTarget``); ``requested`` is empty for ``targets = "auto"``.

    ``auto``: the vendor of the requested targets; else the only vendor among the detected GPUs;
    else an error naming what was found. A build targets one vendor.
    """
    names = vendor_names()
    if setting != "auto" and setting not in names:
        raise ConfigError(
            [f"vendor = {setting!r}: expected " + _either(("auto", *names))],
            hint='vendor = "auto" takes the vendor of the targets',
        )
    asked: list[str] = sorted({vendor_name(t) for t in requested})
    if len(asked) > 1:
        raise ConfigError(
            [f"the targets name GPUs of {' and '.join(asked)}: a build targets one vendor"],
            hint="build once per vendor, each with its own targets",
        )
    if setting != "auto":
        if asked and asked[0] != setting:
            raise ConfigError(
                [f"vendor = {setting!r} but the targets are {asked[0]} targets"],
                hint="drop the vendor setting, or give targets of that vendor",
            )
        return setting
    if asked:
        return asked[0]
    found: list[str] = sorted({vendor_name(t) for t in detected})
    if len(found) == 1:
        return found[0]
    if not found:
        raise NoGpuDetectedError(
            "no GPU found to pick a vendor from", hint=f"set targets, e.g. targets = {_examples()}"
        )
    seen = ", ".join(sorted({f"{vendor_name(t)}: {t}" for t in detected}))
    raise ConfigError(
        [f"this machine has GPUs of more than one vendor ({seen})"],
        hint="set vendor = " + " or ".join(f'"{n}"' for n in names) + ", or give the targets",
    )


def _either(items: Sequence[str]) -> str:
    quoted = [f"'{i}'" for i in items]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1 else "".join(quoted)


def _examples() -> str:
    return " or ".join(f'["{build_side(n).example_target}"]' for n in vendor_names())
