"""Which NVIDIA GPUs a build on this machine would run on, and their compute capability.

Order of probes, each failure written into ``notes`` (never a silent fallback):

1. recorded output, when given (``nvidia-smi --query-gpu=index,name,compute_cap,uuid
   --format=csv,noheader`` text, and optionally ``nvidia-smi -L`` text for MIG UUIDs);
2. NVML in this process (``nvml.nvml_gpus``), no subprocess;
3. ``nvidia-smi`` with that query, with a time limit and a cap on what is read.

Then ``CUDA_VISIBLE_DEVICES`` picks the GPUs CUDA would show (CUDA Programming Guide, "CUDA
Environment Variables"): integer indices, ``GPU-<uuid>`` (a unique prefix is enough),
``MIG-<uuid>`` or ``MIG-GPU-<uuid>/<gi>/<ci>`` (the MIG device's GPU decides the compute
capability); an empty value shows no GPU; ``-1`` ends the list as CUDA documents. Any other
entry that names no GPU is an error here, where CUDA would silently drop it and what follows.
Indices are CUDA's order, which is fastest-first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``;
NVML and nvidia-smi count in PCI order, so indices over GPUs of different compute capability
are refused unless that variable is set (a UUID names a GPU either way).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from rocm_build_backend.errors import ConfigError, FormatError, NoGpuDetectedError
from rocm_build_backend.gpu.nvidia.nvml import NvmlUnavailable, nvml_gpus
from rocm_build_backend.gpu.nvidia.smi import (
    CAP,
    QUERY,
    NvidiaGpu,
    parse_list,
    parse_query_csv,
    with_mig,
)
from rocm_build_backend.gpu.nvidia.targets import CudaTarget, sort_cuda
from rocm_build_backend.gpu.programs import run_text

_HINT_CVD = "CUDA_VISIBLE_DEVICES takes GPU indices or UUIDs as nvidia-smi -L prints them"


@dataclass
class NvidiaDetection:
    """The GPUs visible to CUDA, where the answer came from, and what was tried before."""

    gpus: list[NvidiaGpu]
    source: str
    notes: list[str] = field(default_factory=list)
    all_gpus: list[NvidiaGpu] = field(default_factory=list)

    def targets(self) -> list[CudaTarget]:
        return sort_cuda(g.target for g in self.gpus)

    def to_json(self) -> dict[str, Any]:
        return {
            "vendor": "nvidia",
            "source": self.source,
            "targets": [str(t) for t in self.targets()],
            "gpus": [g.to_json() for g in self.gpus],
            "hidden": [g.index for g in self.all_gpus if g not in self.gpus],
            "notes": list(self.notes),
        }


def _by_uuid(entry: str, gpus: Sequence[NvidiaGpu]) -> NvidiaGpu | str:
    hits = [g for g in gpus if g.uuid and g.uuid.lower().startswith(entry.lower())]
    if len(hits) == 1:
        return hits[0]
    if hits:
        return f"'{entry}' is the start of {len(hits)} GPU UUIDs"
    return f"no GPU has the UUID '{entry}'"


def _by_mig(entry: str, gpus: Sequence[NvidiaGpu]) -> NvidiaGpu | str:
    rest = entry[4:]
    if rest.upper().startswith("GPU-"):  # MIG-GPU-<uuid>/<gi>/<ci> (drivers before R470)
        return _by_uuid(rest.split("/")[0], gpus)
    hits = [g for g in gpus if any(m.lower().startswith(entry.lower()) for m in g.mig)]
    if len(hits) == 1:
        return hits[0]
    if not any(g.mig for g in gpus):
        return f"'{entry}' is a MIG device, and no MIG device was found"
    return f"no MIG device has the UUID '{entry}'"


def _index_entry(entry: str, gpus: Sequence[NvidiaGpu]) -> NvidiaGpu | str:
    i = int(entry)
    if 0 <= i < len(gpus):
        return gpus[i]
    return f"there is no GPU {i} (this machine has {len(gpus)})"


def visible(
    gpus: Sequence[NvidiaGpu], value: str | None, order: str | None = None
) -> tuple[list[NvidiaGpu], list[str]]:
    """The GPUs ``CUDA_VISIBLE_DEVICES=value`` leaves visible, in CUDA's order, and notes.

    Raises NoGpuDetectedError for an empty selection and ConfigError for entries that name no GPU.
    """
    if value is None:
        return list(gpus), []
    entries = [e.strip() for e in value.split(",")]
    if not any(entries) or value.strip() == "NoDevFiles":
        raise NoGpuDetectedError(
            f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU",
            hint="unset CUDA_VISIBLE_DEVICES, or name the GPUs to build for",
        )
    notes: list[str] = []
    chosen: list[NvidiaGpu] = []
    problems: list[str] = []
    used_index = False
    for n, entry in enumerate(entries):
        if entry == "-1":
            if entries[n + 1 :]:
                notes.append(f"CUDA_VISIBLE_DEVICES: '-1' hides {','.join(entries[n + 1 :])}, as CUDA does")
            break
        if entry.lstrip("-").isdigit():
            used_index = True
            got = _index_entry(entry, gpus)
        elif entry.upper().startswith("GPU-"):
            got = _by_uuid(entry, gpus)
        elif entry.upper().startswith("MIG-"):
            got = _by_mig(entry, gpus)
        else:
            got = f"'{entry}' is neither a GPU index, a GPU- UUID nor a MIG- UUID"
        if isinstance(got, str):
            problems.append(got)
        elif got not in chosen:
            chosen.append(got)
    if problems:
        raise ConfigError([f"CUDA_VISIBLE_DEVICES={value!r}: {p}" for p in problems], hint=_HINT_CVD)
    if not chosen:
        raise NoGpuDetectedError(
            f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU",
            hint="unset CUDA_VISIBLE_DEVICES, or name the GPUs to build for",
        )
    if used_index and len({g.cc for g in gpus}) > 1 and (order or "").upper() != "PCI_BUS_ID":
        raise ConfigError(
            [
                f"CUDA_VISIBLE_DEVICES={value!r} names GPUs by index, and this machine's GPUs differ "
                f"({', '.join(f'{g.index}: {g.name} {g.cc}' for g in gpus)}); CUDA counts them "
                "fastest first, nvidia-smi by PCI bus"
            ],
            hint="set CUDA_DEVICE_ORDER=PCI_BUS_ID, or name the GPUs by UUID",
        )
    return chosen, notes


def _probe_live(
    notes: list[str], load: Callable[[str], Any] | None, run: Callable[..., tuple[int, str]] | None, smi: str
) -> tuple[list[NvidiaGpu], str]:
    try:
        return nvml_gpus(load), "NVML (libnvidia-ml.so.1)"
    except NvmlUnavailable as exc:
        notes.append(f"NVML: {exc}")
    runner = run or (lambda argv: run_text(argv, timeout=20.0, limit=CAP))
    try:
        status, text = runner([smi, *QUERY])
    except (OSError, TimeoutError, FormatError) as exc:
        notes.append(f"{smi}: {exc}")
        raise NoGpuDetectedError(
            "no NVIDIA GPU found (" + "; ".join(notes) + ")", hint='give the targets, e.g. targets = ["sm_90"]'
        ) from None
    if status != 0:
        first = text.strip().splitlines()[0][:200] if text.strip() else f"exit status {status}"
        notes.append(f"{smi}: {first}")
        raise NoGpuDetectedError(
            "no NVIDIA GPU found (" + "; ".join(notes) + ")", hint='give the targets, e.g. targets = ["sm_90"]'
        )
    gpus = parse_query_csv(text, f"{smi} output")
    if gpus:
        try:
            lstatus, ltext = runner([smi, "-L"])
            if lstatus == 0:
                gpus = with_mig(gpus, parse_list(ltext, f"{smi} -L output"))
            else:
                notes.append(f"{smi} -L: exit status {lstatus} (MIG devices unknown)")
        except (OSError, TimeoutError, FormatError) as exc:
            notes.append(f"{smi} -L: {exc} (MIG devices unknown)")
    return gpus, smi


def detect_nvidia(
    env: Mapping[str, str],
    *,
    smi_output: str | None = None,
    smi_list_output: str | None = None,
    where: str = "recorded nvidia-smi output",
    load: Callable[[str], Any] | None = None,
    run: Callable[..., tuple[int, str]] | None = None,
    smi: str = "nvidia-smi",
) -> NvidiaDetection:
    """Detect the visible NVIDIA GPUs. Raises NoGpuDetectedError, ConfigError or FormatError."""
    notes: list[str] = []
    if smi_output is not None:
        gpus, source = parse_query_csv(smi_output, where), where
        if smi_list_output is not None:
            gpus = with_mig(gpus, parse_list(smi_list_output, where + " (-L)"))
    else:
        gpus, source = _probe_live(notes, load, run, smi)
    if not gpus:
        raise NoGpuDetectedError(
            f"no NVIDIA GPU found ({source} lists none)", hint='give the targets, e.g. targets = ["sm_90"]'
        )
    shown, more = visible(gpus, env.get("CUDA_VISIBLE_DEVICES"), env.get("CUDA_DEVICE_ORDER"))
    return NvidiaDetection(gpus=shown, source=source, notes=notes + more, all_gpus=list(gpus))
