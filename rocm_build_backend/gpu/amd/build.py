"""AMD's build side: the object ``gpu.build.build_side("amd")`` finds (``gpu.build.BuildVendor``).

It ties AMD's build pieces to the build layer: the knobs (``plan.py`` over ``knobs.py``), the
HIP compiler check (``toolchain.py``), the pinned ``rocminfo`` and friends (``pinned.py``), the
placeholders of profile variables (``profiles.py``), the import guard's part (``guard.py``),
the ``gfx_arch`` variant provider (``variant.py``), the family indexes (``families.py``),
what a requested target stands for (``loader.py``), the reset and the targets last on every HIP
compile (``enforce.py``) and how AMD shows in projects' build files (``switches.py``). No rules
of its own.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from rocm_build_backend.gpu.amd import guard, loader, profiles
from rocm_build_backend.gpu.amd.enforce import AmdEnforcer
from rocm_build_backend.gpu.amd.families import FAMILIES
from rocm_build_backend.gpu.amd.pinned import render_tools
from rocm_build_backend.gpu.amd.plan import amd_build_env
from rocm_build_backend.gpu.amd.switches import AmdSwitches
from rocm_build_backend.gpu.amd.toolchain import Compiler, find_compiler, require_supported
from rocm_build_backend.gpu.amd.variant import AmdProvider
from rocm_build_backend.gpu.build import (
    BuildInputs,
    BuildVendor,
    Enforcer,
    GuardPart,
    Knobs,
    Switches,
    VariantProvider,
)
from rocm_build_backend.gpu.targets import GpuTarget, parse_targets


class _AmdBuild:
    name = "amd"
    request_variable = "PYTORCH_ROCM_ARCH"
    example_target = "gfx942"
    arch_flags = "--offload-arch"
    toolchain_missing = "compiler: no HIP compiler found to check the targets with (hipcc, amdclang++, clang)"
    pinned_note = "pinned rocminfo, rocm_agent_enumerator, amdgpu-arch, offload-arch report the targets"
    profile_placeholders = profiles.PLACEHOLDERS
    profile_options = profiles.OPTIONS
    index_families: Mapping[str, tuple[str, ...]] = FAMILIES
    enforce: Enforcer | None = AmdEnforcer()
    switches: Switches | None = AmdSwitches()
    variant: VariantProvider | None = AmdProvider()

    def parse_request(self, value: str, *, where: str) -> list[GpuTarget]:
        return parse_targets(value, where=where)

    def same_request(self, value: str, code: Sequence[GpuTarget], *, where: str) -> bool:
        return parse_targets(value, where=where) == list(code)

    def code_targets(self, targets: Sequence[GpuTarget], inputs: BuildInputs) -> list[GpuTarget]:
        return list(targets)

    def check_toolchain(self, code: Sequence[GpuTarget], inputs: BuildInputs) -> Compiler | None:
        compiler = find_compiler(inputs.compiler, env=inputs.env)
        if compiler is not None:
            require_supported(compiler, code, env=inputs.env)
        return compiler

    def knobs(self, targets: Sequence[GpuTarget], inputs: BuildInputs) -> Knobs:
        return amd_build_env(targets, inputs)

    def profile_values(self, target: GpuTarget, options: Mapping[str, str]) -> Mapping[str, str] | None:
        return profiles.values(target, options)

    def pinned_tools(self, targets: Sequence[GpuTarget]) -> dict[str, str]:
        return render_tools(targets)

    def device_of(self, code: GpuTarget) -> GpuTarget:
        return code.bare

    def covers(self, codes: Sequence[GpuTarget], request: GpuTarget, *, generic_ok: bool) -> str | None:
        return loader.covers(codes, request, generic_ok=generic_ok)

    def guard_part(self, code: Sequence[GpuTarget]) -> GuardPart | None:
        return guard.guard_part(code)


BUILD: BuildVendor = _AmdBuild()
