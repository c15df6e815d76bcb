#!/bin/sh
# The CUDA samples through the shim itself, once the build flow builds for NVIDIA:
#   sh bench/h200/run_h200_shim.sh [OUTDIR]      (from the repository root, on the GPU machine)
# For each sample: `pip install . --no-build-isolation` with targets = auto (the shim detects
# the GPU), then the audit of what was installed, then a kernel launch; then the same sample
# built for sm_80 only: `check` must exit 1, the import guard must refuse naming sm_80 and the
# device's target, and without the guard the launch must fail with error 209.
set -u
out=${1:-h200-shim}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
repo=$PWD
log="$out/shim.log"
: >"$log"
run() { echo "\$ $*" >>"$log"; "$@" >>"$log" 2>&1; rc=$?; echo "rc=$rc" >>"$log"; return $rc; }

for sample in skbuild_cuda:rocm_sample_skbuild_cuda torch_cuda_ext:rocm_sample_torch_cuda; do
  name=${sample%%:*} module=${sample##*:}
  for targets in auto sm_80; do
    src=$(mktemp -d)/$name
    cp -r "$repo/sample_projects/$name" "$src"
    site="$out/site-$name-$targets"
    rm -rf "$site"
    start=$(date +%s)
    ROCM_BUILD_BACKEND_TARGETS=$targets run python3 -m pip install --no-build-isolation --no-deps \
      --target "$site" -v "$src"
    echo "$name $targets build rc=$? seconds=$(( $(date +%s) - start ))" | tee -a "$out/summary.txt"
    run python3 -m rocm_build_backend audit "$site"
    echo "$name $targets audit rc=$?" | tee -a "$out/summary.txt"
    if [ "$module" = rocm_sample_torch_cuda ]; then
      call="m.add_one(__import__('torch').arange(1, 5, dtype=__import__('torch').float32, device='cuda')).tolist()"
    else
      call="m.add_one([1.0, 2.0, 3.0, 4.0])"
    fi
    run python3 -c "import sys; sys.path.insert(0, '$site'); import $module as m; print('result', $call)"
    echo "$name $targets run (guard on) rc=$?" | tee -a "$out/summary.txt"
    ROCM_BUILD_BACKEND_GUARD_OFF=1 run python3 -c "import sys; sys.path.insert(0, '$site'); import $module as m; print('result', $call)"
    echo "$name $targets run (guard off) rc=$?" | tee -a "$out/summary.txt"
  done
done
cat "$out/summary.txt"
