"""NVIDIA's build side: the object ``gpu.build.build_side("nvidia")`` finds (``gpu.build.BuildVendor``).

It ties NVIDIA's build pieces to the build layer: the knobs (``plan.py`` over ``knobs.py``,
the ``ptx`` choice applied), the nvcc check (``toolchain.py``), the pinned ``nvidia-smi``
(``pinned.py``), the placeholders of profile variables (``profiles.py``), the import guard's
part (``guard.py``), the ``sm_arch`` variant provider (``variant.py``), what a requested
target stands for (``loader.py``), the pinned nvcc and the toolkit view (``enforce.py``) and how
NVIDIA shows in projects' build files (``switches.py``). NVIDIA has no family indexes. No rules
of its own.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from rocm_build_backend.gpu.build import (
    BuildInputs,
    BuildVendor,
    Enforcer,
    GuardPart,
    Knobs,
    Switches,
    VariantProvider,
)
from rocm_build_backend.gpu.nvidia import guard, loader, profiles
from rocm_build_backend.gpu.nvidia.enforce import NvidiaEnforcer
from rocm_build_backend.gpu.nvidia.knobs import torch_arch_list, with_ptx
from rocm_build_backend.gpu.nvidia.pinned import render_nvidia_smi
from rocm_build_backend.gpu.nvidia.plan import nvidia_build_env
from rocm_build_backend.gpu.nvidia.switches import NvidiaSwitches
from rocm_build_backend.gpu.nvidia.targets import CUDA_TARGET_NAME, parse_cuda_target, parse_torch_arch_list
from rocm_build_backend.gpu.nvidia.toolchain import Nvcc, check_nvcc
from rocm_build_backend.gpu.nvidia.variant import NvidiaProvider
from rocm_build_backend.gpu.targets import GpuTarget, vendor_name


class _NvidiaBuild:
    name = "nvidia"
    request_variable = "TORCH_CUDA_ARCH_LIST"
    example_target = "sm_90"
    arch_flags = "-arch/-gencode"
    toolchain_missing = "compiler: not checked"
    pinned_note = "pinned nvidia-smi reports the targets (rocminfo & co. report no AMD GPU)"
    profile_placeholders = profiles.PLACEHOLDERS
    profile_options = profiles.OPTIONS
    index_families: Mapping[str, tuple[str, ...]] = {}
    enforce: Enforcer | None = NvidiaEnforcer()
    switches: Switches | None = NvidiaSwitches()
    variant: VariantProvider | None = NvidiaProvider()

    def parse_request(self, value: str, *, where: str) -> list[GpuTarget]:
        """``TORCH_CUDA_ARCH_LIST`` as the targets it names (``9.0+PTX`` -> sm_90 compute_90)."""
        return [GpuTarget(str(t)) for t in parse_torch_arch_list(value)]

    def same_request(self, value: str, code: Sequence[GpuTarget], *, where: str) -> bool:
        cuda = [parse_cuda_target(t.processor) for t in code]
        return value == torch_arch_list(cuda)[0] or [str(t) for t in self.parse_request(value, where=where)] == [
            str(t) for t in code
        ]

    def code_targets(self, targets: Sequence[GpuTarget], inputs: BuildInputs) -> list[GpuTarget]:
        return [GpuTarget(str(t)) for t in with_ptx([str(t) for t in targets], inputs.ptx)]

    def check_toolchain(self, code: Sequence[GpuTarget], inputs: BuildInputs) -> Nvcc:
        return check_nvcc([str(t) for t in code], inputs.env)

    def knobs(self, targets: Sequence[GpuTarget], inputs: BuildInputs) -> Knobs:
        return nvidia_build_env(targets, inputs)

    def profile_values(self, target: GpuTarget, options: Mapping[str, str]) -> Mapping[str, str] | None:
        return profiles.values(target, options)

    def pinned_tools(self, targets: Sequence[GpuTarget]) -> dict[str, str]:
        mine = [str(t) for t in targets if vendor_name(t) == self.name]
        return {"nvidia-smi": render_nvidia_smi(mine)} if mine else {}

    def device_of(self, code: GpuTarget) -> GpuTarget:
        m = CUDA_TARGET_NAME.fullmatch(code.processor)
        return GpuTarget(f"sm_{m.group(2)}") if m else code.bare

    def covers(self, codes: Sequence[GpuTarget], request: GpuTarget, *, generic_ok: bool) -> str | None:
        return loader.covers(codes, request, generic_ok=generic_ok)

    def guard_part(self, code: Sequence[GpuTarget]) -> GuardPart | None:
        return guard.guard_part(code)


BUILD: BuildVendor = _NvidiaBuild()
