"""ACME's build side: one knob (``ACME_ARCH``), no compiler to check, no pinned tool, no
variant provider, no guard part, no family index, nothing to enforce, no switch of its own."""

from __future__ import annotations

from typing import Mapping, Sequence

from rocm_build_backend.gpu.build import BuildInputs, Enforcer, GuardPart, Knobs, Switches, Toolchain, VariantProvider
from rocm_build_backend.gpu.targets import GpuTarget, join_targets, parse_targets


class _AcmeBuild:
    name = "acme"
    request_variable = "ACME_ARCH"
    example_target = "acme1"
    arch_flags = "--acme-arch"
    toolchain_missing = "compiler: ACME has no compiler to check"
    pinned_note = "no ACME tool is pinned"
    profile_placeholders = frozenset({"target"})
    profile_options: Mapping[str, tuple[str, ...]] = {}
    index_families: Mapping[str, tuple[str, ...]] = {}
    variant: VariantProvider | None = None
    enforce: Enforcer | None = None
    switches: Switches | None = None

    def parse_request(self, value: str, *, where: str) -> list[GpuTarget]:
        return parse_targets(value, where=where)

    def same_request(self, value: str, code: Sequence[GpuTarget], *, where: str) -> bool:
        return parse_targets(value, where=where) == list(code)

    def code_targets(self, targets: Sequence[GpuTarget], inputs: BuildInputs) -> list[GpuTarget]:
        return list(targets)

    def check_toolchain(self, code: Sequence[GpuTarget], inputs: BuildInputs) -> Toolchain | None:
        return None

    def knobs(self, targets: Sequence[GpuTarget], inputs: BuildInputs) -> Knobs:
        return Knobs(
            env={"ACME_ARCH": join_targets(targets, ",")},
            config_settings=dict(inputs.config_settings),
            code=list(targets),
        )

    def profile_values(self, target: GpuTarget, options: Mapping[str, str]) -> Mapping[str, str] | None:
        return {"target": str(target)}

    def pinned_tools(self, targets: Sequence[GpuTarget]) -> dict[str, str]:
        return {}

    def device_of(self, code: GpuTarget) -> GpuTarget:
        return code.bare

    def covers(self, codes: Sequence[GpuTarget], request: GpuTarget, *, generic_ok: bool) -> str | None:
        return None if request in codes else f"no {request} code"

    def guard_part(self, code: Sequence[GpuTarget]) -> GuardPart | None:
        return None


BUILD = _AcmeBuild()
