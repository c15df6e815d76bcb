"""AMD detection: the probes in order, the first that sees a GPU decides; then overrides,
visibility and the dGPU/APU choice give the build targets.

Probes, in this order; no later one runs once one has seen a GPU:

1. ``kfd``: the KFD sysfs topology (``kfd.py``), with ``HSA_OVERRIDE_GFX_VERSION`` and its
   per-node form applied the way the runtime applies them;
2. ``rocminfo``: the runtime's own view (overrides and ``ROCR_VISIBLE_DEVICES`` applied);
3. ``rocm_agent_enumerator``: one target per line; an old leading ``gfx000`` is ignored;
4. ``amd-smi``: ``amd-smi static --asic --json`` (the driver's view, physical GPUs);
5. ``amdgpu-arch`` (or ``offload-arch``): one target per line;
6. ``rocm-smi`` (recorded output only, never run): ``--showproductname`` as JSON or CSV.

Probes 2-5 run programs only when the KFD topology shows no GPU, each under what is left of
the one time limit. Replaying (``Probing.recorded`` given) runs nothing. Devices become build
targets like this: GPUs hidden by ``ROCR_VISIBLE_DEVICES`` or ``HIP_VISIBLE_DEVICES`` are left
out; an integrated GPU is left out when a discrete GPU is visible, and built for when it is
the only kind present; the build list is bare processors unless features are kept.

Must not print or raise for "no GPU": the empty result carries its causes.
"""

from __future__ import annotations

from typing import Callable, Mapping

from rocm_build_backend.gpu.amd.amdsmi import parse_amd_smi
from rocm_build_backend.gpu.amd.causes import find_causes
from rocm_build_backend.gpu.amd.kfd import read_kfd
from rocm_build_backend.gpu.amd.overrides import OVERRIDE, apply_override
from rocm_build_backend.gpu.amd.programs import PROGRAMS, run_probe
from rocm_build_backend.gpu.amd.rocminfo import parse_rocminfo
from rocm_build_backend.gpu.amd.selection import select
from rocm_build_backend.gpu.amd.tools import parse_amdgpu_arch, parse_enumerator, parse_rocm_smi
from rocm_build_backend.gpu.device import Device, Probing, ProbeResult, VendorDetection
from rocm_build_backend.gpu.targets import sort_targets

#: Probe names in the order they are consulted.
PROBES = ("kfd", "rocminfo", "rocm_agent_enumerator", "amd-smi", "amdgpu-arch", "rocm-smi")
#: The parser of each probe whose output can be recorded.
PARSERS: dict[str, Callable[[str], ProbeResult]] = {
    "rocminfo": parse_rocminfo,
    "rocm_agent_enumerator": parse_enumerator,
    "amd-smi": parse_amd_smi,
    "amdgpu-arch": parse_amdgpu_arch,
    "rocm-smi": parse_rocm_smi,
}
LABELS = {"kfd": "KFD"}


def _probe(p: Probing) -> dict[str, ProbeResult]:
    """Every probe consulted, in order, up to and including the first that sees a GPU."""
    results: dict[str, ProbeResult] = {}
    if p.live or p.root_given:
        results["kfd"] = read_kfd(p.root, p.env)
    if p.recorded is None:
        if results["kfd"].devices:
            return results
        for probe in PROGRAMS:
            results[probe] = run_probe(probe, PARSERS[probe], run=p.run, env=p.env, root=p.root, timeout=p.time_left())
            if results[probe].devices:
                return results
        return results
    for probe in PROBES[1:]:  # every recorded output is read: a disagreement is worth a warning
        if probe in p.recorded:
            results[probe] = PARSERS[probe](p.recorded[probe])
    return results


def _decided(results: Mapping[str, ProbeResult]) -> ProbeResult | None:
    return next((r for r in results.values() if r.devices), None)


def _overrides(decided: ProbeResult, env: Mapping[str, str], warnings: list[str]) -> list[Device]:
    """The deciding probe's devices with the overrides its program did not apply itself."""
    devices = decided.devices
    if decided.probe in ("amdgpu-arch", "amd-smi"):  # they read the hardware, not the runtime's view
        devices = [apply_override(d, {k: v for k, v in env.items() if k == OVERRIDE}, warnings) for d in devices]
        per_node = sorted(k for k in env if k.startswith(OVERRIDE + "_"))
        if per_node:
            warnings.append(f"{', '.join(per_node)} not applied: {decided.probe}'s GPUs carry no KFD node numbers")
    elif decided.probe == "rocminfo" and env.get(OVERRIDE, "").strip():
        if not any(d.physical for d in devices):
            warnings.append(
                f"{OVERRIDE}={env[OVERRIDE]} is set: rocminfo shows the overridden target; "
                "the physical GPU is not known from its output"
            )
    return devices


def detect_amd(p: Probing) -> VendorDetection:
    """Run (or replay) the AMD probes and choose the AMD build targets."""
    results = _probe(p)
    decided = _decided(results)
    warnings: list[str] = []
    for probe, result in results.items():
        if decided is None or probe == decided.probe:
            warnings.extend(result.warnings)
    if decided is None:
        causes = find_causes(results, p.root, p.env)
        return VendorDetection("amd", results, None, [], [], warnings, causes, LABELS)
    devices = _overrides(decided, p.env, warnings)
    for probe, result in results.items():
        if probe != decided.probe and result.devices:
            mine = sorted(d.processor for d in devices)
            theirs = sorted(d.processor for d in result.devices)
            if mine != theirs:
                warnings.append(f"{probe} saw {', '.join(theirs)}; {decided.probe} decided: {', '.join(mine)}")
    devices = select(devices, decided.probe, p.env, warnings)
    targets = sort_targets(d.target if p.keep_features else d.target.bare for d in devices if d.included)
    causes = [] if targets else ["hidden"]
    return VendorDetection("amd", results, decided.probe, devices, targets, warnings, causes, LABELS)
