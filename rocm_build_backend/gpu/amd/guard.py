"""AMD's part of the import guard: which GPUs a machine has (KFD sysfs), and the code's devices.

The import guard (``wheel/guard.py``) is one generated module; this module gives it AMD's
functions and data (``gpu.build.GuardPart``). The probe reads the KFD topology in sysfs, with
the standard library ``os`` only and no program run; it honours ``HSA_OVERRIDE_GFX_VERSION``
(and the per-node ``HSA_OVERRIDE_GFX_VERSION_<n>`` values, each counted as a GPU) and reads
another root from ``ROCM_BUILD_BACKEND_SYSFS_ROOT`` (tests, containers). ``LOADS_ON``, the
processors the wheel's code loads on, is computed here at build time from the target table (a
generic target counts for every processor it covers), so the guard holds no rules of its own;
features such as xnack are not compared. Must not write or read a wheel.
"""

from __future__ import annotations

from typing import Sequence

from rocm_build_backend.gpu.build import GuardPart
from rocm_build_backend.gpu.targets import GpuTarget, table, vendor_name

SYSFS_ENV = "ROCM_BUILD_BACKEND_SYSFS_ROOT"

_SOURCE = '''
def _gfx(major, minor, stepping):
    if major <= 0 or not 0 <= minor <= 15 or not 0 <= stepping <= 15:
        return None
    return "gfx%d%x%x" % (major, minor, stepping)


def _override(value):
    parts = value.strip().split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return _gfx(int(parts[0]), int(parts[1]), int(parts[2]))


def gpus(root=None, env=None):
    """[(processor, note)] for each GPU node KFD lists; [] when it cannot tell."""
    import os

    env = os.environ if env is None else env
    root = root or env.get(SYSFS_ENV) or "/"
    nodes = os.path.join(root, "sys/class/kfd/kfd/topology/nodes")
    try:
        names = sorted(os.listdir(nodes))
    except OSError:
        return []
    forced = _override(env.get("HSA_OVERRIDE_GFX_VERSION", ""))
    found = []
    for node in names:
        try:
            with open(os.path.join(nodes, node, "properties"), "rb") as fh:
                data = fh.read(65536)
        except OSError:
            continue
        start = data.find(b"gfx_target_version ")
        if start < 0:
            continue
        fields = data[start:start + 40].split(None, 2)
        try:
            value = int(fields[1])
        except (IndexError, ValueError):
            continue
        if value <= 0:
            continue  # a CPU node
        real = _gfx(value // 10000, value // 100 % 100, value % 100)
        if forced:
            found.append((forced, "KFD node %s, HSA_OVERRIDE_GFX_VERSION; the chip is %s" % (node, real)))
        elif real:
            found.append((real, "KFD node %s" % node))
    if found:
        for key, value in env.items():
            if key.startswith("HSA_OVERRIDE_GFX_VERSION_") and _override(value):
                found.append((_override(value), key))
    return found


def _amd_probe(root, env, load):
    return gpus(root, env)


def _amd_loads(device):
    return device in LOADS_ON
'''


def guard_part(code: Sequence[GpuTarget]) -> GuardPart:
    """The guard's AMD functions, with the processors the AMD ``code`` loads on."""
    loads_on: set[str] = set()
    for t in code:
        if vendor_name(t) != "amd":
            continue
        if t.is_generic:
            loads_on.update(name for name, row in table().items() if row.get("generic") == t.processor)
        else:
            loads_on.add(t.processor)
    return GuardPart(
        constants={"LOADS_ON": frozenset(loads_on), "SYSFS_ENV": SYSFS_ENV},
        source=_SOURCE,
        probe="_amd_probe",
        loads="_amd_loads",
        active=bool(loads_on),
    )
