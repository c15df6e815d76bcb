"""Parse ``rocminfo`` output: every GPU agent, with its first non-generic ISA's target ID.

Full output and grep excerpts both parse; CPU and other (NPU) agents are counted, not built
for. Must not run the program: ``programs.py`` does, the recorded-output path hands in text.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from rocm_build_backend.gpu.amd.devices import GENERIC, kind_of, product_processor, target_id, unknown_warning
from rocm_build_backend.gpu.amd.output import clean_lines, error_code, error_line, first_line
from rocm_build_backend.gpu.device import MAX_DEVICES, Device, ProbeResult, counted, plural
from rocm_build_backend.gpu.targets import GpuTarget


_ISA_PREFIX = "amdgcn-amd-amdhsa--"


def _split_agents(lines: list[str]) -> list[dict[str, Any]]:
    """Agents as dicts of their top-level fields plus ``isa`` (a list of ISA names).

    Handles full output (``Agent N`` headers) and grep excerpts without headers: there a new
    agent starts at each non-ISA ``Name:`` line, and a non-generic ISA line that finds the
    current agent already holding one (``rocminfo | grep amdgcn``) starts a GPU of its own.
    """
    header = re.compile(r"\s*Agent\s+[0-9]+\s*")
    has_headers = any(header.fullmatch(ln) for ln in lines)
    agents: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    for line in lines:
        if header.fullmatch(line):
            cur = {"isa": []}
            agents.append(cur)
            if len(agents) > MAX_DEVICES:
                break
            continue
        m = re.match(r"\s*([A-Za-z][A-Za-z .()/-]{0,60}?)\s*:\s*(.*)$", line)
        if not m:
            continue
        key, value = m.group(1).strip(), m.group(2).strip()
        isa = value[len(_ISA_PREFIX) :] if value.lower().startswith(_ISA_PREFIX) else None
        if not has_headers and key == "Name":
            real = isa is not None and not GENERIC.match(isa.lower())
            if (
                cur is None
                or (isa is None and "Name" in cur)
                or (real and "Name" not in cur and any(not GENERIC.match(i.lower()) for i in cur["isa"]))
            ):
                cur = {"isa": []}
                agents.append(cur)
                if len(agents) > MAX_DEVICES:
                    break
        if cur is None:
            continue
        if key == "Name" and isa is not None:
            cur["isa"].append(isa)
        else:
            cur.setdefault(key, value)
    return agents


def _int_field(value: str | None) -> int | None:
    m = re.match(r"\s*([0-9]+)", value or "")
    return int(m.group(1)) if m else None


def _agent_target(agent: dict[str, Any], warnings: list[str]) -> GpuTarget | None:
    """The target of a GPU agent: its first non-generic ISA, else its ``Name`` field."""
    name_field = agent.get("Name", "")
    isas = [i for i in agent["isa"] if not GENERIC.match(i.lower())]
    for candidate in [*isas, name_field]:
        target = target_id(candidate)
        if target is not None:
            return target
    if re.fullmatch(r"gfx0+", (isas[0] if isas else name_field).split(":")[0].lower()):
        warnings.append("rocminfo lists a GPU as gfx000: an empty HSA_OVERRIDE_GFX_VERSION does that")
    elif name_field or isas:
        warnings.append(f"rocminfo: GPU agent with unknown name {name_field or isas[0]!r}; skipped")
    return None


def _agent_device(agent: dict[str, Any], target: GpuTarget, cpu_names: set[str], warnings: list[str]) -> Device:
    marketing = agent.get("Marketing Name", "")
    cus = _int_field(agent.get("Compute Unit"))
    kind, evidence = kind_of(
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
    by_name = product_processor(marketing)
    if by_name and by_name != target.processor:
        warnings.append(
            f"rocminfo reports {target.processor} for '{marketing}', a {by_name} product: "
            f"HSA_OVERRIDE_GFX_VERSION was in effect; building for {target.processor}, "
            f"what the runtime loads"
        )
        dev = replace(dev, physical=GpuTarget(by_name))
    return dev


def _summary(text: str, devices: list[Device], agents: int, n_cpu: int, n_other: int) -> tuple[str, str | None]:
    """(summary, error code) of one rocminfo output."""
    error = None if devices else error_code(text)
    if devices:
        summary = f"{plural(len(devices), 'GPU agent')} ({counted(devices)})"
        if n_cpu:
            summary += f", {plural(n_cpu, 'CPU agent')}"
        if n_other:
            summary += f", {n_other} other"
    elif error:
        summary = repr(error_line(text, error))
    elif agents:
        summary = f"no GPU agents ({plural(n_cpu, 'CPU agent')})"
    elif text.strip():
        error = "tool_failed"
        summary = f"no agents in the output: {first_line(text)!r}"
    else:
        summary = "empty output"
    return summary, error


def parse_rocminfo(text: str) -> ProbeResult:
    """Parse ``rocminfo`` output: every GPU agent, with its first non-generic ISA's target ID."""
    agents = _split_agents(clean_lines(text))
    if len(agents) > MAX_DEVICES:
        return ProbeResult(
            "rocminfo",
            [],
            f"lists more than {MAX_DEVICES} agents, more than any machine has; output ignored",
            "tool_failed",
        )
    cpu_names = {a.get("Marketing Name") or a.get("Name") or "" for a in agents if a.get("Device Type") == "CPU"}
    cpu_names.discard("")
    devices: list[Device] = []
    warnings: list[str] = []
    n_cpu = n_other = 0
    for agent in agents:
        dtype = agent.get("Device Type", "").upper()
        if dtype == "CPU":
            n_cpu += 1
            continue
        if dtype and dtype != "GPU":
            n_other += 1  # DSP/NPU agents (aie2) and anything else that is not a GPU
            continue
        if not dtype and not agent.get("Name", "").lower().startswith("gfx") and not agent["isa"]:
            continue  # an excerpt line that names a CPU
        target = _agent_target(agent, warnings)
        if target is not None:
            devices.append(_agent_device(agent, target, cpu_names, warnings))
    summary, error = _summary(text, devices, len(agents), n_cpu, n_other)
    warnings += unknown_warning("rocminfo", devices)
    return ProbeResult("rocminfo", devices, summary, error, warnings)
