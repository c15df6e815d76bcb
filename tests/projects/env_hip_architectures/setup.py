"""Read the GPU targets the way xformers does (setup.py): ``HIP_ARCHITECTURES``,
space-separated, default ``native`` (the GPUs of the build machine).
"""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def gpu_targets():
    return os.environ.get("HIP_ARCHITECTURES", "native").split()


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
    ext_modules=[Extension("env_hip_architectures._kernels", ["csrc/kernels.hip"])],
    cmdclass={"build_ext": HipBuildExt},
)
