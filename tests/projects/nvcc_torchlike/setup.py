"""A CUDA extension built exactly the way torch.utils.cpp_extension's BuildExtension builds one,
without torch (so it builds on a machine without it), with a hard-coded -gencode list that reads
no variable (like causal-conv1d 1.6.0's setup.py L177-203).

The two paths are torch 2.11's (torch/utils/cpp_extension.py):

- ninja (TORCHLIKE_NINJA=1, torch's default): unix_wrap_ninja_compile writes build_temp/build.ninja
  whose nvcc is $PYTORCH_NVCC when set, else $CUDA_HOME/bin/nvcc (_write_ninja_file), with the rule
  `$nvcc -MD -MF $out.d $cuda_cflags -c $in -o $out $cuda_post_cflags`, and runs ninja;
- no ninja (BuildExtension.with_options(use_ninja=False), torch-scatter's way):
  unix_wrap_single_compile swaps the compiler for _join_cuda_home('bin', 'nvcc') for .cu files.

CUDA_HOME is found as torch's _find_cuda_home finds it: $CUDA_HOME, $CUDA_PATH, the folder above
`nvcc` on PATH, /usr/local/cuda. The arch flags are the project's own (torch adds none when
extra_compile_args name an arch: _get_cuda_arch_flags).
"""

import copy
import os
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

GENCODE = ["-gencode=arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90",
           "-gencode=arch=compute_120,code=sm_120"]
COMMON_NVCC_FLAGS = ["-D__CUDA_NO_HALF_OPERATORS__", "--expt-relaxed-constexpr"]


def find_cuda_home():
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home is None:
        nvcc = shutil.which("nvcc")
        home = os.path.dirname(os.path.dirname(nvcc)) if nvcc else "/usr/local/cuda"
    return home


CUDA_HOME = find_cuda_home()


class BuildExtension(build_ext):
    def build_extensions(self):
        self.compiler.src_extensions += [".cu"]
        original_compile = self.compiler._compile

        def unix_cuda_flags(cflags):
            return COMMON_NVCC_FLAGS + ["--compiler-options", "'-fPIC'"] + cflags

        def unix_wrap_single_compile(obj, src, ext, cc_args, extra_postargs, pp_opts):
            cflags = copy.deepcopy(extra_postargs)
            original_compiler = self.compiler.compiler_so
            try:
                if src.endswith(".cu"):
                    self.compiler.set_executable("compiler_so", [os.path.join(CUDA_HOME, "bin", "nvcc")])
                    cflags = unix_cuda_flags(cflags["nvcc"])
                else:
                    cflags = cflags["cxx"]
                original_compile(obj, src, ext, cc_args, cflags, pp_opts)
            finally:
                self.compiler.set_executable("compiler_so", original_compiler)

        def unix_wrap_ninja_compile(sources, output_dir=None, macros=None, include_dirs=None, debug=0,
                                    extra_preargs=None, extra_postargs=None, depends=None):
            output_dir = os.path.abspath(output_dir)
            _, objects, extra_postargs, pp_opts, _ = self.compiler._setup_compile(
                output_dir, macros, include_dirs, sources, depends, extra_postargs)
            common = self.compiler._get_cc_args(pp_opts, debug, extra_preargs)
            nvcc = os.environ.get("PYTORCH_NVCC") or os.path.join(CUDA_HOME, "bin", "nvcc")
            cxx = self.compiler.compiler_so[0]
            lines = [
                "ninja_required_version = 1.3",
                f"cxx = {cxx}",
                f"nvcc = {nvcc}",
                f"cflags = {' '.join(self.compiler.compiler_so[1:] + common)}",
                f"post_cflags = {' '.join(extra_postargs['cxx'])}",
                f"cuda_cflags = {' '.join(common)}",
                f"cuda_post_cflags = {' '.join(unix_cuda_flags(extra_postargs['nvcc']))}",
                "rule compile",
                "  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out $post_cflags",
                "  depfile = $out.d",
                "  deps = gcc",
                "rule cuda_compile",
                "  depfile = $out.d",
                "  deps = gcc",
                "  command = $nvcc -MD -MF $out.d $cuda_cflags -c $in -o $out $cuda_post_cflags",
            ]
            for src, obj in zip(sources, objects):
                rule = "cuda_compile" if src.endswith(".cu") else "compile"
                lines.append(f"build {obj}: {rule} {os.path.abspath(src)}")
            os.makedirs(output_dir, exist_ok=True)
            with open(os.path.join(output_dir, "build.ninja"), "w") as fh:
                fh.write("\n".join(lines) + "\n")
            subprocess.run(["ninja", "-v", "-j", os.environ.get("MAX_JOBS", "1")], cwd=output_dir, check=True)
            return objects

        if os.environ.get("TORCHLIKE_NINJA") == "1":
            self.compiler.compile = unix_wrap_ninja_compile
        else:
            self.compiler._compile = unix_wrap_single_compile
        super().build_extensions()


setup(
    ext_modules=[
        Extension(
            "nvcc_torchlike._C",
            ["csrc/ext.cpp", "csrc/kernels.cu"],
            library_dirs=[os.path.join(CUDA_HOME, "lib64")],
            libraries=["cudart"],
            extra_compile_args={"cxx": ["-O2"], "nvcc": ["-O2"] + GENCODE},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
