"""Two shared libraries built the way a Makefile builds them: `nvcc` by name (from PATH), one
command compiling and linking each, with target lists written into this file.

`_kernels` lists sm_80, sm_90 and sm_120 (plus PTX for sm_120, from -arch=sm_120); `_only_sm80` is
built for sm_80 alone on purpose. Neither reads TORCH_CUDA_ARCH_LIST, CMAKE_CUDA_ARCHITECTURES or
any other variable.
"""

import os
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

FLAGS = {
    "nvcc_makefile._kernels": ["-gencode", "arch=compute_80,code=sm_80",
                               "-gencode=arch=compute_90,code=[sm_90,compute_90]", "-arch=sm_120"],
    "nvcc_makefile._only_sm80": ["-gencode", "arch=compute_80,code=sm_80"],
}


class NvccBuild(build_ext):
    def build_extension(self, ext):
        output = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(output), exist_ok=True)
        subprocess.run(["nvcc", "-O2", "-shared", "-Xcompiler", "-fPIC", *FLAGS[ext.name], *ext.sources,
                        "-o", output], check=True)


setup(
    ext_modules=[Extension("nvcc_makefile._kernels", ["csrc/kernels.cu"]),
                 Extension("nvcc_makefile._only_sm80", ["csrc/only_sm80.cu"])],
    cmdclass={"build_ext": NvccBuild},
)
