"""NVIDIA GPUs and their compute capability through NVML, in this process (no subprocess).

``libnvidia-ml.so.1`` comes with the driver. The calls, from NVIDIA's ``nvml.h``:
``nvmlInit_v2``, ``nvmlDeviceGetCount_v2``, ``nvmlDeviceGetHandleByIndex_v2``,
``nvmlDeviceGetName``, ``nvmlDeviceGetUUID``, ``nvmlDeviceGetCudaComputeCapability``,
``nvmlDeviceGetMaxMigDeviceCount`` / ``nvmlDeviceGetMigDeviceHandleByIndex`` (MIG devices,
optional), ``nvmlErrorString``, ``nvmlShutdown``. The library loader is a parameter so tests
hand in a fake; nothing is loaded at import time. Every failure is an ``NvmlUnavailable`` that
says which call failed and why, for the detection notes.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

from rocm_build_backend.gpu.nvidia.smi import NvidiaGpu

LIBRARY = "libnvidia-ml.so.1"
MAX_GPUS = 64
MAX_MIG = 16
_BUF = 96  # NVML_DEVICE_NAME_V2_BUFFER_SIZE and NVML_DEVICE_UUID_V2_BUFFER_SIZE are 96
_NOT_SUPPORTED, _NOT_FOUND = 3, 6


class NvmlUnavailable(Exception):
    """NVML could not answer; the message says which step failed."""


def _err(lib: Any, call: str, ret: int) -> NvmlUnavailable:
    try:
        fn = lib.nvmlErrorString
        fn.restype = ctypes.c_char_p
        text = fn(ret)
        why = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(ret)
    except Exception:  # noqa: BLE001 - an old library without nvmlErrorString
        why = f"error {ret}"
    return NvmlUnavailable(f"{call} failed: {why}")


def _call(lib: Any, name: str, *args: Any) -> None:
    try:
        fn = getattr(lib, name)
    except AttributeError:
        raise NvmlUnavailable(f"{LIBRARY} has no {name}") from None
    fn.restype = ctypes.c_int
    ret = fn(*args)
    if ret != 0:
        raise _err(lib, name, ret)


def _text(lib: Any, name: str, handle: ctypes.c_void_p) -> str:
    buf = ctypes.create_string_buffer(_BUF)
    _call(lib, name, handle, buf, ctypes.c_uint(_BUF))
    return buf.value.decode("utf-8", "replace")


def _mig_uuids(lib: Any, handle: ctypes.c_void_p) -> tuple[str, ...]:
    """The MIG devices' UUIDs under one GPU; () when MIG is off or unsupported."""
    count = ctypes.c_uint(0)
    try:
        _call(lib, "nvmlDeviceGetMaxMigDeviceCount", handle, ctypes.byref(count))
    except NvmlUnavailable:
        return ()
    out = []
    for i in range(min(count.value, MAX_MIG)):
        mig = ctypes.c_void_p()
        fn = getattr(lib, "nvmlDeviceGetMigDeviceHandleByIndex", None)
        if fn is None:
            return ()
        fn.restype = ctypes.c_int
        ret = fn(handle, ctypes.c_uint(i), ctypes.byref(mig))
        if ret in (_NOT_FOUND, _NOT_SUPPORTED):
            continue  # an empty MIG slot
        if ret != 0:
            raise _err(lib, "nvmlDeviceGetMigDeviceHandleByIndex", ret)
        out.append(_text(lib, "nvmlDeviceGetUUID", mig))
    return tuple(out)


def _one(lib: Any, index: int) -> NvidiaGpu:
    handle = ctypes.c_void_p()
    _call(lib, "nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index), ctypes.byref(handle))
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    _call(lib, "nvmlDeviceGetCudaComputeCapability", handle, ctypes.byref(major), ctypes.byref(minor))
    return NvidiaGpu(
        index=index,
        name=_text(lib, "nvmlDeviceGetName", handle),
        major=major.value,
        minor=minor.value,
        uuid=_text(lib, "nvmlDeviceGetUUID", handle),
        mig=_mig_uuids(lib, handle),
    )


def nvml_gpus(load: Callable[[str], Any] | None = None) -> list[NvidiaGpu]:
    """Every GPU NVML sees, in NVML's (PCI bus) order. Raises NvmlUnavailable."""
    loader = load or ctypes.CDLL
    try:
        lib = loader(LIBRARY)
    except OSError as exc:
        raise NvmlUnavailable(f"{LIBRARY} cannot be loaded ({exc})") from None
    _call(lib, "nvmlInit_v2")
    try:
        count = ctypes.c_uint(0)
        _call(lib, "nvmlDeviceGetCount_v2", ctypes.byref(count))
        if count.value > MAX_GPUS:
            raise NvmlUnavailable(f"NVML reports {count.value} GPUs, more than {MAX_GPUS}")
        gpus = [_one(lib, i) for i in range(count.value)]
    finally:
        try:
            lib.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down is best effort
            pass
    for g in gpus:
        if g.major <= 0 or g.major > 99 or not 0 <= g.minor <= 9:
            raise NvmlUnavailable(f"NVML reports compute capability {g.major}.{g.minor} for GPU {g.index}")
    return gpus
