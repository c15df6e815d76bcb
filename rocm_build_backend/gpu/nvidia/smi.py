"""What ``nvidia-smi`` says about the GPUs, read from its text (live or recorded).

Two outputs are read:

- ``nvidia-smi --query-gpu=index,name,compute_cap,uuid --format=csv,noheader``: one line per
  GPU, ``0, NVIDIA H200, 9.0, GPU-6e2b...``. The uuid column may be absent (three columns);
  a header line (``--format=csv``) is skipped. ``compute_cap`` needs driver 510 or newer; an
  older one answers ``Field "compute_cap" is not a valid field to query.``
- ``nvidia-smi -L``: ``GPU 0: NVIDIA H200 (UUID: GPU-...)`` and, below a GPU in MIG mode,
  ``  MIG 1g.18gb     Device  0: (UUID: MIG-...)``, which maps MIG devices to their GPU.

Running it is ``gpu.programs.run_text``'s (time limit, output cap, process group).
Bad text is a FormatError naming the line; nothing here guesses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from rocm_build_backend.errors import FormatError
from rocm_build_backend.gpu.nvidia.targets import CudaTarget

QUERY = ["--query-gpu=index,name,compute_cap,uuid", "--format=csv,noheader"]
CAP = 1 << 20  # bytes of nvidia-smi output read at most
MAX_LINES = 1024
# Patterns, compiled (and kept by ``re``) when nvidia-smi's output is read: not on every import.
_CC = r"([0-9]{1,2})\.([0-9])"
_GPU_LINE = r"GPU (\d+): (.*?) \(UUID: (GPU-[0-9A-Za-z-]+)\)\s*$"
_MIG_LINE = r"\s+MIG .*Device\s+(\d+): \(UUID: (MIG-[0-9A-Za-z/-]+)\)\s*$"


@dataclass(frozen=True)
class NvidiaGpu:
    """One physical GPU as NVML or nvidia-smi numbers it (PCI bus order)."""

    index: int
    name: str
    major: int
    minor: int
    uuid: str = ""
    mig: tuple[str, ...] = ()  # UUIDs of its MIG devices, when MIG is on

    @property
    def target(self) -> CudaTarget:
        return CudaTarget(self.major * 10 + self.minor)

    @property
    def cc(self) -> str:
        return f"{self.major}.{self.minor}"

    def to_json(self) -> dict[str, object]:
        return {
            "index": self.index,
            "name": self.name,
            "compute_capability": self.cc,
            "target": str(self.target),
            "uuid": self.uuid,
            "mig": list(self.mig),
        }


def _lines(text: str, where: str) -> list[str]:
    if len(text) > CAP:
        raise FormatError(
            f"{where}: more than {CAP} bytes of nvidia-smi output", hint="give the output of one nvidia-smi query"
        )
    lines = [ln.rstrip("\r") for ln in text.splitlines() if ln.strip()]
    if len(lines) > MAX_LINES:
        raise FormatError(f"{where}: {len(lines)} lines, more than {MAX_LINES}")
    return lines


def parse_query_csv(text: str, where: str = "nvidia-smi output") -> list[NvidiaGpu]:
    """GPUs from ``--query-gpu=index,name,compute_cap[,uuid] --format=csv,noheader``."""
    gpus: list[NvidiaGpu] = []
    for n, line in enumerate(_lines(text, where), start=1):
        if line.lower().startswith("index,"):
            continue  # the csv header
        if "not a valid field" in line:
            raise FormatError(
                f"{where}: this nvidia-smi cannot report compute_cap ({line.strip()})",
                hint="compute_cap needs NVIDIA driver 510 or newer",
            )
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 3 or not fields[0].isdigit():
            raise FormatError(f"{where} line {n}: expected 'index, name, compute_cap[, uuid]', got {line[:120]!r}")
        uuid = fields[-1] if fields[-1].startswith("GPU-") else ""
        body = fields[1:-1] if uuid else fields[1:]
        m = re.fullmatch(_CC, body[-1])
        if not m:
            raise FormatError(f"{where} line {n}: compute capability {body[-1][:40]!r} is not X.Y")
        gpus.append(
            NvidiaGpu(
                index=int(fields[0]),
                name=", ".join(body[:-1])[:200],
                major=int(m.group(1)),
                minor=int(m.group(2)),
                uuid=uuid,
            )
        )
    if len({g.index for g in gpus}) != len(gpus):
        raise FormatError(f"{where}: a GPU index appears twice")
    return gpus


def parse_list(text: str, where: str = "nvidia-smi -L output") -> dict[str, tuple[int, str]]:
    """``nvidia-smi -L``: every GPU and MIG UUID -> (GPU index, the GPU's UUID)."""
    out: dict[str, tuple[int, str]] = {}
    current: tuple[int, str] | None = None
    for n, line in enumerate(_lines(text, where), start=1):
        g = re.match(_GPU_LINE, line)
        if g:
            current = (int(g.group(1)), g.group(3))
            out[g.group(3)] = current
            continue
        m = re.match(_MIG_LINE, line)
        if m and current is not None:
            out[m.group(2)] = current
            continue
        raise FormatError(f"{where} line {n}: not a GPU or MIG line: {line[:120]!r}")
    return out


def with_mig(gpus: Sequence[NvidiaGpu], listing: dict[str, tuple[int, str]]) -> list[NvidiaGpu]:
    """The GPUs with their MIG devices filled in from a ``-L`` listing."""
    out = []
    for g in gpus:
        migs = tuple(u for u, (i, _) in listing.items() if i == g.index and u.startswith("MIG-"))
        out.append(NvidiaGpu(g.index, g.name, g.major, g.minor, g.uuid, migs or g.mig))
    return out
