"""The GPU code is built only when the project's own switch says so (torch-scatter 2.1.2 setup.py
L17-26: torch.cuda.is_available(), else FORCE_CUDA=1); otherwise the wheel has no device code."""

import os
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

WITH_CUDA = os.getenv("FORCE_CUDA", "0") == "1"


class NvccBuild(build_ext):
    def build_extension(self, ext):
        output = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(output), exist_ok=True)
        subprocess.run(["nvcc", "-O2", "-shared", "-Xcompiler", "-fPIC", *ext.sources, "-o", output], check=True)


setup(
    ext_modules=[Extension("nvcc_force_cuda._kernels", ["csrc/kernels.cu"])] if WITH_CUDA else [],
    cmdclass={"build_ext": NvccBuild},
)
