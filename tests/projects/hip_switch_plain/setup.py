"""A plain setuptools project that knows nothing of rocm-build-backend: its HIP extension is
built only when DEMO_WITH_HIP=1 (its own switch), for the targets in PYTORCH_ROCM_ARCH."""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class HipBuildExt(build_ext):
    """Compile and link each extension with one hipcc call."""

    def build_extension(self, ext):
        archs = [a for a in os.environ.get("PYTORCH_ROCM_ARCH", "").replace(" ", ";").split(";") if a]
        output = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(output), exist_ok=True)
        self.spawn([os.environ.get("HIPCC", "hipcc"), "-O2", "-fPIC", "-shared",
                    *(f"--offload-arch={a}" for a in archs), "-fno-gpu-rdc",
                    *(f"-I{d}" for d in self.include_dirs), *ext.sources, "-o", output])


ext_modules = []
if os.environ.get("DEMO_WITH_HIP", "0") == "1":
    ext_modules = [Extension("demo_hip_switch._kernels", ["csrc/kernels.hip"])]

setup(ext_modules=ext_modules, cmdclass={"build_ext": HipBuildExt})
