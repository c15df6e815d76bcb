"""torch.utils.cpp_extension turns TORCH_CUDA_ARCH_LIST into nvcc's -gencode flags; without it,
it builds for the GPUs visible at build time (and fails on a machine without one)."""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    packages=["rocm_sample_torch_cuda"],
    ext_modules=[
        CUDAExtension(
            "rocm_sample_torch_cuda._C",
            ["csrc/ext.cpp", "csrc/kernels.cu"],
            extra_compile_args={"cxx": ["-O2"], "nvcc": ["-O2"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
