"""Per-project CUDA knobs as data (``data/profiles_nvidia.json``), rendered for code targets.

The same shape as the AMD profiles (``data/profiles.json``), with CUDA placeholders:
``{target}`` (``sm_90a``), ``{number}`` (``90a``), ``{cc}`` (``9.0a``), ``{virtual}``
(``compute_90a``) and ``{cmake}`` (``90a-real``); ``code`` picks the SASS or PTX targets a
template sees. Pure: the JSON is read once, rendering reads nothing::

    p = nvidia_profile_for("flash_attn")
    p.env(["sm_90"])            # {"FLASH_ATTN_CUDA_ARCHS": "90", "FLASH_ATTENTION_FORCE_BUILD": "TRUE"}
    p.cmake_defines(["sm_90"])  # {} here; {"COMPUTE_BACKEND": "cuda", ...} for bitsandbytes
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

from rocm_build_backend.data import path as data_path
from rocm_build_backend.gpu.nvidia.targets import CudaTarget, parse_cuda_target

_PLACEHOLDER = re.compile(r"\{([a-z_]*)\}")
PLACEHOLDERS = frozenset({"target", "number", "cc", "virtual", "cmake"})
_CODES = frozenset({"sass", "ptx", "all"})


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares it: ``Flash_Attn`` -> ``flash-attn``."""
    return re.sub(r"[-_.]+", "-", name).lower().strip()


def _fill(template: str, t: CudaTarget) -> str:
    values = {"target": str(t), "number": f"{t.number}{t.suffix}", "cc": t.cc, "virtual": t.virtual,
              "cmake": f"{t.number}{t.suffix}-{'virtual' if t.ptx else 'real'}"}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


@dataclass(frozen=True)
class CudaVariable:
    name: str
    kind: str  # "env" or "cmake"
    value: str
    separator: str = ";"
    code: str = "sass"
    source: str = ""
    note: str = ""

    def render(self, targets: Sequence[CudaTarget]) -> str | None:
        if not _PLACEHOLDER.search(self.value):
            return self.value
        seen = [t for t in targets if self.code == "all" or t.ptx == (self.code == "ptx")]
        items: list[str] = []
        for t in seen:
            item = _fill(self.value, t)
            if item not in items:
                items.append(item)
        return self.separator.join(items) if items else None


@dataclass(frozen=True)
class CudaProfile:
    name: str
    title: str
    distributions: tuple[str, ...]
    source: str
    variables: tuple[CudaVariable, ...]
    nvcc_append_flags: bool
    limitations: tuple[str, ...]

    def _rendered(self, kind: str, targets: Sequence[CudaTarget | str]) -> dict[str, str]:
        code = [t if isinstance(t, CudaTarget) else parse_cuda_target(t) for t in targets]
        out = {}
        for v in self.variables:
            value = v.render(code) if v.kind == kind else None
            if value is not None:
                out[v.name] = value
        return out

    def env(self, targets: Sequence[CudaTarget | str]) -> dict[str, str]:
        return self._rendered("env", targets)

    def cmake_defines(self, targets: Sequence[CudaTarget | str]) -> dict[str, str]:
        return self._rendered("cmake", targets)


def _variable(raw: dict[str, Any], where: str) -> CudaVariable:
    v = CudaVariable(name=raw["name"], kind=raw["kind"], value=raw["value"], separator=raw.get("separator", ";"),
                     code=raw.get("code", "sass"), source=raw.get("source", ""), note=raw.get("note", ""))
    unknown = set(_PLACEHOLDER.findall(v.value)) - PLACEHOLDERS
    if v.kind not in ("env", "cmake") or v.code not in _CODES or unknown or not v.source:
        raise ValueError(f"{where}: bad variable {v.name!r} (kind, code, placeholders or source)")
    return v


@lru_cache(maxsize=None)
def nvidia_profiles() -> tuple[CudaProfile, ...]:
    with open(data_path("profiles_nvidia.json"), encoding="utf-8") as fh:
        data = json.load(fh)
    out = []
    for raw in data["profiles"]:
        where = f"profiles_nvidia.json {raw.get('name')!r}"
        out.append(CudaProfile(
            name=raw["name"], title=raw["title"], distributions=tuple(normalize(d) for d in raw["distributions"]),
            source=raw["source"], variables=tuple(_variable(v, where) for v in raw["variables"]),
            nvcc_append_flags=bool(raw.get("nvcc_append_flags", True)), limitations=tuple(raw.get("limitations", ())),
        ))
    return tuple(out)


def nvidia_profile_for(dist_name: str) -> CudaProfile | None:
    """The profile whose distributions include ``dist_name`` (PEP 503 comparison), or None."""
    wanted = normalize(dist_name)
    return next((p for p in nvidia_profiles() if wanted in p.distributions or wanted == p.name), None)
