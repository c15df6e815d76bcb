"""How AMD shows in a project's own build files: the ``gpu.build.Switches`` of AMD's build side.

Switch names with ``HIP``, ``ROCM``, ``AMDGPU`` or composable kernel's ``CK`` are AMD's alone;
an ``if`` test naming ROCm or HIP (``IS_ROCM``, ``torch.version.hip``, ``BUILD_TARGET == "rocm"``)
picks AMD's toolchain; ``--offload-arch=`` and ``--amdgpu-target=`` name targets; a project's
own target list is the target IDs as they are. Pure; used by ``builder/switches``.
"""

from __future__ import annotations

import re
from typing import Sequence

# Patterns, compiled (and kept by ``re``) when build files are read: not on every build's import.
_NAME = r"HIP|ROCM|AMDGPU|(^|_)CK($|_)"
_TOOLCHAIN = r"(?i)rocm|hip"
_FLAG = r"--(?:offload-arch|amdgpu-target)=(gfx[0-9a-z]+(?::[a-z]+[+-])*)"


class AmdSwitches:
    flag = "--offload-arch"

    def owns_name(self, name: str, *, targets: bool) -> bool:
        return bool(re.search(_NAME, name))

    def picks_toolchain(self, text: str) -> bool:
        return bool(re.search(_TOOLCHAIN, text))

    def flag_targets(self, text: str) -> list[str]:
        return list(dict.fromkeys(re.findall(_FLAG, text)))

    def spell(self, targets: Sequence[str], sample: str, name: str) -> list[str]:
        return list(targets)
