#!/usr/bin/env bash
# `check --env` on the H200 machine, whose Python has torch 2.11+cu130 and cupy-cuda13x:
#   1. the verdict for this GPU (sm_XY from nvidia-smi) and for a GPU the wheels do not serve;
#   2. its time against reading the files with device code once (bench/bench_check_env.py);
#   3. the verdict confirmed: import torch and cupy and launch a kernel from each one's own
#      compiled code (torch: libtorch_cuda's kernels; cupy: its precompiled CUB reduction).
# Run from anywhere: bash bench/h200/check_env.sh   (PYTHON=... to pick the interpreter;
# results also go to $OUT when it is set).
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD
PY=${PYTHON:-python3}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' ')
sm="sm_${cap/./}"
echo "== GPU: $(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | head -1) -> $sm"

echo "== check --env for $sm"
"$PY" -m rocm_build_backend check --env "$PY" --targets "$sm" | tee "$OUT/check-env-$sm.txt"
echo "exit ${PIPESTATUS[0]}"
"$PY" -m rocm_build_backend check --env "$PY" --targets "$sm" --json > "$OUT/check-env-$sm.json"

echo "== check --env for sm_70 (older than any target these wheels carry)"
"$PY" -m rocm_build_backend check --env "$PY" --targets sm_70 | tee "$OUT/check-env-sm_70.txt" | tail -25
echo "exit ${PIPESTATUS[0]}"

echo "== time: check --env against reading the files with device code once"
"$PY" bench/bench_check_env.py --python "$PY" --targets "$sm" --repeat 5 --json "$OUT/bench-check-env.json"

echo "== the verdict, confirmed by launching kernels"
"$PY" - <<'PYEOF' 2>&1 | tee "$OUT/launch.txt"
import torch
x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
torch.cuda.synchronize()
print("torch", torch.__version__, torch.cuda.get_device_name(0), "arch list", torch.cuda.get_arch_list(),
      "sum", float((x * 2).sum()))
import cupy
a = cupy.arange(1 << 20, dtype=cupy.float32)
print("cupy", cupy.__version__, "sum (precompiled CUB)", float(a.sum()),
      "elementwise (NVRTC)", int(cupy.ElementwiseKernel("int32 x", "int32 y", "y = x + 1", "inc")(cupy.arange(8, dtype=cupy.int32)).sum()))
PYEOF
echo "results in $OUT"
