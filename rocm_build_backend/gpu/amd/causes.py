"""Why AMD detection found no GPU, and what to do about it: error codes ranked, WSL and an
AMD GPU without its driver recognised, one hint per code.

Read only when detection came back empty. Must not run programs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

from rocm_build_backend.gpu.device import ProbeResult
from rocm_build_backend.gpu.files import read_small_text


_RANK = (
    "kfd_permission_denied",
    "driver_not_loaded_no_kfd",
    "driver_not_loaded",
    "out_of_resources",
    "timeout",
    "no_target_info",
    "tool_failed",
    "no_topology",
)


def find_causes(results: Mapping[str, ProbeResult], root: Path, env: Mapping[str, str]) -> list[str]:
    """Error codes behind an empty detection, most telling first (read only on failure)."""
    found = {r.error for r in results.values() if r.error and r.error != "not_found"}
    causes = sorted(found, key=lambda c: _RANK.index(c) if c in _RANK else len(_RANK))
    if _is_wsl(root, env):
        causes.insert(0, "wsl")
    elif "no_topology" in causes or "driver_not_loaded" in causes or "driver_not_loaded_no_kfd" in causes:
        if _amd_gpu_on_pci(root):
            causes.insert(0, "amd_gpu_without_driver")
    return causes


def _is_wsl(root: Path, env: Mapping[str, str]) -> bool:
    if env.get("WSL_DISTRO_NAME") or env.get("WSL_INTEROP"):
        return True
    try:
        text = read_small_text(root / "proc" / "version")
    except OSError:
        return False
    return "microsoft" in text.lower() or "wsl" in text.lower()


def _amd_gpu_on_pci(root: Path) -> bool:
    """An AMD display controller (vendor 0x1002, class 0x03xxxx) on the PCI bus."""
    base = root / "sys" / "bus" / "pci" / "devices"
    try:
        entries = os.listdir(base)
    except OSError:
        return False
    for entry in entries[:4096]:  # a PCI bus has at most a few hundred functions
        try:
            vendor = read_small_text(base / entry / "vendor").strip().lower()
            klass = read_small_text(base / entry / "class").strip().lower()
        except OSError:
            continue
        if vendor == "0x1002" and klass.startswith("0x03"):
            return True
    return False


HINTS = {
    "wsl": "this is WSL, which has no KFD topology and often no /dev/kfd: detection cannot see the GPU there",
    "amd_gpu_without_driver": (
        "an AMD GPU is on the PCI bus but the amdgpu driver is not running: check "
        "'dmesg | grep -i amdgpu'; with Secure Boot on, the amdgpu-dkms module must be signed "
        "(enrol its key with mokutil) or Secure Boot turned off"
    ),
    "driver_not_loaded": (
        "the amdgpu kernel driver is not loaded: check 'lsmod | grep amdgpu' and "
        "'dmesg | grep -i amdgpu'; with Secure Boot on, an unsigned amdgpu-dkms module is refused"
    ),
    "driver_not_loaded_no_kfd": (
        "there is no /dev/kfd: the amdgpu driver is not loaded (in WSL or a container, "
        "/dev/kfd must be passed in, e.g. docker run --device=/dev/kfd --device=/dev/dri)"
    ),
    "kfd_permission_denied": (
        "/dev/kfd is not accessible: add your user to the render and video groups "
        "(sudo usermod -aG render,video $USER) and log in again"
    ),
    "out_of_resources": (
        "the ROCm runtime failed to start (HSA_STATUS_ERROR_OUT_OF_RESOURCES); an empty "
        "HSA_OVERRIDE_GFX_VERSION or a missing /dev/kfd causes this"
    ),
    "timeout": "a detection program did not answer in time",
    "no_target_info": "amd-smi list names GPUs but not their targets: use the output of 'amd-smi static --asic'",
    "hidden": "ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES hide every GPU found",
}


def hints(causes: Sequence[str]) -> list[str]:
    """One hint per known cause, most telling first; WSL or a driverless GPU says it all."""
    out: list[str] = []
    for cause in causes:
        hint = HINTS.get(cause)
        if hint and hint not in out:
            out.append(hint)
        if cause in ("wsl", "amd_gpu_without_driver"):
            break  # the general hints would only repeat it
    return out
