"""Compile csrc/kernels.hip with clang (``$HIPCXX``, default clang++-19) and ``--offload-compress``,
for the targets in PYTORCH_ROCM_ARCH, into the extension compressed_bundles._kernels.

No ROCm installation is needed: ``-nogpuinc -nogpulib`` and the two declarations the kernel
needs (csrc/kernels.hip).
"""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import OptionError


def offload_arch_flags():
    archs = [a for a in os.environ.get("PYTORCH_ROCM_ARCH", "").replace(" ", ";").split(";") if a]
    if not archs:
        raise OptionError("PYTORCH_ROCM_ARCH is not set: name the GPU targets to build for")
    return [f"--offload-arch={arch}" for arch in archs]


class HipBuildExt(build_ext):
    """Compile and link each extension with one clang call."""

    def build_extension(self, ext):
        output = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(output), exist_ok=True)
        self.spawn([
            os.environ.get("HIPCXX", "clang++-19"), "-x", "hip", "-nogpuinc", "-nogpulib",
            "--offload-compress", "-O2", "-fPIC", "-shared",
            *offload_arch_flags(), *ext.sources, *(f"-l{lib}" for lib in ext.libraries), "-o", output,
        ])


setup(
    ext_modules=[Extension("compressed_bundles._kernels", ["csrc/kernels.hip"])],
    cmdclass={"build_ext": HipBuildExt},
)
