"""Does NVIDIA device code built for one target load on a device? The driver's rules.

Sources (NVIDIA, CUDA C++ Programming Guide, docs.nvidia.com/cuda/cuda-programming-guide):

- SASS: "a cubin object generated for compute capability X.y will only execute on devices of
  compute capability X.z where z>=y" ("Binary Compatibility"): same major, minor at least.
- PTX: compiled by the driver at load time for any device of an equal or higher compute
  capability ("PTX Compatibility"), provided the driver knows that PTX ISA version.
- ``a`` (sm_90a, compute_90a, ...): "can only be run on the exact compute capability it was
  compiled for" (5.1.2.1, architecture-specific features), PTX included.
- ``f`` (sm_100f, compute_100f, ..., CUDA 12.9+): only on members of the same family; the
  "Family-Specific Compatibility" table lists 100f -> 10.0, 10.3; 103f -> 10.3; 110f -> 11.0;
  120f -> 12.0, 12.1; 121f -> 12.1: same major, minor at least. For SASS that is the plain
  rule; for PTX it removes the forward compatibility to newer majors.

Measured on an H200 (sm_90, driver 580, CUDA 13; ``bench/h200``): SASS sm_80/86/89/100/
100f/120 and PTX compute_100 fail with error 209; SASS sm_90, sm_90a and PTX compute_80,
compute_90, compute_90a run. A device-link stub (a cubin without kernels) does not count as
code for its target; that is the audit's business, not a rule here. ``covers`` says whether
one kernel module's code serves a requested target (the audit's ``verify``).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from rocm_build_backend.gpu.nvidia.targets import CudaTarget, parse_cuda_target
from rocm_build_backend.gpu.targets import GpuTarget


def _as(value: CudaTarget | str) -> CudaTarget:
    return value if isinstance(value, CudaTarget) else parse_cuda_target(value)


def _device(value: CudaTarget | str) -> CudaTarget:
    dev = _as(value)
    if dev.ptx or dev.suffix:
        raise ValueError(f"a device is a plain sm_XY compute capability, not {dev}")
    return dev


def why_not(code: CudaTarget | str, device: CudaTarget | str) -> str | None:
    """None when ``code`` loads on ``device`` (an ``sm_XY``); else the reason, in one phrase."""
    c, d = _as(code), _device(device)
    if c.suffix == "a":
        if d.number != c.number:
            return f"{c} runs only on sm_{c.number} devices"
        return None
    if c.ptx and not c.suffix:
        if d.number < c.number:
            return f"PTX {c} needs a device of compute capability {c.major}.{c.minor} or newer"
        return None
    # SASS (plain or family) and family PTX: same major, minor at least
    if d.major != c.major or d.minor < c.minor:
        what = "PTX " if c.ptx else ""
        return f"{what}{c} loads on sm_{c.major}x devices from sm_{c.number} on"
    return None


def loads_on(code: CudaTarget | str, device: CudaTarget | str) -> bool:
    return why_not(code, device) is None


def runs(codes: Iterable[CudaTarget | str], device: CudaTarget | str) -> bool:
    """Whether a binary holding all of ``codes`` has something the device can run."""
    return any(loads_on(c, device) for c in codes)


def chosen(codes: Iterable[CudaTarget | str], device: CudaTarget | str) -> CudaTarget | None:
    """What the driver takes for the device: the best matching SASS, else the newest PTX.

    The driver prefers a compatible cubin over JIT-compiling PTX (Programming Guide, "Just-in-
    Time Compilation"); among cubins the highest compatible minor version.
    """
    usable = [t for t in (_as(c) for c in codes) if loads_on(t, device)]
    sass = [t for t in usable if not t.ptx]
    if sass:
        return max(sass, key=lambda t: (t.number, t.suffix == "a"))
    ptx = [t for t in usable if t.ptx]
    return max(ptx, key=lambda t: (t.number, t.suffix == "a")) if ptx else None


def covers(codes: Sequence[GpuTarget], request: GpuTarget, *, generic_ok: bool = True) -> str | None:
    """None when one kernel module's NVIDIA code (``codes``) serves a request for ``request``:
    ``sm_XY`` by a cubin that loads on sm_XY (PTX alone does not count: it is a JIT fallback),
    ``sm_XYa``/``sm_XYf`` and ``compute_XY`` only by exactly that target. ``generic_ok`` is an
    AMD notion and changes nothing here."""
    name = str(request)
    if name.startswith("compute_") or name[-1] in "af":
        return None if name in {str(c) for c in codes} else f"no {name} code"
    sass = [c for c in codes if c.processor.startswith("sm_")]
    return None if any(loads_on(c.processor, name) for c in sass) else f"no cubin that loads on {name}"
