#!/usr/bin/env bash
# What the shim saves, through the shim, on the GPU machine: the PyTorch C++/CUDA extension
# sample (sample_projects/torch_cuda_ext) built with `pip wheel . --no-build-isolation` twice in
# one run, from fresh copies: targets = auto (the shim detects the GPU) and targets = torch
# 2.11's own arch list (TORCH_CUDA_ARCH_LIST 7.5;8.0;8.6;9.0;10.0;12.0, given as
# -C rocm-build-backend.targets). Build time, .so size and the audit of each, side by side:
#   bash bench/h200/shim_saves.sh OUTDIR [ROUNDS]
set -uo pipefail
out=${1:?OUTDIR}
rounds=${2:-1}
mkdir -p "$out"
out=$(cd "$out" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
unset TORCH_CUDA_ARCH_LIST CUDAARCHS NVCC_APPEND_FLAGS CMAKE_ARGS PYTORCH_ROCM_ARCH ROCM_BUILD_BACKEND_TARGETS
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
LIST="sm_75;sm_80;sm_86;sm_90;sm_100;sm_120"
log="$out/log.txt"
: >"$log"
summary="$out/summary.txt"
: >"$summary"
for round in $(seq "$rounds"); do
  for targets in auto "$LIST"; do
    src=$(mktemp -d)/torch_cuda_ext
    cp -r "$repo/sample_projects/torch_cuda_ext" "$src"
    wheels=$(mktemp -d)
    start=$(date +%s.%N)
    (cd "$src" && python3 -m pip wheel --no-build-isolation --no-deps -v -w "$wheels" \
       -C rocm-build-backend.targets="$targets" . >>"$log" 2>&1)
    rc=$?
    secs=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
    whl=$(ls "$wheels"/*.whl 2>/dev/null | head -1)
    so=$( [ -n "$whl" ] && python3 -c "import sys, zipfile; print(sum(i.file_size for i in zipfile.ZipFile(sys.argv[1]).infolist() if i.filename.endswith('.so')))" "$whl")
    found=$( [ -n "$whl" ] && python3 -m rocm_build_backend audit "$whl" | sed -n 's/^targets: //p')
    echo "round $round targets=$targets rc=$rc seconds=$secs so_bytes=$so audit=[$found]" | tee -a "$summary"
  done
done
grep "rocm-build-backend: \(targets\|backend\)" "$log" | sed 's/^ *//' | sort -u | tee -a "$summary"
