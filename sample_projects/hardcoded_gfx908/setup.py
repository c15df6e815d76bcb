"""Compile csrc/kernels.hip for gfx908 only, calling the clang HIP driver directly.

Like a Makefile or CMake project that runs `clang++ -x hip --offload-arch=gfx908`, it ignores
PYTORCH_ROCM_ARCH, GPU_TARGETS and every other target variable (and, not being hipcc, it does
not read HIPCC_COMPILE_FLAGS_APPEND either).
"""

import os
import shutil

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CompileError


def hip_clang():
    for name in (os.environ.get("HIP_CLANG"), "amdclang++", "clang++-19", "clang-19", "clang++"):
        if name and shutil.which(name):
            return name
    raise CompileError("no clang HIP driver found: set HIP_CLANG to amdclang++ or clang++")


class HipBuildExt(build_ext):
    def build_extension(self, ext):
        output = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(output), exist_ok=True)
        self.spawn([
            hip_clang(), "-x", "hip", "-nogpuinc", "-nogpulib",
            "--offload-arch=gfx908",
            "-O2", "-fPIC", "-shared",
            *(f"-I{d}" for d in self.include_dirs),
            *ext.sources,
            "-o", output,
        ])


setup(
    ext_modules=[Extension("rocm_sample_hardcoded._kernels", ["csrc/kernels.hip"])],
    cmdclass={"build_ext": HipBuildExt},
)
