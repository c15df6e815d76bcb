#!/usr/bin/env bash
# Thin cupy-cuda13x to sm_90 and to sm_80 on an H200 (sm_90) and record what really loads.
#
#   bash bench/h200/thin_cupy.sh [FAT_WHEEL]        (from the repository root, on the H200)
#
# FAT_WHEEL: a cupy-cuda13x wheel for this machine's Python. Without it, the installed
# cupy-cuda13x is packed back into a wheel from its RECORD (the machine cannot download).
# For each of fat, sm_90 and sm_80: `check --targets sm_90` (its prediction), then the wheel
# is installed with --no-deps into a venv that sees the system site-packages (numpy, the CUDA
# libraries), and bench/h200/test_cupy_gpu.py (sort/argsort/lexsort through thrust, cub
# reductions, the random generator, one NVRTC kernel) runs; CUPY_TESTS=<cupy's tests folder>
# adds a subset of cupy's own tests. Expected: fat and sm_90 pass the same; sm_80 is
# predicted to fail (exit 1) and its thrust/cub/random kernels fail with "no kernel image is
# available for execution on the device". Everything goes to $OUT (default /tmp/thin_cupy);
# results.txt is the record.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/thin_cupy}
PY=${PYTHON:-python3}
export PYTHONPATH=$ROOT
mkdir -p "$OUT"
LOG=$OUT/results.txt
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }
rbb() { "$PY" -m rocm_build_backend "$@"; }

say "== $(date -u) $(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>&1)"
FAT=${1:-}
if [ -z "$FAT" ]; then
  FAT=$("$PY" "$ROOT/bench/h200/repack_installed.py" cupy-cuda13x "$OUT/fat") || { say "cannot repack cupy-cuda13x"; exit 3; }
  say "fat wheel packed from the installed cupy-cuda13x: $FAT"
fi
rbb audit "$FAT" | tail -3 | tee -a "$LOG"
for t in sm_90 sm_80; do
  rm -rf "$OUT/$t"
  rbb thin "$FAT" --targets "$t" --outdir "$OUT/$t" | tail -2 | tee -a "$LOG"
done
declare -A WHEEL=([fat]="$FAT" [sm_90]="$(ls "$OUT"/sm_90/*.whl)" [sm_80]="$(ls "$OUT"/sm_80/*.whl)")
for v in fat sm_90 sm_80; do
  say ""
  say "== $v: ${WHEEL[$v]##*/}"
  rbb check "${WHEEL[$v]}" --targets sm_90 > "$OUT/check_$v.txt" 2>&1
  say "check --targets sm_90: exit $? ($(tail -1 "$OUT/check_$v.txt"))"
  rm -rf "$OUT/venv_$v"
  "$PY" -m venv --system-site-packages "$OUT/venv_$v"
  # the machine's python is itself a venv (numpy, the CUDA libraries): a .pth makes its packages
  # visible after the new venv's own (--system-site-packages only reaches the base Python)
  "$PY" -c "import site; print(site.getsitepackages()[0])" > "$(ls -d "$OUT/venv_$v"/lib/python3*/site-packages)/_outer_env.pth"
  "$OUT/venv_$v/bin/python" -m pip install -q --no-deps --no-index --force-reinstall "${WHEEL[$v]}" >> "$LOG" 2>&1
  VPY="$OUT/venv_$v/bin/python"
  (cd "$OUT" && "$VPY" -c "import cupy, os; print('cupy from', os.path.dirname(cupy.__file__))") | tee -a "$LOG"
  (cd "$OUT" && "$VPY" -c "
import cupy
try:
    x = cupy.sort(cupy.arange(1000, dtype=cupy.float32)[::-1]); cupy.cuda.Device().synchronize()
    print('kernel launch (thrust sort): ok', float(x[0]), float(x[-1]))
except Exception as e:
    print('kernel launch (thrust sort): FAILED:', type(e).__name__, e)
") 2>&1 | tee -a "$LOG"
  (cd "$OUT" && PYTHONPATH= "$VPY" -m pytest -q -p no:cacheprovider "$ROOT/bench/h200/test_cupy_gpu.py" 2>&1 | tail -15) | tee -a "$LOG"
  if [ -n "${CUPY_TESTS:-}" ]; then
    (cd "$CUPY_TESTS/.." && PYTHONPATH= "$VPY" -m pytest -q -p no:cacheprovider -x \
       "$CUPY_TESTS/cupy_tests/sorting_tests/test_sort.py" \
       "$CUPY_TESTS/cupy_tests/random_tests/test_generator_api.py" 2>&1 | tail -5) | tee -a "$LOG"
  fi
done
say ""
say "sizes (wheel bytes): fat $(stat -c %s "$FAT"), sm_90 $(stat -c %s "${WHEEL[sm_90]}"), sm_80 $(stat -c %s "${WHEEL[sm_80]}")"
