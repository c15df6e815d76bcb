"""One settings model, read from three channels with one precedence order.

Every setting has one name, spelled mechanically in each channel:

    field ``max_jobs``
    -> ``[tool.rocm-build-backend] max-jobs = 8``
    -> ``-C rocm-build-backend.max-jobs=8``
    -> ``ROCM_BUILD_BACKEND_MAX_JOBS=8``

Precedence, highest first: config settings (``-C``), then environment variables, then
``pyproject.toml``, then the default. A config setting belongs to one command line, an
environment variable to a shell session, the pyproject table to the project.
Unknown keys and bad values are collected and reported together.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping

from rocm_build_backend.errors import ConfigError, RocmBuildBackendError
from rocm_build_backend.gpu.build import PTX_CHOICES
from rocm_build_backend.gpu.targets import parse_targets, split_targets
from rocm_build_backend.gpu.vendor import vendor_names

PREFIX = "rocm-build-backend."
ENV_PREFIX = "ROCM_BUILD_BACKEND_"
TABLE = "[tool.rocm-build-backend]"

SETTINGS_HINT = "the settings are listed in docs/reference/settings.md"
PLAN_HINT = "run `rocm-build-backend plan` to check them without building"  # left out by plan itself

# Variables with our prefix that are not build settings (read at run time by the import guard).
_RUNTIME_ENV = {"ROCM_BUILD_BACKEND_GUARD_OFF", "ROCM_BUILD_BACKEND_ENFORCE_RECORD", "ROCM_BUILD_BACKEND_CACHE_PROGRAM"}


class Choice:
    """A parser that takes one of a few words (case and spaces aside); its words are its schema."""

    def __init__(self, *allowed: str) -> None:
        self.allowed = allowed

    def __call__(self, value: Any) -> str:
        text = str(value).strip().lower()
        if text not in self.allowed:
            raise ValueError("expected " + " or ".join(f"'{a}'" for a in self.allowed))
        return text


def _choice(*allowed: str) -> Choice:
    return Choice(*allowed)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected true or false")


MAX_JOBS_LIMIT = 4096  # more parallel compile jobs than any machine has cores for
MEMORY_LIMIT_GIB = 1024


def _whole(value: Any, unit: str, limit: int) -> int:
    """A whole number from 1 to ``limit``: an int from TOML, or its digits as text (-C, env).

    A float, a bool, ``inf`` or ``1e30`` is refused, not rounded (1.9 and true used to become 1).
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"expected a whole number of {unit}")
    text = str(value).strip()
    digits = text[1:] if text[:1] in "+-" else text
    if not digits.isascii() or not digits.isdigit():
        raise ValueError(f"expected a whole number of {unit}")
    if len(digits) > 12:
        raise ValueError(f"expected at most {limit} {unit}")
    number = int(text)
    if number < 1:
        raise ValueError(f"expected at least 1 {unit.rstrip('s') if unit == 'jobs' else unit}")
    if number > limit:
        raise ValueError(f"expected at most {limit} {unit}")
    return number


def _jobs(value: Any) -> int | str:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    try:
        return _whole(value, "jobs", MAX_JOBS_LIMIT)
    except ValueError as exc:
        if "whole number" in str(exc):
            raise ValueError("expected a whole number of jobs or 'auto'") from None
        raise


def _gib(value: Any) -> int:
    return _whole(value, "GiB", MEMORY_LIMIT_GIB)


def _targets(value: Any) -> str | list[str]:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if not isinstance(value, (str, list)) or not all(isinstance(v, str) for v in value):
        raise ValueError("expected 'auto' or a list of GPU targets")
    if not split_targets(value):
        raise ValueError("expected 'auto' or at least one GPU target")
    return [str(t) for t in parse_targets(value)]  # raises UnknownTargetError with suggestions


def _ptx(value: Any) -> str:
    return Choice(*PTX_CHOICES)(value)


def _vendor(value: Any) -> str:
    return Choice("auto", *vendor_names())(value)  # at call time: a vendor registered later counts


def _paths(value: Any) -> list[str]:
    if isinstance(value, str):
        return [p for p in value.split(",") if p.strip()] if value.strip() else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ValueError("expected a list of paths")


def _backend(value: Any) -> str:
    text = str(value).strip()
    module, _, obj = text.partition(":")
    if module.split(".")[0] == "rocm_build_backend":
        raise ValueError(
            "rocm-build-backend cannot wrap itself: name the project's real backend, "
            "e.g. 'setuptools.build_meta' or 'scikit_build_core.build'"
        )
    if not module or not all(part.isidentifier() for part in module.split(".")):
        raise ValueError("expected 'module' or 'module:object', e.g. 'setuptools.build_meta'")
    if obj and not all(part.isidentifier() for part in obj.split(".")):
        raise ValueError("expected 'module' or 'module:object', e.g. 'setuptools.build_meta'")
    return text


def _text(value: Any) -> str:
    return str(value).strip()


_DIGITS = {"type": "string", "pattern": r"^\s*\+?[0-9]+\s*$"}  # -C and env give text; pyproject may too
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
_STRINGS = {"type": "array", "items": {"type": "string"}}


def value_schema(parse: Callable[[Any], Any]) -> tuple[dict[str, Any], str]:
    """The JSON Schema of the ``pyproject.toml`` values a parser takes, and its type in words.

    The settings schema and reference are generated from these; a new parser gets its entry here
    (a ``Choice`` needs none). Checks the schema cannot express (a GPU target's name, a number
    given as text) stay with the parser, which validates every channel.
    """
    if parse in (_ptx, _vendor):
        parse = Choice(*PTX_CHOICES) if parse is _ptx else Choice("auto", *vendor_names())
    if isinstance(parse, Choice):
        return {"enum": list(parse.allowed)}, ", ".join(f'`"{a}"`' for a in parse.allowed)
    known: dict[Callable[[Any], Any], tuple[dict[str, Any], str]] = {
        _bool: (
            {"anyOf": [{"type": "boolean"}, {"enum": ["1", "true", "yes", "on", "0", "false", "no", "off", ""]}]},
            "boolean",
        ),
        _jobs: (
            {"anyOf": [{"const": "auto"}, {"type": "integer", "minimum": 1, "maximum": MAX_JOBS_LIMIT}, _DIGITS]},
            f'`"auto"` or 1-{MAX_JOBS_LIMIT}',
        ),
        _gib: (
            {"anyOf": [{"type": "integer", "minimum": 1, "maximum": MEMORY_LIMIT_GIB}, _DIGITS]},
            f"1-{MEMORY_LIMIT_GIB}",
        ),
        _targets: (
            {"anyOf": [{"type": "string", "pattern": "[^\\s,;]"}, dict(_STRINGS, minItems=1)]},
            '`"auto"`, a list of targets, or one string of them',
        ),
        _paths: ({"anyOf": [{"type": "string"}, _STRINGS]}, "list of paths"),
        _backend: (
            {
                "type": "string",
                "pattern": f"^\\s*{_IDENT}(:{_IDENT})?\\s*$",
                "not": {"pattern": "^\\s*rocm_build_backend([.:]|\\s*$)"},
            },
            "`module:object`",
        ),
        _text: ({"type": "string"}, "string"),
    }
    if parse not in known:
        raise KeyError(f"no schema for the settings parser {parse!r}: add one to value_schema")
    return known[parse]


@dataclass(frozen=True)
class Settings:
    """The settings of one build. ``origin`` says which channel each value came from."""

    backend: str = field(
        default="setuptools.build_meta",
        metadata={"parse": _backend, "doc": "the wrapped build backend, `module:object`"},
    )
    backend_path: list[str] = field(
        default_factory=list,
        metadata={"parse": _paths, "doc": "folders (inside the project) to load an in-tree backend from"},
    )
    targets: str | list[str] = field(
        default="auto",
        metadata={"parse": _targets, "doc": "`auto` (detect this machine's GPUs) or a list: `gfx90a;gfx942`"},
    )
    vendor: str = field(
        default="auto",
        metadata={
            "parse": _vendor,
            "doc": "`auto` (the vendor of the targets, else of the only vendor's GPUs found), `amd` or `nvidia`",
        },
    )
    ptx: str = field(
        default="none",
        metadata={
            "parse": _ptx,
            "doc": "NVIDIA: also emit PTX for newer GPUs: `none`, `highest` (for the highest target) or `all`",
        },
    )
    features: bool = field(
        default=False,
        metadata={"parse": _bool, "doc": "keep detected xnack/sramecc modes in the build targets (`gfx90a:xnack-`)"},
    )
    max_jobs: int | str = field(
        default="auto",
        metadata={"parse": _jobs, "doc": "parallel compile jobs; `auto` sizes by cores and available memory"},
    )
    memory_per_job: int = field(
        default=4, metadata={"parse": _gib, "doc": "GiB one heavy HIP compile job may take, for `max-jobs = auto`"}
    )
    compiler: str = field(
        default="auto",
        metadata={"parse": _text, "doc": "the HIP compiler to check targets with: `auto`, a name on PATH, or a path"},
    )
    compiler_check: bool = field(
        default=True,
        metadata={
            "parse": _bool,
            "doc": 'check before the build that the compiler accepts every target (skipped with `verify = "off"`)',
        },
    )
    verify: str = field(
        default="error",
        metadata={
            "parse": _choice("error", "warn", "off"),
            "doc": 'after the build, audit the wheel\'s device code against the targets: `"error"` deletes the wheel and fails on a missing target, `"warn"` keeps it and prints a warning; `"off"` skips the audit and also says the project has no GPU code: it then builds without a GPU or targets',
        },
    )
    switches: str = field(
        default="apply",
        metadata={
            "parse": _choice("apply", "name"),
            "doc": 'the project\'s own switch that turns its GPU build on (an off-by-default CMake option gating CUDA or HIP, a `FORCE_CUDA`-style variable gating a torch `CUDAExtension`): `"apply"` turns it on when the targets are GPU targets and `verify` is not `"off"` (`docs/switches.md`); `"name"` only names it in the plan',
        },
    )
    stale: str = field(
        default="error",
        metadata={"parse": _choice("error", "clean"), "doc": "what to do with build trees made for other targets"},
    )
    local_version: bool = field(
        default=False, metadata={"parse": _bool, "doc": "add the targets to the version as a local label: `1.0+gfx942`"}
    )
    guard: bool = field(
        default=False,
        metadata={"parse": _bool, "doc": "add an import guard that refuses to load on a GPU the wheel has no code for"},
    )
    variant: bool = field(
        default=False,
        metadata={
            "parse": _bool,
            "doc": "make a variant wheel (WheelNext): `variant.json` and a label from the audit (`docs/variants.md`); only where the frontend takes it back (`python -m build`, `uv build`): pip, `uv pip install` and `uv sync` get the plain wheel",
        },
    )
    profile: str = field(
        default="auto",
        metadata={
            "parse": _text,
            "doc": "the project profile for project-specific knobs: `auto` (by distribution name), a profile name, or `none`",
        },
    )
    enforce: bool = field(
        default=True,
        metadata={
            "parse": _bool,
            "doc": "make the compiler build exactly the targets even when the project lists its own: `--no-offload-arch=all` and the targets last on every HIP compile, a pinned `nvcc` that keeps each compile to the targets",
        },
    )
    compiler_cache: str = field(
        default="auto",
        metadata={
            "parse": _choice("auto", "sccache", "ccache", "off"),
            "doc": "run compiles through a compiler cache: `auto` (sccache, else ccache, when one is on PATH), `sccache`, `ccache` or `off`; it runs behind the pinned compilers, with the targets in its key (`docs/compiler-cache.md`)",
        },
    )
    pinned_tools: bool = field(
        default=True,
        metadata={
            "parse": _bool,
            "doc": "put rocminfo, rocm_agent_enumerator, amdgpu-arch and offload-arch that report the targets first on PATH",
        },
    )
    sysfs_root: str = field(
        default="/",
        metadata={"parse": _text, "doc": "the folder that stands for `/` when reading KFD sysfs (containers, tests)"},
    )
    origin: Mapping[str, str] = field(default_factory=dict, compare=False)

    @staticmethod
    def keys() -> list[str]:
        return [f.name.replace("_", "-") for f in fields(Settings) if f.name != "origin"]

    def source_of(self, key: str) -> str:
        return self.origin.get(key.replace("-", "_"), "default")


def env_name(key: str) -> str:
    return ENV_PREFIX + key.upper().replace("-", "_")


def _near(key: str) -> str:
    near = difflib.get_close_matches(key, Settings.keys(), n=1, cutoff=0.6)
    return f" (did you mean '{near[0]}'?)" if near else ""


def split_config_settings(config_settings: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split ``-C`` settings into ours (prefix removed) and the rest, forwarded unchanged."""
    ours, rest = {}, {}
    for key, value in (config_settings or {}).items():
        if key.startswith(PREFIX):
            name = key[len(PREFIX) :]
            if isinstance(value, list):  # a repeated -C key: lists add up, anything else: the last wins
                value = (
                    ";".join(value) if name == "targets" else ",".join(value) if name == "backend-path" else value[-1]
                )
            ours[name] = value
        else:
            rest[key] = value
    return ours, rest


def load_settings(
    pyproject: Mapping[str, Any] | None = None,
    config_settings: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Merge the three channels into one Settings; raise ConfigError listing every problem.

    ``pyproject`` is the parsed ``pyproject.toml`` (the whole document).
    """
    problems: list[str] = []
    tool = (pyproject or {}).get("tool") or {}
    table = tool.get("rocm-build-backend") if isinstance(tool, Mapping) else None
    if table is None:
        table = {}
    elif not isinstance(table, Mapping):
        problems.append(f'{TABLE} must be a table, e.g. [tool.rocm-build-backend] backend = "{table}"')
        table = {}
    ours, _ = split_config_settings(config_settings)
    channels: list[tuple[str, dict[str, Any], Callable[[str], str]]] = [
        ("pyproject", dict(table), lambda k: f"{TABLE} {k}"),
        ("env", {}, env_name),
        ("-C", ours, lambda k: f"-C {PREFIX}{k}"),
    ]
    for name, value in (env or {}).items():
        if name.startswith(ENV_PREFIX) and name not in _RUNTIME_ENV:
            channels[1][1][name[len(ENV_PREFIX) :].lower().replace("_", "-")] = value

    known = {f.name: f for f in fields(Settings) if f.name != "origin"}
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for channel, data, spell in channels:  # lowest precedence first; later ones win
        for key, raw in data.items():
            attr = key.replace("-", "_")
            if attr not in known or "_" in key:
                problems.append(f"unknown setting {spell(key)}{_near(key.replace('_', '-'))}")
                continue
            try:
                values[attr] = known[attr].metadata["parse"](raw)
            except ValueError as exc:
                problems.append(f"bad value {raw!r} for {spell(key)}: {exc}")
                continue
            except RocmBuildBackendError as exc:
                problems.append(f"{exc.message} in {spell(key)}")
                continue
            origin[attr] = channel
    if problems:
        raise ConfigError(problems, hint=f"{SETTINGS_HINT}; {PLAN_HINT}")
    return Settings(**values, origin=origin)


def settings_table() -> list[tuple[str, str, str, str]]:
    """(key, env variable, default, description) for every setting: the README's table."""
    rows = []
    for f in fields(Settings):
        if f.name == "origin":
            continue
        key = f.name.replace("_", "-")
        default = f.default_factory() if callable(f.default_factory) else f.default
        shown = f'"{default}"' if isinstance(default, str) else str(default).lower()
        rows.append((key, env_name(key), shown, f.metadata["doc"]))
    return rows
