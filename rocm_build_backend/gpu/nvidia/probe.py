"""NVIDIA detection as the vendor-neutral layer sees it: one ``VendorDetection`` per call.

Live (``probing.live``): NVML in process when no runner was handed in, then ``nvidia-smi``
only when it is on ``PATH`` and NVIDIA's kernel driver shows under the root (so a machine
without NVIDIA's driver spawns nothing for NVIDIA, even with CUDA's tools installed),
within the shared deadline. Recorded: the ``nvidia-smi`` (query) and ``nvidia-smi -L`` texts;
nothing runs. Every GPU becomes a ``Device``; those ``CUDA_VISIBLE_DEVICES`` hides stay listed
with ``included=False``. A bad ``CUDA_VISIBLE_DEVICES`` is a warning and the cause
``cuda_visible_devices`` with no targets, never a silent fallback to every GPU. A machine with
neither NVIDIA's driver library nor ``nvidia-smi`` has no NVIDIA stack: NVIDIA then reports its
probe as not installed (``present=False``), which ``detect`` shows and the other vendors'
"no GPU found" messages leave out.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Sequence

from rocm_build_backend.errors import ConfigError, FormatError, NoGpuDetectedError
from rocm_build_backend.gpu.device import Device, ProbeResult, Probing, VendorDetection
from rocm_build_backend.gpu.nvidia.detect import NvidiaDetection, detect_nvidia
from rocm_build_backend.gpu.nvidia.smi import CAP
from rocm_build_backend.gpu.programs import run_text
from rocm_build_backend.gpu.targets import GpuTarget

VENDOR = "nvidia"
#: Where NVIDIA's kernel driver shows; without any of them ``nvidia-smi`` cannot answer, so it
#: is not run (a machine with CUDA's tools but no NVIDIA GPU spawns nothing for NVIDIA).
_DRIVER_NODES = ("proc/driver/nvidia", "dev/nvidiactl", "dev/dxg")
_ABSENT = "not installed (no NVIDIA driver library libnvidia-ml.so.1, no nvidia-smi on PATH)"


def _runner(probing: Probing) -> Any:
    """(argv) -> (status, text) within the deadline, through ``probing.run`` when given."""

    def run(argv: Sequence[str]) -> tuple[int, str]:
        left = max(0.5, min(20.0, probing.time_left()))
        if probing.run is None:
            return run_text(argv, timeout=left, limit=CAP, env=probing.env)
        proc = probing.run(list(argv), capture_output=True, text=True, timeout=left, check=False, env=dict(probing.env))
        return proc.returncode, (proc.stdout or "") + (proc.stderr or "")

    return run


def _devices(found: NvidiaDetection, probe: str) -> list[Device]:
    out = []
    for g in found.all_gpus:
        shown = g in found.gpus
        out.append(
            Device(
                target=GpuTarget(str(g.target)),
                physical=None,
                name=g.name,
                kind="dgpu",
                included=shown,
                reason="visible" if shown else "hidden by CUDA_VISIBLE_DEVICES",
                source=probe,
                node=g.index,
                uuid=g.uuid,
            )
        )
    return out


def _failed(probe: str, summary: str, cause: str, warnings: list[str] | None = None) -> VendorDetection:
    result = ProbeResult(probe, [], summary, error="not_found" if cause == "nvidia_not_found" else "tool_failed")
    label = "NVML and nvidia-smi" if probe == "nvidia" else probe
    return VendorDetection(
        VENDOR, results={probe: result}, warnings=list(warnings or []), causes=[cause], labels={probe: label}
    )


def detect_vendor(probing: Probing) -> VendorDetection:
    recorded = probing.recorded
    kw: dict[str, Any] = {}
    if recorded is not None:
        if "nvidia-smi" not in recorded:
            return VendorDetection(VENDOR)  # nothing of NVIDIA's was recorded: no probe ran
        kw.update(
            smi_output=recorded["nvidia-smi"],
            smi_list_output=recorded.get("nvidia-smi -L"),
            where="recorded nvidia-smi output",
        )
    else:
        smi = shutil.which("nvidia-smi", path=probing.env.get("PATH"))
        kw.update(run=_runner(probing), smi=smi or "nvidia-smi")
        if probing.run is not None:
            kw["load"] = _no_nvml  # a handed-in runner answers every probe
        if smi is None or (probing.run is None and not _driver_present(probing.root)):
            kw["run"] = _not_installed
    probe = "nvidia-smi" if recorded is not None else "nvidia"  # "nvidia": NVML, then nvidia-smi
    try:
        found = detect_nvidia(probing.env, **kw)
    except ConfigError as exc:
        return _failed(probe, exc.message, "cuda_visible_devices", [exc.message])
    except NoGpuDetectedError as exc:
        if recorded is None and kw["run"] is _not_installed and "cannot be loaded" in exc.message:
            # no NVIDIA driver library and no nvidia-smi: no NVIDIA stack, said as such
            result = ProbeResult(probe, [], _ABSENT, error="not_found")
            return VendorDetection(
                VENDOR,
                results={probe: result},
                causes=["nvidia_not_found"],
                labels={probe: "NVML and nvidia-smi"},
                present=False,
            )
        return _failed(probe, exc.message, "nvidia_not_found")
    except FormatError as exc:
        return _failed(probe, exc.message, "tool_failed")
    probe = "nvml" if found.source.startswith("NVML") else "nvidia-smi"
    devices = _devices(found, probe)
    summary = ", ".join(f"{g.name} {g.cc}" for g in found.all_gpus)
    return VendorDetection(
        VENDOR,
        results={probe: ProbeResult(probe, devices, summary)},
        decided=probe,
        devices=devices,
        targets=[GpuTarget(str(t)) for t in found.targets()],
        warnings=list(found.notes),
        labels={probe: "NVML" if probe == "nvml" else "nvidia-smi"},
    )


def _driver_present(root: Path) -> bool:
    """Whether NVIDIA's kernel driver (or WSL's GPU bridge) shows under ``root``."""
    return any((root / p).exists() for p in _DRIVER_NODES)


def _no_nvml(name: str) -> Any:
    raise OSError("not asked: the caller's runner answers every probe")


def _not_installed(argv: Sequence[str]) -> tuple[int, str]:
    raise FileNotFoundError(2, "not on PATH", argv[0])
