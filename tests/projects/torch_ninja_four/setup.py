"""Four extensions built by torch's BuildExtension with ninja (its default), each its own source:
the shape whose extensions all write build_temp/build.ninja."""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    ext_modules=[
        CppExtension("torch_ninja_four.e0", ["csrc/e0.cpp"]),
        CppExtension("torch_ninja_four.e1", ["csrc/e1.cpp"]),
        CppExtension("torch_ninja_four.e2", ["csrc/e2.cpp"]),
        CppExtension("torch_ninja_four.e3", ["csrc/e3.cpp"]),
    ],
    cmdclass={"build_ext": BuildExtension},
)
