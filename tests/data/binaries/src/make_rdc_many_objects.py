"""Build ``cuda_rdc_lineinfo_71_objects_sm90.so``: a CMake CUDA library with separable
compilation linked from 71 objects, its device link carrying line info.

nvcc then passes the names of all linked objects to ``fatbinary --ident``, and the entry
header of the device-linked cubin in ``.nv_fatbin`` holds them: 5,296 bytes here (past 4 KiB).

Usage: ``python3 make_rdc_many_objects.py OUT_DIR`` (needs cmake, ninja, nvcc 13 on PATH or
``CUDACXX``; takes about a minute on two cores). The project is written to and built in a
temporary folder; only the stripped library is copied to OUT_DIR. The object names in the
header are relative to the build folder, so the header is the same wherever it is built.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

N = 70  # device-function objects, plus one object with the kernel
NAME = "cuda_rdc_lineinfo_71_objects_sm90.so"


def write_project(root: pathlib.Path) -> None:
    parts = [f"device_part_{i:03d}" for i in range(N)]
    funcs = root / "src" / "device_functions"
    funcs.mkdir(parents=True)
    (root / "src" / "parts.cuh").write_text("".join(f"__device__ float {m}(float x);\n" for m in parts))
    for i, m in enumerate(parts):
        (funcs / f"{m}.cu").write_text(f"__device__ float {m}(float x) {{ return x + {i}.0f; }}\n")
    (root / "src" / "kernel.cu").write_text(
        '#include "parts.cuh"\n'
        "__global__ void add_part(float* p) { p[threadIdx.x] = device_part_000(p[threadIdx.x]); }\n")
    sources = "\n  ".join(["src/kernel.cu"] + [f"src/device_functions/{m}.cu" for m in parts])
    (root / "CMakeLists.txt").write_text(f"""cmake_minimum_required(VERSION 3.18)
project(rdc_many_objects LANGUAGES CUDA)
add_library(rdc_many_objects SHARED
  {sources})
set_target_properties(rdc_many_objects PROPERTIES
  CUDA_SEPARABLE_COMPILATION ON CUDA_ARCHITECTURES 90-real CUDA_RUNTIME_LIBRARY None)
target_link_options(rdc_many_objects PRIVATE $<DEVICE_LINK:-lineinfo>)
""")


def main(out: pathlib.Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp) / "proj"
        build = pathlib.Path(tmp) / "build"
        write_project(root)
        cuda = os.environ.get("CUDACXX", "nvcc")
        subprocess.run(["cmake", "-S", str(root), "-B", str(build), "-G", "Ninja",
                        f"-DCMAKE_CUDA_COMPILER={shutil.which(cuda) or cuda}"], check=True)
        subprocess.run(["cmake", "--build", str(build), "-j2"], check=True)
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(build / "librdc_many_objects.so", out / NAME)
        subprocess.run(["strip", str(out / NAME)], check=True)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
