"""How NVIDIA shows in a project's own build files: the ``gpu.build.Switches`` of NVIDIA's build side.

Switch names with ``CUBLAS``, ``NVCC``, ``CUTLASS`` or ``NVIDIA`` are NVIDIA's alone; ``CUDA``
alone is not for a switch (the PyTorch world's ``FORCE_CUDA`` builds ROCm code too) but is for a
target list (``TORCH_CUDA_ARCH_LIST``, ``FLASH_ATTN_CUDA_ARCHS``) and a CMake backend option
(``GGML_CUDA``). No ``if`` test is taken as picking NVIDIA's toolchain by its words (``cuda`` is
in ROCm builds' tests too). ``-gencode``/``-code`` lists (``arch=compute_90,code=[sm_90,compute_90]``)
and ``-arch=sm_XY`` name targets. A project's own target list is spelled as its default is:
numbers (``80;90``), compute capabilities (``8.0;9.0``) or ``sm_XY``. Pure; used by ``builder/switches``.
"""

from __future__ import annotations

import re
from typing import Sequence

# Patterns, compiled (and kept by ``re``) when build files are read: not on every build's import.
_NAME = r"CUBLAS|NVCC|CUTLASS|NVIDIA"
_TARGET_NAME = r"CUDA|CUBLAS|NVCC|CUTLASS|NVIDIA"
_CODE = r"\bcode=\[?\"?((?:sm|compute)_\d+[af]?(?:,(?:sm|compute)_\d+[af]?)*)"
_ARCH = r"(?:^|\s)-arch[= ](sm_\d+[af]?)"
_CC = r"\d+\.\d+[af]?(\+PTX)?"


class NvidiaSwitches:
    flag = "-gencode"

    def owns_name(self, name: str, *, targets: bool) -> bool:
        return bool(re.search(_TARGET_NAME if targets else _NAME, name))

    def picks_toolchain(self, text: str) -> bool:
        return False

    def flag_targets(self, text: str) -> list[str]:
        found = [t for m in re.finditer(_CODE, text) for t in m.group(1).split(",")] + re.findall(_ARCH, text)
        return list(dict.fromkeys(found))

    def spell(self, targets: Sequence[str], sample: str, name: str) -> list[str]:
        sass = [t for t in targets if t.startswith("sm_")] or list(targets)
        numbers = [t.split("_", 1)[1] for t in sass]
        if sample.startswith("sm_") or (not sample and "SM" in name.upper()):
            return sass
        if re.fullmatch(_CC, sample) or (not sample and "TORCH" in name.upper()):
            parts = [re.match(r"(\d+)(\D*)", n) for n in numbers]
            return [f"{m.group(1)[:-1]}.{m.group(1)[-1]}{m.group(2)}" for m in parts if m]
        return numbers
