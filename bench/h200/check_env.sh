#!/usr/bin/env bash
# `check --env` on the H200 machine, whose Python has torch 2.11+cu130 and cupy-cuda13x:
#   1. the verdict for this GPU (sm_XY from nvidia-smi) and for a GPU the wheels do not serve;
#   2. its time against reading the files with device code once (bench/bench_check_env.py);
#   3. the verdict confirmed: import torch and cupy and launch a kernel from each one's own
#      compiled code (torch: libtorch_cuda's kernels; cupy: its precompiled CUB reduction), and
#      from NVIDIA's libraries whose kernel modules are per GPU (cuBLAS/cuBLASLt: matmul, cuDNN:
#      conv2d, cuFFT: fft, cuSPARSE: sparse matmul), each result checked on the CPU, with the
#      libraries the process mapped listed.
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

echo "== check --env --strict for $sm (every kernel module must have code for it)"
"$PY" -m rocm_build_backend check --env "$PY" --targets "$sm" --strict > "$OUT/check-env-$sm-strict.txt"
echo "exit $?"
grep -E "^nvidia|^torch|^cupy" "$OUT/check-env-$sm-strict.txt" | cut -c1-200 | head -20

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
torch.manual_seed(0)
a, b = torch.rand(512, 512, device="cuda"), torch.rand(512, 512, device="cuda")
print("cuBLAS matmul (fp32, fp16, bf16) equals CPU:",
      all(torch.allclose((a.to(t) @ b.to(t)).float().cpu(), a.cpu() @ b.cpu(), rtol=5e-2, atol=5e-1)
          for t in (torch.float32, torch.float16, torch.bfloat16)))
x, w = torch.rand(8, 16, 32, 32, device="cuda"), torch.rand(32, 16, 3, 3, device="cuda")
torch.backends.cudnn.enabled = True
print("cuDNN conv2d equals CPU:", torch.allclose(torch.nn.functional.conv2d(x, w).cpu(),
      torch.nn.functional.conv2d(x.cpu(), w.cpu()), rtol=1e-3, atol=1e-3), "cudnn", torch.backends.cudnn.version())
s = torch.rand(4096, device="cuda")
print("cuFFT fft equals CPU:", torch.allclose(torch.fft.fft(s).cpu(), torch.fft.fft(s.cpu()), rtol=1e-3, atol=1e-2))
m = torch.rand(256, 256, device="cuda")
m[m < 0.9] = 0
print("cuSPARSE sparse matmul equals dense:", torch.allclose((m.to_sparse_csr() @ b[:256]).cpu(), (m @ b[:256]).cpu(),
      rtol=1e-3, atol=1e-3))
torch.cuda.synchronize()
import re
libs = sorted({re.sub(r".*/", "", l.split()[-1]) for l in open("/proc/self/maps") if "/nvidia/" in l and ".so" in l})
print("NVIDIA libraries mapped:", ", ".join(libs))
PYEOF
echo "results in $OUT"
