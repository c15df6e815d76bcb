"""Pinned detection tools: write each vendor's scripts that report exactly the chosen targets.

Some builds pick their GPU targets themselves, whatever the environment says (the first ``gfx``
of ``rocminfo``, ``rocm_agent_enumerator``, ``nvidia-smi --query-gpu=compute_cap``). Each vendor
renders the tools its probes are (``BuildVendor.pinned_tools``: AMD's ``rocminfo``,
``rocm_agent_enumerator``, ``amdgpu-arch`` and ``offload-arch``; NVIDIA's ``nvidia-smi``); this
module writes them, executable and atomically, into one directory that the build puts first on
``PATH`` and on CMake's ``CMAKE_PROGRAM_PATH``. Every vendor is asked, so a vendor without
targets in the build answers like a machine without its GPUs. Decides nothing about targets.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Sequence

from rocm_build_backend.gpu.targets import GpuTarget, vendor_name
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.gpu.vendor import vendors


def write_pinned_tools(directory: Path, targets: Sequence[GpuTarget]) -> list[Path]:
    """Write every vendor's pinned tools for ``targets`` into ``directory`` (created if needed)
    and return their paths: the tools of the targets' vendor first, then the others'.

    Each reports exactly ``targets``, in the given order (the first is what "take the first
    gfx" scripts build for). Put ``directory`` first on ``PATH`` and on ``CMAKE_PROGRAM_PATH``
    for the build: CMake's ``find_program`` searches the ROCm root's ``bin`` (a HINT) before
    ``PATH``, but ``CMAKE_PROGRAM_PATH`` before both.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    mine = {vendor_name(t) for t in targets}
    ordered = sorted(vendors(), key=lambda v: v.name not in mine)
    written = []
    for vendor in ordered:
        for name, text in build_side(vendor).pinned_tools(list(targets)).items():
            path = directory / name
            tmp = directory / f".{name}.tmp"
            tmp.write_text(text, encoding="utf-8")
            mode = tmp.stat().st_mode
            tmp.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | stat.S_IRUSR)
            os.replace(tmp, path)
            written.append(path)
    return written


def pinned_env(directory: Path, env: dict[str, str]) -> dict[str, str]:
    """``PATH`` and ``CMAKE_PROGRAM_PATH`` with ``directory`` first, for the build's environment."""
    d = str(directory)
    path = env.get("PATH", os.defpath)
    program_path = env.get("CMAKE_PROGRAM_PATH", "")
    return {
        "PATH": d + os.pathsep + path if path else d,
        "CMAKE_PROGRAM_PATH": d + os.pathsep + program_path if program_path else d,
    }
