"""A library compiled by a compiler the pinned programs do not see, and a prebuilt fatbin shipped as
it is.

`_kernels` is built by the nvcc named in `BYPASS_NVCC` (a real nvcc by its own path: a build script
that hard-codes `/usr/local/cuda/bin/nvcc`; default `nvcc` from PATH) for sm_80 and sm_90.
`nvcc_bypass/prebuilt/k_fat.fatbin` is a file of the sources for sm_80 and sm_90, copied into the wheel as
it is; it was made with
`nvcc -fatbin -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 csrc/kernels.cu
-o nvcc_bypass/prebuilt/k_fat.fatbin`.
"""

import os
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

FLAGS = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"]


class NvccBuild(build_ext):
    def build_extension(self, ext):
        output = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(output), exist_ok=True)
        nvcc = os.environ.get("BYPASS_NVCC", "nvcc")
        subprocess.run([nvcc, "-O2", "-shared", "-Xcompiler", "-fPIC", *FLAGS, *ext.sources, "-o", output], check=True)


setup(
    ext_modules=[Extension("nvcc_bypass._kernels", ["csrc/kernels.cu"])],
    cmdclass={"build_ext": NvccBuild},
)
