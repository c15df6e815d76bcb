"""Compile csrc/kernels.hip with hipcc for gfx908 and gfx906, written into this file: the way a
Makefile-style setup.py calls hipcc, reading no target variable."""

import os
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class HipccBuild(build_ext):
    def build_extension(self, ext):
        output = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(output), exist_ok=True)
        hipcc = os.environ.get("HIPCC") or shutil.which("hipcc") or "hipcc"
        subprocess.run([hipcc, "--offload-arch=gfx908", "--offload-arch=gfx906", "-O2", "-fPIC", "-shared",
                        *ext.sources, "-o", output], check=True)


setup(
    ext_modules=[Extension("hipcc_hardcoded._kernels", ["csrc/kernels.hip"])],
    cmdclass={"build_ext": HipccBuild},
)
