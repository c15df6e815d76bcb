"""The ops are built only when torch imports (mmcv 2.x setup.py: ``EXT_TYPE`` stays empty and
``get_extensions()`` returns nothing without torch, whatever FORCE_CUDA says); without torch
the build prints why and makes a wheel without device code."""

import os

from setuptools import setup

EXT_TYPE = ""
try:
    import torch
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension

    EXT_TYPE = "pytorch"
    cmd_class = {"build_ext": BuildExtension}
except ModuleNotFoundError:
    cmd_class = {}
    print("Skip building ext ops due to the absence of torch.")


def get_extensions():
    if EXT_TYPE != "pytorch":
        return []
    if os.getenv("FORCE_CUDA", "0") == "1" or torch.cuda.is_available():
        return [CUDAExtension("skip_without_torch._ext", ["csrc/ops.cu"])]
    return []


setup(ext_modules=get_extensions(), cmdclass=cmd_class)
