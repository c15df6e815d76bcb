"""Which AMD GPUs does this machine have, and which targets should a build compile for?

Probes, in this order; the first one that sees a GPU decides, and no later one runs:

1. ``kfd``: the KFD sysfs topology, ``<root>/sys/class/kfd/kfd/topology/nodes/*/properties``
   (or the same tree under ``sys/devices/virtual``). One small file per node, readable without
   ``/dev/kfd`` access and without any ROCm user space; ``gfx_target_version`` decodes as
   decimal major, hex minor, hex stepping (90010 -> gfx90a). CPU nodes (value 0) are skipped.
   ``HSA_OVERRIDE_GFX_VERSION`` and ``HSA_OVERRIDE_GFX_VERSION_<node>`` are applied the way the
   runtime applies them (the per-node one wins), so the build list is what the runtime loads
   and the physical target is kept beside it.
2. ``rocminfo``: the runtime's own view (overrides and ``ROCR_VISIBLE_DEVICES`` already applied).
3. ``rocm_agent_enumerator``: one target per line; an old leading ``gfx000`` is ignored.
4. ``amdgpu-arch`` (or ``offload-arch``): one target per line.
5. ``rocm-smi`` (recorded output only, never run): ``--showproductname`` as JSON or CSV.

Probes 2-4 run programs. They run only when the KFD topology shows no GPU, each under what is
left of one overall ``timeout`` (a hung ``rocminfo`` cannot hang a build for longer than that),
and ``subprocess`` is imported only then: a build on a machine with a readable KFD topology
spawns no process.

Replaying a machine: ``recorded`` maps probe names to captured output. When it is given (even
empty), no program runs, and the KFD topology is read only when ``root`` is given explicitly.

Devices become build targets like this:

- GPUs hidden by ``ROCR_VISIBLE_DEVICES`` (KFD and program probes that read KFD themselves) or
  ``HIP_VISIBLE_DEVICES`` (every probe) are left out;
- an integrated GPU is left out when a discrete GPU is visible, and built for when it is the only
  kind present. Signals: ``Memory Properties: APU``, the APU column of the target table, a tiny
  compute-unit count, a marketing name equal to the CPU's, CPU cores on the GPU's KFD node;
- the build list is bare processors (feature "any", loads in either xnack/sramecc mode) unless
  ``keep_features=True``; every device's full target ID stays in the report.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Callable, Mapping, Sequence

from rocm_build_backend.errors import NoGpuDetectedError
from rocm_build_backend.gpu.targets import GpuTarget, kfd_to_processor, sort_targets, table

__all__ = [
    "Device",
    "Detection",
    "ProbeResult",
    "PROBES",
    "detect",
    "require_targets",
    "parse_rocminfo",
    "parse_enumerator",
    "parse_amdgpu_arch",
    "parse_rocm_smi",
    "read_kfd",
]

#: Probe names in the order they are consulted.
PROBES = ("kfd", "rocminfo", "rocm_agent_enumerator", "amdgpu-arch", "rocm-smi")
#: The probes ``detect`` may run as programs, with the executable names tried for each.
_PROGRAMS = {
    "rocminfo": ("rocminfo",),
    "rocm_agent_enumerator": ("rocm_agent_enumerator",),
    "amdgpu-arch": ("amdgpu-arch", "offload-arch"),
}
_LABELS = {"kfd": "KFD"}
_KFD_DIRS = ("sys/class/kfd/kfd/topology/nodes", "sys/devices/virtual/kfd/kfd/topology/nodes")
_OVERRIDE = "HSA_OVERRIDE_GFX_VERSION"
_TINY_CUS = 4  # no discrete AMD GPU has this few compute units; 2-CU iGPUs are common
_EXAMPLE = "set targets, e.g. ROCM_BUILD_BACKEND_TARGETS=gfx942"

_ANSI = re.compile(r"(?:\x1b|\^\[)\[[0-9;]*[A-Za-z]")
_TARGET = re.compile(r"(gfx[0-9a-f]+)((?::(?:sramecc|xnack)[+-])*)")
_GENERIC = re.compile(r"gfx[0-9]+(?:-[0-9]+)?-generic")
_FEATURE = re.compile(r"(sramecc|xnack)([+-])")
_ISA_PREFIX = "amdgcn-amd-amdhsa--"


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Device:
    """One GPU a probe saw, and whether the build compiles for it."""

    target: GpuTarget  # what the runtime loads (after HSA_OVERRIDE_GFX_VERSION)
    physical: GpuTarget | None  # the hardware's own target when an override changed it
    name: str  # marketing name, "" when the probe does not know it
    kind: str  # "dgpu" | "apu"
    included: bool
    reason: str
    source: str
    node: int | None  # KFD node (kfd, rocminfo) or line index (other probes)
    uuid: str = ""  # "GPU-8d1457e2c20f59d2" where known
    device_id: str = ""  # PCI device ID, "0x74a1", where known
    compute_units: int | None = None
    evidence: str = ""  # why ``kind`` is what it is

    @property
    def processor(self) -> str:
        return self.target.processor

    def to_json(self) -> dict:
        return {
            "target": str(self.target),
            "processor": self.target.processor,
            "physical": str(self.physical) if self.physical else None,
            "name": self.name,
            "kind": self.kind,
            "included": self.included,
            "reason": self.reason,
            "source": self.source,
            "node": self.node,
            "device_id": self.device_id or None,
            "compute_units": self.compute_units,
            "evidence": self.evidence,
        }


@dataclass(frozen=True)
class ProbeResult:
    """What one probe saw: its GPUs (before any selection), a one-line summary, an error code.

    ``error`` is one of ``no_topology``, ``driver_not_loaded``, ``driver_not_loaded_no_kfd``,
    ``kfd_permission_denied``, ``out_of_resources``, ``tool_failed``, ``not_found``,
    ``timeout``, or None.
    """

    probe: str
    devices: list[Device]
    summary: str
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Detection:
    """The outcome: build targets, every device with its verdict, the deciding probe."""

    targets: list[GpuTarget]
    devices: list[Device]
    source: str | None
    warnings: list[str]
    seen: dict[str, str]
    causes: list[str] = field(default_factory=list)  # error codes behind an empty result

    def to_json(self) -> dict:
        return {
            "targets": [str(t) for t in self.targets],
            "devices": [d.to_json() for d in self.devices],
            "source": self.source,
            "warnings": list(self.warnings),
            "seen": dict(self.seen),
        }

    def to_text(self) -> str:
        lines = []
        if self.devices:
            lines.append(f"GPUs seen by {self.source}:")
            head = ("node", "target", "physical", "kind", "build", "name", "reason")
            rows = [
                (
                    "-" if d.node is None else str(d.node),
                    str(d.target),
                    str(d.physical) if d.physical else "-",
                    d.kind,
                    "yes" if d.included else "no",
                    d.name or "-",
                    d.reason,
                )
                for d in self.devices
            ]
            widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
            for row in [head, *rows]:
                cells = [c.ljust(w) for c, w in zip(row, widths)] + [row[-1]]
                lines.append("  " + "  ".join(cells).rstrip())
        else:
            lines.append("no AMD GPU found")
        shown = ", ".join(str(t) for t in self.targets) or "(none)"
        lines.append(f"build targets: {shown}" + (f"  (decided by {self.source})" if self.source else ""))
        if self.seen:
            lines.append("probes:")
            lines.extend(f"  {_label(p)}: {s}" for p, s in self.seen.items())
        if self.warnings:
            lines.append("warnings:")
            lines.extend(f"  {w}" for w in self.warnings)
        return "\n".join(lines)


def _label(probe: str) -> str:
    return _LABELS.get(probe, probe)


# --------------------------------------------------------------------------- small helpers


def _target(text: str) -> GpuTarget | None:
    """A GpuTarget from ``gfx90a:sramecc+:xnack-`` (features the table rules out are dropped)."""
    m = _TARGET.fullmatch(text.strip().lower())
    if not m or m.group(1) == "gfx000":
        return None
    processor = m.group(1)
    row = table().get(processor, {})
    feats = {}
    for name, sign in _FEATURE.findall(m.group(2)):
        if row.get(name) is not False:
            feats[name] = sign
    return GpuTarget(processor, sramecc=feats.get("sramecc"), xnack=feats.get("xnack"))


def _counted(devices: Sequence[Device]) -> str:
    counts: dict[str, int] = {}
    for d in devices:
        counts[str(d.target)] = counts.get(str(d.target), 0) + 1
    return ", ".join(f"{t} x{n}" if n > 1 else t for t, n in counts.items())


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _table_kind(processor: str) -> str | None:
    return table().get(processor, {}).get("kind")


def _unknown_warning(probe: str, devices: Sequence[Device]) -> list[str]:
    unknown = sorted({d.processor for d in devices if d.processor not in table()})
    return [f"{probe}: {p} is not in the target table; the toolchain may not know it" for p in unknown]


@lru_cache(maxsize=None)
def _products() -> tuple[tuple[re.Pattern, str], ...]:
    """(pattern, processor) for every product name in the table, '/'-lists expanded:
    ``RX 7900 XTX/XT/GRE`` -> ``RX 7900 XTX``, ``RX 7900 XT``, ``RX 7900 GRE``."""
    out = []
    for processor, row in table().items():
        if row.get("kind") not in ("dgpu", "apu") or not processor.startswith("gfx"):
            continue
        text = re.sub(r"\([^)]*\)", "", row.get("products") or "")
        for item in text.split(","):
            parts = [p.strip() for p in item.split("/")]
            if not parts[0]:
                continue
            prefix = parts[0].rsplit(" ", 1)[0] + " " if " " in parts[0] else ""
            for i, part in enumerate(parts):
                name = part if i == 0 or part.startswith(prefix) else prefix + part
                if len(name) >= 4 and re.search(r"\d", name):
                    out.append((re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.I), processor))
    return tuple(out)


def _product_processor(name: str) -> str | None:
    """The one processor whose product list names this marketing name, else None."""
    if not name:
        return None
    found = {processor for pattern, processor in _products() if pattern.search(name)}
    return found.pop() if len(found) == 1 else None


# --------------------------------------------------------------------------- overrides


def _parse_override(value: str) -> str | None:
    """``"10.3.0"`` -> ``gfx1030``; None for a value the runtime rejects (empty, garbage)."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)\s*", value)
    if not m:
        return None
    major, minor, step = (int(g) for g in m.groups())
    if not 0 < major <= 63 or minor > 15 or step > 15:
        return None
    return kfd_to_processor(major * 10000 + minor * 100 + step)


def _override_for(node: int | None, env: Mapping[str, str]) -> tuple[str, str] | None:
    """(variable, value) of the override the runtime applies to this KFD node, if any."""
    if node is not None and f"{_OVERRIDE}_{node}" in env:
        return f"{_OVERRIDE}_{node}", env[f"{_OVERRIDE}_{node}"]
    if _OVERRIDE in env:
        return _OVERRIDE, env[_OVERRIDE]
    return None


def _major(processor: str) -> str:
    digits = processor[3:]
    return digits[:-2] if len(digits) >= 3 else digits


def _apply_override(dev: Device, env: Mapping[str, str], warnings: list[str]) -> Device:
    got = _override_for(dev.node, env)
    if got is None:
        return dev
    var, value = got
    where = f"node {dev.node}" if dev.node is not None else dev.processor
    effective = _parse_override(value)
    if not value.strip():
        warnings.append(
            f"{var} is set but empty: the ROCm runtime then fails to start ({where}); "
            f"unset it. Building for the physical GPU {dev.processor}"
        )
        return dev
    if effective is None:
        warnings.append(
            f"{var}={value!r} is not major.minor.stepping (e.g. 10.3.0): the ROCm runtime "
            f"rejects it ({where}); building for the physical GPU {dev.processor}"
        )
        return dev
    if effective == dev.processor:
        return dev
    if _major(effective) != _major(dev.processor):
        warnings.append(
            f"{var}={value} turns {dev.processor} ({where}) into {effective}, another GPU "
            f"generation: that can hang or crash the GPU driver"
        )
    else:
        warnings.append(f"{var}={value}: the runtime loads {effective} code on {dev.processor} ({where})")
    return replace(dev, target=GpuTarget(effective), physical=dev.target)


def _stray_overrides(env: Mapping[str, str], gpu_nodes: Sequence[int]) -> list[str]:
    out = []
    for key in sorted(env):
        m = re.fullmatch(rf"{_OVERRIDE}_(\d+)", key)
        if m and int(m.group(1)) not in gpu_nodes:
            nodes = ", ".join(str(n) for n in gpu_nodes) or "none"
            out.append(f"{key} names no GPU: the number is a KFD node (GPU nodes here: {nodes})")
    return out


# --------------------------------------------------------------------------- probe: KFD sysfs


def _read_properties(path: Path) -> dict[str, int]:
    props: dict[str, int] = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) == 2:
                try:
                    props[parts[0]] = int(parts[1])
                except ValueError:
                    pass
    return props


def _kfd_nodes_dir(root: Path) -> Path | None:
    for rel in _KFD_DIRS:
        path = root / rel
        if path.is_dir():
            return path
    return None


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
    for node in sorted(int(n) for n in names if n.isdigit()):
        try:
            props = _read_properties(nodes_dir / str(node) / "properties")
        except OSError as exc:
            skipped += 1
            warnings.append(f"KFD node {node}: cannot read properties ({exc.strerror or exc}); skipped")
            continue
        version = props.get("gfx_target_version")
        if version is None:
            skipped += 1
            warnings.append(f"KFD node {node}: no readable gfx_target_version; skipped")
            continue
        if version == 0 or props.get("simd_count", 1) == 0:
            cpus += 1
            continue
        processor = kfd_to_processor(version)
        if processor is None:
            skipped += 1
            warnings.append(f"KFD node {node}: gfx_target_version {version} does not decode; skipped")
            continue
        simd, per_cu = props.get("simd_count", 0), props.get("simd_per_cu", 0)
        cus = simd // per_cu if per_cu > 0 else None
        unique = props.get("unique_id", 0)
        device_id = props.get("device_id", 0)
        kind, evidence = _kind(
            processor,
            cus=cus,
            extra=("CPU cores on its KFD node" if props.get("cpu_cores_count", 0) > 0 else ""),
        )
        devices.append(
            Device(
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
        )
    warnings += _stray_overrides(env, [d.node for d in devices if d.node is not None])
    devices = [_apply_override(d, env, warnings) for d in devices]
    warnings += _unknown_warning("KFD", devices)
    parts = [f"{_plural(len(devices), 'GPU node')}" + (f" ({_counted(devices)})" if devices else "")]
    parts.append(_plural(cpus, "CPU node"))
    if skipped:
        parts.append(f"{skipped} skipped")
    summary = ", ".join(parts) if devices else "no GPU nodes (" + ", ".join(parts[1:]) + ")"
    return ProbeResult("kfd", devices, summary, None, warnings)


def _kind(processor: str, *, cus: int | None = None, apu_memory: bool = False,
          cpu_name: bool = False, extra: str = "") -> tuple[str, str]:
    """("dgpu" | "apu", evidence) from every signal a probe has."""
    signals = []
    if apu_memory:
        signals.append("Memory Properties: APU")
    if _table_kind(processor) == "apu":
        signals.append(f"{processor} is an APU")
    if cus is not None and 0 < cus <= _TINY_CUS:
        signals.append(_plural(cus, "compute unit"))
    if cpu_name:
        signals.append("marketing name is the CPU's")
    if extra:
        signals.append(extra)
    return ("apu", "; ".join(signals)) if signals else ("dgpu", "")


# --------------------------------------------------------------------------- probe: rocminfo

_ROCMINFO_ERRORS = (
    # (pattern, code); first match wins, so the most specific come first
    (re.compile(r"/dev/kfd.*Permission denied|not member of \"?(render|video)\"? group", re.I),
     "kfd_permission_denied"),
    (re.compile(r"ROCk module is NOT loaded", re.I), "driver_not_loaded"),
    (re.compile(r"HSA_STATUS_ERROR_OUT_OF_RESOURCES", re.I), "out_of_resources"),
    (re.compile(r"hsa api call failure|HSA_STATUS_ERROR|Segmentation fault|core dumped", re.I),
     "tool_failed"),
)


def _clean_lines(text: str) -> list[str]:
    return [_ANSI.sub("", line).rstrip() for line in text.replace("\r\n", "\n").split("\n")]


def _first_line(text: str, pattern: re.Pattern | None = None) -> str:
    for line in _clean_lines(text):
        line = line.strip()
        if line and (pattern is None or pattern.search(line)):
            return line[:120]
    return ""


def _error_code(text: str) -> str | None:
    for pattern, code in _ROCMINFO_ERRORS:
        if pattern.search(text):
            if code == "driver_not_loaded" and re.search(r"/dev/kfd.*No such file", text):
                return "driver_not_loaded_no_kfd"
            return code
    return None


def _error_line(text: str, code: str | None) -> str:
    for pattern, c in _ROCMINFO_ERRORS:
        if c == code or (code == "driver_not_loaded_no_kfd" and c == "driver_not_loaded"):
            return _first_line(text, pattern)
    return _first_line(text)


def _split_agents(lines: list[str]) -> list[dict]:
    """Agents as dicts of their top-level fields plus ``isa`` (a list of ISA names).

    Handles full output (``Agent N`` headers) and grep excerpts without headers: there a new
    agent starts at each non-ISA ``Name:`` line, and a non-generic ISA line that finds the
    current agent already holding one (``rocminfo | grep amdgcn``) starts a GPU of its own.
    """
    header = re.compile(r"\s*Agent\s+\d+\s*")
    has_headers = any(header.fullmatch(ln) for ln in lines)
    agents: list[dict] = []
    cur: dict | None = None
    for line in lines:
        if header.fullmatch(line):
            cur = {"isa": []}
            agents.append(cur)
            continue
        m = re.match(r"\s*([A-Za-z][A-Za-z .()/-]*?)\s*:\s*(.*)$", line)
        if not m:
            continue
        key, value = m.group(1).strip(), m.group(2).strip()
        isa = value[len(_ISA_PREFIX):] if value.lower().startswith(_ISA_PREFIX) else None
        if not has_headers and key == "Name":
            real = isa is not None and not _GENERIC.match(isa.lower())
            if cur is None or (isa is None and "Name" in cur) or (
                real and "Name" not in cur and any(not _GENERIC.match(i.lower()) for i in cur["isa"])
            ):
                cur = {"isa": []}
                agents.append(cur)
        if cur is None:
            continue
        if key == "Name" and isa is not None:
            cur["isa"].append(isa)
        else:
            cur.setdefault(key, value)
    return agents


def _int_field(value: str | None) -> int | None:
    m = re.match(r"\s*(\d+)", value or "")
    return int(m.group(1)) if m else None


def parse_rocminfo(text: str) -> ProbeResult:
    """Parse ``rocminfo`` output: every GPU agent, with its first non-generic ISA's target ID."""
    lines = _clean_lines(text)
    agents = _split_agents(lines)
    cpu_names = {a.get("Marketing Name") or a.get("Name") for a in agents if a.get("Device Type") == "CPU"}
    cpu_names.discard(None)
    cpu_names.discard("")
    devices: list[Device] = []
    warnings: list[str] = []
    n_cpu = n_other = 0
    for agent in agents:
        dtype = agent.get("Device Type", "").upper()
        name_field = agent.get("Name", "")
        if dtype == "CPU":
            n_cpu += 1
            continue
        if dtype and dtype != "GPU":
            n_other += 1  # DSP/NPU agents (aie2) and anything else that is not a GPU
            continue
        if not dtype and not name_field.lower().startswith("gfx") and not agent["isa"]:
            continue  # an excerpt line that names a CPU
        isas = [i for i in agent["isa"] if not _GENERIC.match(i.lower())]
        target = None
        for candidate in [*isas, name_field]:
            target = _target(candidate)
            if target is not None:
                break
        if target is None:
            if re.fullmatch(r"gfx0+", (isas[0] if isas else name_field).split(":")[0].lower()):
                warnings.append("rocminfo lists a GPU as gfx000: an empty HSA_OVERRIDE_GFX_VERSION does that")
            elif name_field or isas:
                warnings.append(f"rocminfo: GPU agent with unknown name {name_field or isas[0]!r}; skipped")
            continue
        marketing = agent.get("Marketing Name", "")
        cus = _int_field(agent.get("Compute Unit"))
        kind, evidence = _kind(
            target.processor,
            cus=cus,
            apu_memory="APU" in agent.get("Memory Properties", "").upper().split(),
            cpu_name=bool(marketing) and marketing in cpu_names,
        )
        chip = re.search(r"\(0x([0-9a-f]+)\)", agent.get("Chip ID", ""), re.I)
        uuid = agent.get("Uuid", "")
        dev = Device(
            target=target,
            physical=None,
            name=marketing,
            kind=kind,
            included=True,
            reason="",
            source="rocminfo",
            node=_int_field(agent.get("Node")),
            uuid=uuid if uuid.upper().startswith("GPU-") and uuid.upper() != "GPU-XX" else "",
            device_id=f"0x{int(chip.group(1), 16):04x}" if chip else "",
            compute_units=cus,
            evidence=evidence,
        )
        by_name = _product_processor(marketing)
        if by_name and by_name != target.processor:
            warnings.append(
                f"rocminfo reports {target.processor} for '{marketing}', a {by_name} product: "
                f"HSA_OVERRIDE_GFX_VERSION was in effect; building for {target.processor}, "
                f"what the runtime loads"
            )
            dev = replace(dev, physical=GpuTarget(by_name))
        devices.append(dev)
    error = None if devices else _error_code(text)
    if devices:
        summary = f"{_plural(len(devices), 'GPU agent')} ({_counted(devices)})"
        if n_cpu:
            summary += f", {_plural(n_cpu, 'CPU agent')}"
        if n_other:
            summary += f", {n_other} other"
    elif error:
        summary = repr(_error_line(text, error))
    elif agents:
        summary = f"no GPU agents ({_plural(n_cpu, 'CPU agent')})"
    elif text.strip():
        error = "tool_failed"
        summary = f"no agents in the output: {_first_line(text)!r}"
    else:
        summary = "empty output"
    warnings += _unknown_warning("rocminfo", devices)
    return ProbeResult("rocminfo", devices, summary, error, warnings)


# --------------------------------------------------------------------------- probes: line tools


def _line_devices(text: str, probe: str) -> tuple[list[Device], list[str], int]:
    """One device per line whose first word is a target ID; later words may carry
    features (``gfx906 sramecc- xnack-``) or a PCI ID (``1002:66AF``)."""
    devices: list[Device] = []
    placeholders = 0
    for line in _clean_lines(text):
        words = line.split()
        if not words:
            continue
        first = re.sub(r"-strict$", "", words[0].lower())
        if re.fullmatch(r"gfx0+", first):
            placeholders += 1
            continue
        if _GENERIC.fullmatch(first.split(":")[0]):
            continue
        feats = "".join(f":{w.lower()}" for w in words[1:] if _FEATURE.fullmatch(w.lower()))
        target = _target(first + feats)
        if target is None:
            continue
        pci = next((w for w in words[1:] if re.fullmatch(r"1002:[0-9a-fA-F]{4}", w)), "")
        kind, evidence = _kind(target.processor)
        devices.append(
            Device(
                target=target,
                physical=None,
                name="",
                kind=kind,
                included=True,
                reason="",
                source=probe,
                node=len(devices),
                device_id=f"0x{pci[5:].lower()}" if pci else "",
                evidence=evidence,
            )
        )
    return devices, _unknown_warning(probe, devices), placeholders


def _line_result(text: str, probe: str) -> ProbeResult:
    devices, warnings, placeholders = _line_devices(text, probe)
    if devices:
        summary = _counted(devices)
        if placeholders:
            summary += f" (and {placeholders} gfx000 placeholder line{'s' if placeholders > 1 else ''}, ignored)"
        return ProbeResult(probe, devices, summary, None, warnings)
    if placeholders:
        return ProbeResult(probe, [], "only the gfx000 placeholder: no GPU", None, warnings)
    if text.strip():
        error = _error_code(text) or "tool_failed"
        return ProbeResult(probe, [], repr(_first_line(text)), error, warnings)
    return ProbeResult(probe, [], "no GPU listed", None, warnings)


def parse_enumerator(text: str) -> ProbeResult:
    """Parse ``rocm_agent_enumerator`` (with or without the old leading ``gfx000``, or ``-name``)."""
    return _line_result(text, "rocm_agent_enumerator")


def parse_amdgpu_arch(text: str) -> ProbeResult:
    """Parse ``amdgpu-arch`` / ``offload-arch`` output (also the old ``offload-arch -v`` lines)."""
    return _line_result(text, "amdgpu-arch")


def _smi_gfx(value: str) -> str | None:
    """rocm-smi's ``GFX Version``: ``gfx942`` as is, and its decimal ``gfx9010`` read as gfx90a."""
    value = value.strip().lower()
    if value in table():
        return value
    m = re.fullmatch(r"gfx(\d+)(\d)(\d\d)", value)
    if m:
        processor = kfd_to_processor(int(m.group(1)) * 10000 + int(m.group(2)) * 100 + int(m.group(3)))
        if processor in table():
            return processor
    return None


def parse_rocm_smi(text: str) -> ProbeResult:
    """Parse ``rocm-smi --showproductname`` as ``--json`` or ``--csv``.

    The JSON ``GFX Version`` is trusted (decoded properly); a card name alone (CSV from older
    rocm-smi) is matched against the table's product names and reported as low confidence.
    """
    import csv
    import io
    import json

    cards: list[dict[str, str]] = []
    try:
        data = json.loads(text)
        if isinstance(data, dict):
            cards = [v for k, v in data.items() if k.startswith("card") and isinstance(v, dict)]
    except ValueError:
        try:
            rows = list(csv.DictReader(io.StringIO(text.strip(), newline="")))
        except csv.Error:
            rows = []
        cards = [r for r in rows if isinstance(r.get("device"), str) and r["device"].startswith("card")]
    devices: list[Device] = []
    warnings: list[str] = []
    for index, card in enumerate(cards):
        fields = {k.lower(): v for k, v in card.items() if isinstance(k, str) and isinstance(v, str)}
        processor = _smi_gfx(fields.get("gfx version", ""))
        series = fields.get("card series", "")
        if processor is None:
            processor = _product_processor(series)
            if processor is None:
                warnings.append(f"rocm-smi: card{index} '{series}' matches no known product; skipped")
                continue
            warnings.append(f"rocm-smi: card{index} '{series}' read as {processor} by its name (low confidence)")
        kind, evidence = _kind(processor)
        model = fields.get("card model", "")
        devices.append(
            Device(
                target=GpuTarget(processor),
                physical=None,
                name=series,
                kind=kind,
                included=True,
                reason="",
                source="rocm-smi",
                node=index,
                device_id=model.lower() if fields.get("gfx version") and model.startswith("0x") else "",
                evidence=evidence,
            )
        )
    if devices:
        return ProbeResult("rocm-smi", devices, _counted(devices), None, warnings)
    if text.strip() and not cards:
        return ProbeResult("rocm-smi", [], repr(_first_line(text)), "tool_failed", warnings)
    return ProbeResult("rocm-smi", [], "no GPU listed", None, warnings)


_PARSERS: dict[str, Callable[[str], ProbeResult]] = {
    "rocminfo": parse_rocminfo,
    "rocm_agent_enumerator": parse_enumerator,
    "amdgpu-arch": parse_amdgpu_arch,
    "rocm-smi": parse_rocm_smi,
}


# --------------------------------------------------------------------------- running programs


def _search_path(env: Mapping[str, str], root: Path) -> str:
    dirs = [d for d in env.get("PATH", "").split(os.pathsep) if d]
    rocm = env.get("ROCM_PATH") or env.get("HIP_PATH")
    if rocm:
        dirs += [os.path.join(rocm, "bin"), os.path.join(rocm, "llvm", "bin")]
    dirs += [str(root / "opt" / "rocm" / "bin"), str(root / "opt" / "rocm" / "llvm" / "bin")]
    return os.pathsep.join(dirs)


def _run_probe(probe: str, *, run, env: Mapping[str, str], root: Path, timeout: float) -> ProbeResult:
    import shutil
    import subprocess

    path = _search_path(env, root)
    exe = next((found for name in _PROGRAMS[probe] if (found := shutil.which(name, path=path))), None)
    if exe is None:
        return ProbeResult(probe, [], "not installed (not on PATH)", "not_found")
    if timeout <= 0:
        return ProbeResult(probe, [], "not run: the detection time limit was spent", "timeout")
    runner = subprocess.run if run is None else run
    try:
        proc = runner([exe], capture_output=True, stdin=subprocess.DEVNULL, env=dict(env),
                      timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return ProbeResult(probe, [], f"no answer within {timeout:.3g} s; stopped", "timeout")
    except OSError as exc:
        return ProbeResult(probe, [], f"cannot run: {exc.strerror or exc}", "tool_failed")
    out = _decode(proc.stdout)
    err = _decode(proc.stderr)
    result = _PARSERS[probe](out + ("\n" + err if err else ""))
    rc = proc.returncode
    if rc == 0:
        return result
    how = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
    if result.devices:
        return replace(result, warnings=[*result.warnings, f"{probe} ended with {how}; its list may be incomplete"])
    if result.error not in (None, "tool_failed"):
        said = result.summary  # a known failure, already quoted
    else:
        text = out + "\n" + err
        if "Traceback (most recent call last)" in text:  # a crashed Python tool: its last line says why
            lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
            said = repr(lines[-1]) if lines else ""
        else:
            said = repr(_first_line(text)) if text.strip() else ""
    return replace(result, summary=f"{how}: {said}" if said else how, error=result.error or "tool_failed")


def _decode(data) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return str(data)


# --------------------------------------------------------------------------- selection


def _hide(devices: list[Device], var: str, value: str, warnings: list[str]) -> list[Device]:
    """The same devices, those ``var`` hides marked left out. Entries are indices into the
    GPUs still visible (so HIP_VISIBLE_DEVICES counts within ROCR_VISIBLE_DEVICES) or UUIDs;
    as in the runtime, the list ends at the first entry that matches no GPU."""
    visible = [d for d in devices if d.included]
    keep: list[Device] = []
    for entry in (v.strip() for v in value.split(",")):
        if entry.isdigit() and int(entry) < len(visible):
            pick = visible[int(entry)]
        else:
            pick = next((d for d in visible if d.uuid and d.uuid.lower() == entry.lower()), None)
        if pick is None:
            warnings.append(f"{var}={value}: entry {entry!r} matches no GPU; it and later entries hide their GPUs")
            break
        if pick not in keep:
            keep.append(pick)
    shown = {id(d) for d in keep}
    return [
        d if (not d.included or id(d) in shown) else replace(d, included=False, reason=f"hidden by {var}={value}")
        for d in devices
    ]


def _select(devices: list[Device], source: str, env: Mapping[str, str], warnings: list[str]) -> list[Device]:
    # rocminfo runs inside the runtime, which has already applied ROCR_VISIBLE_DEVICES.
    variables = ["HIP_VISIBLE_DEVICES"] if source == "rocminfo" else ["ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"]
    for var in variables:
        value = env.get(var)
        if value is None:
            continue
        if not value.strip():
            warnings.append(f"{var} is set but empty; ignored")
            continue
        devices = _hide(devices, var, value, warnings)
    has_dgpu = any(d.included and d.kind == "dgpu" for d in devices)
    out = []

    def why(d: Device) -> str:  # the strongest signal; all of them are in ``evidence``
        return d.evidence.split("; ")[0]

    for d in devices:
        if not d.included:
            out.append(d)
        elif d.kind == "dgpu":
            out.append(replace(d, reason="discrete GPU"))
        elif has_dgpu:
            out.append(replace(d, included=False, reason=f"integrated GPU ({why(d)}); a discrete GPU is present"))
        else:
            out.append(replace(d, reason=f"integrated GPU ({why(d)}), the only kind present"))
    return out


# --------------------------------------------------------------------------- detect


def detect(
    *,
    root: Path | str | None = None,
    run: Callable | None = None,
    env: Mapping[str, str] | None = None,
    recorded: Mapping[str, str] | None = None,
    keep_features: bool = False,
    timeout: float = 10.0,
) -> Detection:
    """Probe this machine (or a recorded one) and decide the build targets.

    ``root`` stands for ``/`` in every sysfs read (default ``/``). ``run`` is a
    ``subprocess.run``-compatible callable. ``env`` defaults to ``os.environ``; it is what
    overrides and visibility variables are read from and what programs run with.
    ``recorded`` maps ``rocminfo``, ``rocm_agent_enumerator``, ``amdgpu-arch`` or ``rocm-smi`` to
    captured output; with it no program runs, and KFD is read only when ``root`` is given.
    ``timeout`` bounds all program runs together, in seconds.
    """
    env = os.environ if env is None else env
    live = recorded is None
    root_path = Path("/") if root is None else Path(root)
    warnings: list[str] = []
    seen: dict[str, str] = {}
    results: dict[str, ProbeResult] = {}
    decided: ProbeResult | None = None

    if live or root is not None:
        results["kfd"] = read_kfd(root_path, env)
        if results["kfd"].devices:
            decided = results["kfd"]

    if live:
        deadline = time.monotonic() + timeout
        for probe in _PROGRAMS:
            if decided is not None:
                break
            results[probe] = _run_probe(probe, run=run, env=env, root=root_path,
                                        timeout=deadline - time.monotonic())
            if results[probe].devices:
                decided = results[probe]
    else:
        unknown = sorted(set(recorded) - set(_PARSERS))
        if unknown:
            warnings.append("recorded output for unknown probe(s) ignored: " + ", ".join(unknown))
        for probe in PROBES[1:]:
            if probe in recorded:
                results[probe] = _PARSERS[probe](recorded[probe])
                if decided is None and results[probe].devices:
                    decided = results[probe]

    for probe, result in results.items():
        seen[probe] = result.summary
        if decided is None or probe == decided.probe:
            warnings.extend(result.warnings)

    if decided is None:
        causes = _causes(results, root_path, env)
        return Detection([], [], None, warnings, seen, causes)

    devices = decided.devices
    if decided.probe == "amdgpu-arch":  # reads KFD itself, without the runtime's override
        devices = [_apply_override(d, {k: v for k, v in env.items() if k == _OVERRIDE}, warnings) for d in devices]
        per_node = sorted(k for k in env if k.startswith(_OVERRIDE + "_"))
        if per_node:
            warnings.append(f"{', '.join(per_node)} not applied: amdgpu-arch's lines carry no KFD node numbers")
    elif decided.probe == "rocminfo" and env.get(_OVERRIDE, "").strip():
        if not any(d.physical for d in devices):
            warnings.append(f"{_OVERRIDE}={env[_OVERRIDE]} is set: rocminfo shows the overridden target; "
                            "the physical GPU is not known from its output")
    for probe, result in results.items():
        if probe != decided.probe and result.devices:
            mine = sorted(d.processor for d in devices)
            theirs = sorted(d.processor for d in result.devices)
            if mine != theirs:
                warnings.append(f"{probe} saw {', '.join(theirs)}; {decided.probe} decided: {', '.join(mine)}")
    devices = _select(devices, decided.probe, env, warnings)
    targets = sort_targets(d.target if keep_features else d.target.bare for d in devices if d.included)
    causes = [] if targets else ["hidden"]
    return Detection(targets, devices, decided.probe, warnings, seen, causes)


_RANK = ("kfd_permission_denied", "driver_not_loaded_no_kfd", "driver_not_loaded", "out_of_resources",
         "timeout", "tool_failed", "no_topology")


def _causes(results: Mapping[str, ProbeResult], root: Path, env: Mapping[str, str]) -> list[str]:
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
        text = (root / "proc" / "version").read_text(encoding="utf-8", errors="replace")
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
    for entry in entries:
        try:
            vendor = (base / entry / "vendor").read_text().strip().lower()
            klass = (base / entry / "class").read_text().strip().lower()
        except OSError:
            continue
        if vendor == "0x1002" and klass.startswith("0x03"):
            return True
    return False


_HINTS = {
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
    "hidden": "ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES hide every GPU found",
}


def require_targets(detection: Detection) -> list[GpuTarget]:
    """The detected build targets, or NoGpuDetectedError saying what each probe saw."""
    if detection.targets:
        return list(detection.targets)
    seen = "; ".join(f"{_label(p)}: {s}" for p, s in detection.seen.items()) or "no probe ran"
    if detection.devices and "hidden" in detection.causes:
        seen = "; ".join(f"{d.target} {d.reason}" for d in detection.devices)
    specific = []
    for cause in detection.causes:
        hint = _HINTS.get(cause)
        if hint and hint not in specific:
            specific.append(hint)
        if cause in ("wsl", "amd_gpu_without_driver"):
            break  # the general hints below would only repeat it
    hint = "; ".join(specific[:2])
    hint = f"{hint}; or {_EXAMPLE}" if hint else _EXAMPLE
    raise NoGpuDetectedError(f"no AMD GPU found ({seen})", hint=hint)
