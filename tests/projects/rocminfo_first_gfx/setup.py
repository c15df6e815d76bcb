"""Pick the GPU target the way DeepSpeed and the ROCm fork of apex do: the first ``gfx`` name
that ``rocminfo`` prints (op_builder/builder.py get_rocm_gpu_arch), whatever PYTORCH_ROCM_ARCH
says; the wavefront size comes from rocminfo too (get_rocm_wavefront_size).

Unlike DeepSpeed, this runs ``rocminfo`` from PATH only (DeepSpeed tries /opt/rocm/bin/rocminfo first).
"""

import os
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _rocminfo(pipeline):
    result = subprocess.run("rocminfo | " + pipeline, shell=True, capture_output=True, text=True)
    return result.stdout.strip()


def gpu_targets():
    arch = _rocminfo("grep -o -m 1 'gfx.*'")
    if not arch:
        raise SystemExit("rocminfo names no GPU: cannot pick a GPU target")
    return [arch]


def extra_flags():
    wavefront = _rocminfo("grep -Eo -m1 'Wavefront Size:[[:space:]]+[0-9]+' | grep -Eo '[0-9]+'") or "32"
    return [f"-DROCM_WAVEFRONT_SIZE={wavefront}"]


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
    ext_modules=[Extension("rocminfo_first_gfx._kernels", ["csrc/kernels.hip"])],
    cmdclass={"build_ext": HipBuildExt},
)
