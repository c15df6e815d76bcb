"""NVIDIA's part of the import guard: which GPUs a machine has (NVML), and the code's devices.

The import guard (``wheel/guard.py``) is one generated module; this module gives it NVIDIA's
functions and data (``gpu.build.GuardPart``). The probe reads each GPU's compute capability
through NVML with ``ctypes`` in the importing process (no program runs) and finds nothing
without NVIDIA's driver library. ``CUDA_LOADS_ON`` (the ``sm_XY`` devices of the target table
the code loads on, by ``loader``) and ``PTX_FROM`` (the SM number of the oldest plain PTX, which
the driver compiles for any newer device too) are computed here at build time, so the guard
holds no rules of its own. Must not write or read a wheel.
"""

from __future__ import annotations

from typing import Sequence

from rocm_build_backend.gpu.build import GuardPart
from rocm_build_backend.gpu.nvidia import loader
from rocm_build_backend.gpu.targets import GpuTarget, table, vendor_name

_SOURCE = '''
def cuda_gpus(load=None):
    """[(sm_XY, note)] for each GPU NVML lists, read in this process through ctypes (no
    program runs); [] when it cannot tell (no NVIDIA driver library, NVML fails)."""
    import ctypes

    try:
        lib = (load or ctypes.CDLL)("libnvidia-ml.so.1")
    except OSError:
        return []
    if lib.nvmlInit_v2() != 0:
        return []
    found = []
    try:
        count = ctypes.c_uint(0)
        if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return []
        for i in range(min(count.value, 256)):
            handle, major, minor = ctypes.c_void_p(), ctypes.c_int(0), ctypes.c_int(0)
            if lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(i), ctypes.byref(handle)) != 0:
                continue
            if lib.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major), ctypes.byref(minor)) != 0:
                continue
            if 0 < major.value < 100 and 0 <= minor.value <= 9:
                found.append(("sm_%d%d" % (major.value, minor.value), "NVIDIA GPU %d" % i))
    finally:
        try:
            lib.nvmlShutdown()
        except Exception:
            pass
    return found


def _nvidia_probe(root, env, load):
    return cuda_gpus(load)


def _cuda_loads(device):
    if device in CUDA_LOADS_ON:
        return True
    return PTX_FROM is not None and device[3:].isdigit() and int(device[3:]) >= PTX_FROM
'''


def guard_part(code: Sequence[GpuTarget]) -> GuardPart:
    """The guard's NVIDIA functions, with the devices the NVIDIA ``code`` loads on."""
    mine = [str(t) for t in code if vendor_name(t) == "nvidia"]
    devices = [name for name in table() if name.startswith("sm_") and name[3:].isdigit()]
    loads = {d for d in devices if any(loader.loads_on(c, d) for c in mine)}
    plain_ptx = [int(c[8:]) for c in mine if c.startswith("compute_") and c[8:].isdigit()]
    ptx_from = min(plain_ptx) if plain_ptx else None
    return GuardPart(
        constants={"CUDA_LOADS_ON": frozenset(loads), "PTX_FROM": ptx_from},
        source=_SOURCE,
        probe="_nvidia_probe",
        loads="_cuda_loads",
        active=bool(loads) or ptx_from is not None,
    )
