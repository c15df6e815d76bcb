#!/usr/bin/env bash
# Every GPU run in one go, on the NVIDIA H200 machine (from the repository root):
#   bash bench/h200/run_all.sh OUTDIR
# 1. run_h200_shim.sh  the CUDA samples built through the shim (targets = auto, then sm_80 only):
#                      audit, check, the import guard, a kernel launch
# 2. check_env.sh      check --env on the machine's own torch and cupy, timed, confirmed by kernels
# 3. thin_cupy.sh      cupy-cuda13x thinned to sm_90 and sm_80: check's prediction against real runs
# Each step's output goes to OUTDIR/<step>/, and OUTDIR/all.tar.gz holds everything.
set -uo pipefail
out=${1:?OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
step() {
  local name=$1 limit=$2; shift 2
  mkdir -p "$out/$name"
  local start=$(date +%s)
  OUT="$out/$name" timeout "$limit" "$@" > "$out/$name/stdout.txt" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/steps.txt"
}
nvidia-smi --query-gpu=index,name,compute_cap,uuid,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
step shim 300 sh bench/h200/run_h200_shim.sh "$out/shim"
step check_env 150 bash bench/h200/check_env.sh
step thin_cupy 150 bash bench/h200/thin_cupy.sh
tar czf "$out/all.tar.gz" -C "$out" --exclude 'site-*' --exclude 'venv_*' --exclude '*.whl' --exclude all.tar.gz . 2>/dev/null
cat "$out/steps.txt"
