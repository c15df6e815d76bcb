"""The KFD sysfs probe: ``<root>/sys/class/kfd/kfd/topology/nodes/*/properties``.

One small file per node, readable without ``/dev/kfd`` access and without any ROCm user space;
``gfx_target_version`` decodes as decimal major, hex minor, hex stepping (90010 -> gfx90a).
CPU nodes (value 0) are skipped; the runtime's overrides are applied. Must not run programs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping

from rocm_build_backend.gpu.amd.devices import kind_of, unknown_warning
from rocm_build_backend.gpu.amd.names import kfd_to_processor
from rocm_build_backend.gpu.amd.overrides import apply_override, stray_overrides
from rocm_build_backend.gpu.files import read_small_text
from rocm_build_backend.gpu.device import Device, ProbeResult, counted, plural
from rocm_build_backend.gpu.targets import GpuTarget


_NODE = re.compile(r"[0-9]{1,9}")  # ASCII digits only: int() also reads other scripts' digits
_NUMBER = re.compile(r"-?[0-9]{1,30}")
_MAX_NODES = 1024  # KFD numbers nodes densely; real machines have a few dozen at most
_KFD_DIRS = ("sys/class/kfd/kfd/topology/nodes", "sys/devices/virtual/kfd/kfd/topology/nodes")


def _read_properties(path: Path) -> dict[str, int]:
    props: dict[str, int] = {}
    for line in read_small_text(path).splitlines():
        parts = line.split()
        if len(parts) == 2 and _NUMBER.fullmatch(parts[1]):
            props[parts[0]] = int(parts[1])
    return props


def _kfd_nodes_dir(root: Path) -> Path | None:
    for rel in _KFD_DIRS:
        path = root / rel
        if path.is_dir():
            return path
    return None


def _node_device(node: int, processor: str, props: Mapping[str, int]) -> Device:
    simd, per_cu = props.get("simd_count", 0), props.get("simd_per_cu", 0)
    cus = simd // per_cu if per_cu > 0 else None
    unique = props.get("unique_id", 0)
    device_id = props.get("device_id", 0)
    kind, evidence = kind_of(
        processor,
        cus=cus,
        extra=("CPU cores on its KFD node" if props.get("cpu_cores_count", 0) > 0 else ""),
    )
    return Device(
        target=GpuTarget(processor),
        physical=None,
        name="",
        kind=kind,
        included=True,
        reason="",
        source="kfd",
        node=node,
        uuid=f"GPU-{unique:016x}" if 0 < unique < 2**64 else "",
        device_id=f"0x{device_id:04x}" if 0 < device_id < 2**32 else "",
        compute_units=cus,
        evidence=evidence,
    )


def _node(nodes_dir: Path, node: int, warnings: list[str]) -> Device | str:
    """The GPU on one KFD node, or why there is none: "cpu" or "skipped" (with a warning)."""
    try:
        props = _read_properties(nodes_dir / str(node) / "properties")
    except OSError as exc:
        warnings.append(f"KFD node {node}: cannot read properties ({exc.strerror or exc}); skipped")
        return "skipped"
    version = props.get("gfx_target_version")
    if version is None:
        warnings.append(f"KFD node {node}: no readable gfx_target_version; skipped")
        return "skipped"
    if version == 0 or props.get("simd_count", 1) == 0:
        return "cpu"
    processor = kfd_to_processor(version)
    if processor is None:
        warnings.append(f"KFD node {node}: gfx_target_version {version} does not decode; skipped")
        return "skipped"
    return _node_device(node, processor, props)


def read_kfd(root: Path | str = Path("/"), env: Mapping[str, str] | None = None) -> ProbeResult:
    """Read the KFD topology under ``root``; apply the runtime's overrides from ``env``."""
    env = os.environ if env is None else env
    nodes_dir = _kfd_nodes_dir(Path(root))
    if nodes_dir is None:
        return ProbeResult("kfd", [], "no KFD topology (amdgpu driver not loaded)", "no_topology")
    warnings: list[str] = []
    try:
        names = os.listdir(nodes_dir)
    except OSError as exc:
        return ProbeResult("kfd", [], f"cannot list the topology ({exc.strerror})", "tool_failed")
    devices: list[Device] = []
    cpus = skipped = 0
    numbers = sorted(int(n) for n in names if _NODE.fullmatch(n))
    if len(numbers) > _MAX_NODES:
        warnings.append(f"KFD topology lists {len(numbers)} nodes; only the first {_MAX_NODES} were read")
        numbers = numbers[:_MAX_NODES]
    for node in numbers:
        got = _node(nodes_dir, node, warnings)
        if isinstance(got, Device):
            devices.append(got)
        elif got == "cpu":
            cpus += 1
        else:
            skipped += 1
    warnings += stray_overrides(env, [d.node for d in devices if d.node is not None])
    devices = [apply_override(d, env, warnings) for d in devices]
    warnings += unknown_warning("KFD", devices)
    parts = [f"{plural(len(devices), 'GPU node')}" + (f" ({counted(devices)})" if devices else "")]
    parts.append(plural(cpus, "CPU node"))
    if skipped:
        parts.append(f"{skipped} skipped")
    summary = ", ".join(parts) if devices else "no GPU nodes (" + ", ".join(parts[1:]) + ")"
    return ProbeResult("kfd", devices, summary, None, warnings)
