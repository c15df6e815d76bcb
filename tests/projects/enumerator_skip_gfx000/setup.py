"""Pick the GPU targets the way PyTorch's CMake does when PYTORCH_ROCM_ARCH is unset
(cmake/public/utils.cmake torch_hip_get_arch_list):
``rocm_agent_enumerator | grep -v gfx000 | sort -u``. The line is parsed, not skipped, so it
works with the old enumerator (which prints gfx000 first) and the new one (which does not).
"""

import os
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def gpu_targets():
    result = subprocess.run(["rocm_agent_enumerator"], capture_output=True, text=True)
    archs = sorted({line.strip() for line in result.stdout.splitlines()} - {"", "gfx000"})
    if not archs:
        raise SystemExit("rocm_agent_enumerator lists no GPU: cannot pick GPU targets")
    return archs


def extra_flags():
    return []


class HipBuildExt(build_ext):
    """Compile and link each extension with one hipcc call."""

    def build_extension(self, ext):
        output = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(output), exist_ok=True)
        archs = gpu_targets()
        print(f"building {ext.name} for GPU targets: {' '.join(archs)}")
        self.spawn([
            os.environ.get("HIPCC", "hipcc"), "-O2", "-fPIC", "-shared",
            *extra_flags(),
            *(f"--offload-arch={arch}" for arch in archs),
            *ext.sources, "-o", output,
        ])


setup(
    ext_modules=[Extension("enumerator_skip_gfx000._kernels", ["csrc/kernels.hip"])],
    cmdclass={"build_ext": HipBuildExt},
)
