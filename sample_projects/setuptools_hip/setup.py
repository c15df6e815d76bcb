"""Compile csrc/kernels.hip with hipcc into the extension rocm_sample_hip._kernels.

Targets come from PYTORCH_ROCM_ARCH, read the way torch.utils.cpp_extension reads it.
"""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import OptionError


def offload_arch_flags():
    archs = os.environ.get("PYTORCH_ROCM_ARCH", "").replace(" ", ";").split(";")
    archs = [arch for arch in archs if arch]
    if not archs:
        raise OptionError(
            "PYTORCH_ROCM_ARCH is not set: name the GPU targets to build for, "
            "for example PYTORCH_ROCM_ARCH='gfx90a;gfx942'"
        )
    return [f"--offload-arch={arch}" for arch in archs] + ["-fno-gpu-rdc"]


class HipBuildExt(build_ext):
    """Build each extension with one hipcc call that compiles and links it."""

    def build_extension(self, ext):
        output = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(output), exist_ok=True)
        include_dirs = [*ext.include_dirs, *self.include_dirs]
        self.spawn([
            os.environ.get("HIPCC", "hipcc"),
            "-O3", "-fPIC", "-shared",
            *offload_arch_flags(),
            *(f"-I{d}" for d in include_dirs),
            *ext.sources,
            "-o", output,
        ])


setup(
    ext_modules=[Extension("rocm_sample_hip._kernels", ["csrc/kernels.hip"])],
    cmdclass={"build_ext": HipBuildExt},
)
