"""Compile csrc/kernels.hip with hipcc (``HIPCC``; or clang with ``-x hip``) in shapes that
appending flags cannot hold to the build's targets, one extension
``hipcc_shapes._<shape>`` per shape named in ``HIP_SHAPES`` (comma-separated):

- ``native``: ``--offload-arch=native`` (clang asks amdgpu-arch for the machine's GPUs);
- ``rdc``: relocatable device code, compiled with ``-fgpu-rdc -c``, then a link step that lists
  its own ``--offload-arch=gfx908`` (the device code is made at the link);
- ``rsp``: the target in a response file, ``@csrc/arch.rsp`` (``--offload-arch=gfx908``).

``HIP_EXTRA`` adds options to every compiler run (``-nogpuinc -nogpulib`` for a clang without the
HIP runtime)."""

import os
import shlex
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ARCH = {"native": ["--offload-arch=native"], "rdc": ["--offload-arch=gfx908"], "rsp": ["@csrc/arch.rsp"]}


class ShapeBuild(build_ext):
    def build_extension(self, ext):
        output = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(output), exist_ok=True)
        compiler = shlex.split(os.environ.get("HIPCC") or shutil.which("hipcc") or "hipcc")
        extra = shlex.split(os.environ.get("HIP_EXTRA", ""))
        shape = ext.name.rsplit("_", 1)[-1]
        arch = ARCH[shape]
        if shape != "rdc":
            subprocess.run([*compiler, *extra, *arch, "-fPIC", "-shared", *ext.sources, "-o", output], check=True)
            return
        objects = []
        for source in ext.sources:
            obj = os.path.join(self.build_temp, f"{shape}-{os.path.basename(source)}.o")
            os.makedirs(self.build_temp, exist_ok=True)
            subprocess.run([*compiler, *extra, "-fgpu-rdc", "-fPIC", "-c", *arch, source, "-o", obj], check=True)
            objects.append(obj)
        link = ["--hip-link"] if "hipcc" not in os.path.basename(compiler[-1]) else []
        subprocess.run([*compiler, *extra, "-fgpu-rdc", *link, *arch, "-shared", *objects, "-o", output], check=True)


setup(
    ext_modules=[Extension(f"hipcc_shapes._{shape}", ["csrc/kernels.hip"])
                 for shape in os.environ.get("HIP_SHAPES", "native").split(",")],
    cmdclass={"build_ext": ShapeBuild},
)
