"""AMD's pinned detection tools: ``rocminfo`` and friends that report exactly the chosen targets.

Some builds pick their GPU targets themselves, whatever the environment says: DeepSpeed and the
ROCm fork of apex take the first ``gfx`` name that ``rocminfo`` prints, CMake initialises
``CMAKE_HIP_ARCHITECTURES`` from ``rocm_agent_enumerator -t GPU``, PyTorch's CMake runs
``rocm_agent_enumerator | grep -v gfx000``, and ``hip-config`` / ``clang --offload-arch=native``
run ``amdgpu-arch``. On a machine with an iGPU they pick it up; on a machine without a GPU they
fail or fall back to a default. ``render_tools`` gives small POSIX ``sh`` scripts with those
names; ``builder/pinned.py`` writes them into a directory that the build puts first on ``PATH``
(and on CMake's ``CMAKE_PROGRAM_PATH``), so those probes see the chosen targets and nothing else.

Output formats follow the real tools:

- ``rocminfo``: the ``HSA Agents`` report, a CPU agent first, then one GPU agent per target with
  ``Name: gfxNNN``, ``Marketing Name``, ``Device Type: GPU``, ``Wavefront Size`` and the ISA
  ``amdgcn-amd-amdhsa--<target ID>``; unpadded values, so ``grep -o 'gfx.*'`` yields the bare name.
- ``rocm_agent_enumerator``: one processor per line; ``-name`` prints full target IDs. No leading
  ``gfx000`` (ROCm 6/7 dropped it; consumers filter it rather than skip the first line).
- ``amdgpu-arch`` / ``offload-arch``: one processor per line (``offload-arch`` also prints NVIDIA
  targets unless ``--only=amdgpu``).

With no AMD target in the list the tools answer like a machine without an AMD GPU. Pure: text
in, text out; nothing is written here.
"""

from __future__ import annotations

import re
from typing import Sequence

from rocm_build_backend.gpu.targets import GpuTarget, vendor_name

TOOL_NAMES = ("rocminfo", "rocm_agent_enumerator", "amdgpu-arch", "offload-arch")
_SAFE = re.compile(r"[A-Za-z0-9_:+\-]+")
_VERSION = "rocm-build-backend pinned"


def _wavefront_size(processor: str) -> int:
    """64 for GCN/CDNA (gfx9 and older), 32 for RDNA (gfx10 and newer), as rocminfo reports."""
    m = re.match(r"gfx(\d+)-", processor) or re.match(r"gfx(\d+)[0-9a-f]{2}$", processor)
    major = int(m.group(1)) if m else 9
    return 64 if major < 10 else 32


def _field(key: str, value: str, indent: int = 2) -> str:
    return f"{' ' * indent}{key + ':':<25}{value}".rstrip()


def _rocminfo_text(amd: Sequence[GpuTarget]) -> str:
    lines = [
        "ROCk module is loaded",
        "=====================",
        "HSA System Attributes",
        "=====================",
        "Runtime Version:         1.1",
        "Machine Model:           LARGE",
        "System Endianness:       LITTLE",
        "",
        "==========",
        "HSA Agents",
        "==========",
        "*******",
        "Agent 1",
        "*******",
        _field("Name", "CPU"),
        _field("Uuid", "CPU-XX"),
        _field("Marketing Name", "CPU"),
        _field("Vendor Name", "CPU"),
        _field("Feature", "None specified"),
        _field("Profile", "FULL_PROFILE"),
        _field("Node", "0"),
        _field("Device Type", "CPU"),
        _field("Features", "None"),
        _field("ISA Info", ""),
    ]
    for node, t in enumerate(amd, start=1):
        wave = _wavefront_size(t.processor)
        lines += [
            "*******",
            f"Agent {node + 1}",
            "*******",
            _field("Name", t.processor),
            _field("Uuid", "GPU-XX"),
            _field("Marketing Name", "AMD GPU (target pinned for this build)"),
            _field("Vendor Name", "AMD"),
            _field("Feature", "KERNEL_DISPATCH"),
            _field("Profile", "BASE_PROFILE"),
            _field("Node", str(node)),
            _field("Device Type", "GPU"),
            _field("Wavefront Size", f"{wave}(0x{wave:x})"),
            _field("Features", "KERNEL_DISPATCH"),
            _field("ISA Info", ""),
            "    ISA 1",
            _field("Name", f"amdgcn-amd-amdhsa--{t}", indent=6),
            _field("Machine Models", "HSA_MACHINE_MODEL_LARGE", indent=6),
            _field("Profiles", "HSA_PROFILE_BASE", indent=6),
        ]
    lines.append("*** Done ***")
    return "\n".join(lines) + "\n"


def _heredoc(text: str) -> str:
    """``cat`` of a quoted here-document (no expansion), or nothing for empty text."""
    if not text:
        return ":"
    assert "\nEOF\n" not in "\n" + text
    return "cat <<'EOF'\n" + text + "EOF"


def _lines(items: Sequence[str]) -> str:
    return "".join(f"{item}\n" for item in items)


def _header(tool: str, targets: Sequence[GpuTarget]) -> str:
    chosen = " ".join(str(t) for t in targets) or "(none)"
    return (
        "#!/bin/sh\n"
        f"# {tool} written by rocm-build-backend for one build: it reports exactly the GPU\n"
        f"# targets chosen for that build ({chosen}), whatever GPUs this machine has.\n"
    )


def _rocminfo_script(targets: Sequence[GpuTarget], amd: Sequence[GpuTarget]) -> str:
    if not amd:
        body = 'echo "ROCk module is NOT loaded, possibly no GPU devices"\nexit 1\n'
    else:
        body = f"{_heredoc(_rocminfo_text(amd))}\n"
    return _header("rocminfo", targets) + body


def _enumerator_script(targets: Sequence[GpuTarget], amd: Sequence[GpuTarget]) -> str:
    processors = _lines([t.processor for t in amd])
    names = _lines([str(t) for t in amd])
    return _header("rocm_agent_enumerator", targets) + (
        "# -t GPU (CMake, hipcc) and no argument: processors; -name: full target IDs;\n"
        "# -t CPU: no GPU names. Other arguments are ignored, as the real script does.\n"
        'if [ "$1" = "-name" ]; then\n'
        f"{_heredoc(names)}\n"
        "  exit 0\n"
        "fi\n"
        'if [ "$1" = "-t" ] && [ "$2" = "CPU" ]; then\n'
        "  exit 0\n"
        "fi\n"
        f"{_heredoc(processors)}\n"
    )


def _arch_script(tool: str, targets: Sequence[GpuTarget], amd: Sequence[GpuTarget], default_only: str) -> str:
    amd_lines = _lines([t.processor for t in amd])
    nv_lines = _lines([t.processor for t in targets if vendor_name(t) == "nvidia"])
    usage = (
        f"OVERVIEW: {tool} ({_VERSION}): prints the GPU architectures chosen for this build,\n"
        "one per line.\n\n"
        f"USAGE: {tool} [options]\n\n"
        "OPTIONS:\n"
        "  --only=<all|amdgpu|nvptx|intel> - Restrict to vendor\n"
        "  --verbose                       - Enable verbose output\n"
        "  --help                          - Display available options\n"
        "  --version                       - Display the version of this program\n"
    )
    # LLVM's tool returns 1 when no vendor printed anything; it prints nothing on stdout then.
    return _header(tool, targets) + (
        f"only={default_only}\n"
        "while [ $# -gt 0 ]; do\n"
        '  case "$1" in\n'
        "    -h|-help|--help|--help-hidden|--help-list)\n"
        f"{_heredoc(usage)}\n"
        "      exit 0 ;;\n"
        f'    -version|--version) echo "{tool} ({_VERSION})"; exit 0 ;;\n'
        "    -v|-verbose|--verbose) ;;\n"
        '    -only=*|--only=*) only="${1#*=}" ;;\n'
        '    -only|--only) shift; only="$1" ;;\n'
        f"    *) echo \"{tool}: Unknown command line argument '$1'.  Try: '{tool} --help'\" >&2; exit 1 ;;\n"
        "  esac\n"
        "  shift\n"
        "done\n"
        + (
            "only=amdgpu  # the legacy name answers for AMD GPUs only, as LLVM's tool does\n"
            if tool == "amdgpu-arch"
            else ""
        )
        + "found=0\n"
        'case "$only" in\n'
        "  all|amdgpu)\n" + (f"{_heredoc(amd_lines)}\n    found=1 ;;\n" if amd else "    ;;\n") + "esac\n"
        'case "$only" in\n'
        "  all|nvptx)\n" + (f"{_heredoc(nv_lines)}\n    found=1 ;;\n" if nv_lines else "    ;;\n") + "esac\n"
        'case "$only" in\n'
        "  all|amdgpu|nvptx|intel) ;;\n"
        f"  *) echo \"{tool}: for the --only option: Cannot find option named '$only'!\" >&2; exit 1 ;;\n"
        "esac\n"
        'if [ "$found" = 0 ]; then\n'
        '  echo "Failed to get device count" >&2\n'
        "  exit 1\n"
        "fi\n"
        "exit 0\n"
    )


def render_tools(targets: Sequence[GpuTarget]) -> dict[str, str]:
    """The script text for each pinned tool, by name; each reports exactly the AMD ``targets``,
    in the given order (the first is what "take the first gfx" scripts build for)."""
    for t in targets:
        if not _SAFE.fullmatch(str(t)):
            raise ValueError(f"GPU target {str(t)!r} has characters a pinned tool cannot print")
    amd = [t for t in targets if vendor_name(t) == "amd"]
    return {
        "rocminfo": _rocminfo_script(targets, amd),
        "rocm_agent_enumerator": _enumerator_script(targets, amd),
        "amdgpu-arch": _arch_script("amdgpu-arch", targets, amd, "amdgpu"),
        "offload-arch": _arch_script("offload-arch", targets, amd, "all"),
    }
