#!/usr/bin/env bash
# Thinned wheels whose libraries were compacted (the freed device code cut out of each file, the
# default of `thin`), against the in-place rewrite (--keep-layout) and the fat original, on an
# NVIDIA GPU: what each installs to, and whether its kernels still run and give the CPU's answer.
#
#   OUT=/some/dir bash bench/h200/thin_installed.sh        (from the repository root, on the H200)
#
# Nothing is carried: nvidia-cusparse 12.6.3.3 (torch 2.11+cu130's) and cupy-cuda13x 14.2.0 are
# repacked from this machine's environment into wheels (bench/h200/repack_installed.py). For
# each distribution and each variant (fat, sm_90 compacted, sm_90 --keep-layout):
#   - wheel size, installed size (sum of the files RECORD lists), `audit` of the wheel and
#     `check --targets sm_90`;
#   - the wheel installed with --no-deps into its own venv that sees the machine's packages;
#   - cuSPARSE: bench/h200/test_cusparse_gpu.py (torch CSR SpMM/SpMV, COO mm, cupyx SpMV, each
#     equal to the CPU) with the venv's libcusparse.so.12 preloaded; the test proves from
#     /proc/self/maps that this file, and no other cuSPARSE, ran;
#   - cupy: bench/h200/test_cupy_gpu.py (thrust sort, cub reductions, the random generator) with
#     the venv's cupy first on the path.
# Expected: every variant passes the same tests; sm_90 compacted installs far smaller than fat
# and --keep-layout. Everything goes to $OUT (default /tmp/thin_installed); results.txt is the record.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/thin_installed}
PY=${PYTHON:-python3}
export PYTHONPATH=$ROOT
mkdir -p "$OUT"
LOG=$OUT/results.txt
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }
rbb() { "$PY" -m rocm_build_backend "$@"; }
installed() {  # the bytes of every file the venv's RECORD of $2 lists
  "$1" -c "
import sys
from importlib import metadata
d = metadata.distribution(sys.argv[1])
print(sum((d.locate_file(f)).stat().st_size for f in d.files or [] if d.locate_file(f).is_file()))" "$2"
}

say "== $(date -u) $(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>&1)"
say "python $("$PY" -c 'import sys; print(sys.version.split()[0])'), torch $("$PY" -c 'import torch; print(torch.__version__)' 2>&1)"
for dist in nvidia-cusparse cupy-cuda13x; do
  say ""
  say "=== $dist $("$PY" -c "from importlib import metadata; print(metadata.version('$dist'))" 2>&1)"
  FAT=$("$PY" "$ROOT/bench/h200/repack_installed.py" "$dist" "$OUT/$dist/fat") || { say "cannot repack $dist"; continue; }
  rm -rf "$OUT/$dist/sm_90" "$OUT/$dist/sm_90-keep"
  rbb thin "$FAT" --targets sm_90 --outdir "$OUT/$dist/sm_90" --json > "$OUT/$dist/thin-sm_90.json" 2>>"$LOG"
  rbb thin "$FAT" --targets sm_90 --keep-layout --outdir "$OUT/$dist/sm_90-keep" --json > "$OUT/$dist/thin-sm_90-keep.json" 2>>"$LOG"
  for v in fat sm_90 sm_90-keep; do
    WHEEL=$(ls "$OUT/$dist/$v"/*.whl)
    say ""
    say "== $dist $v: ${WHEEL##*/} ($(stat -c %s "$WHEEL") bytes)"
    rbb audit "$WHEEL" > "$OUT/$dist/audit-$v.txt" 2>&1; say "audit: exit $? ($(grep '^targets:' "$OUT/$dist/audit-$v.txt"))"
    rbb check "$WHEEL" --targets sm_90 > "$OUT/$dist/check-$v.txt" 2>&1; say "check --targets sm_90: exit $?"
    VENV="$OUT/$dist/venv-$v"
    rm -rf "$VENV"
    "$PY" -m venv --system-site-packages "$VENV"
    "$PY" -c "import site; print(site.getsitepackages()[0])" > "$(ls -d "$VENV"/lib/python3*/site-packages)/_outer_env.pth"
    "$VENV/bin/python" -m pip install -q --no-deps --no-index --force-reinstall "$WHEEL" >> "$LOG" 2>&1
    say "installed: $(installed "$VENV/bin/python" "$dist") bytes"
    if [ "$dist" = nvidia-cusparse ]; then
      LIB=$(ls "$VENV"/lib/python3*/site-packages/nvidia/cu*/lib/libcusparse.so.12)
      say "libcusparse.so.12: $(stat -c %s "$LIB") bytes"
      command -v readelf >/dev/null && readelf -lW "$LIB" > "$OUT/$dist/readelf-l-$v.txt" 2>&1
      # its neighbours (nvJitLink, ...) are the machine's: found through LD_LIBRARY_PATH, which the
      # preloaded cuSPARSE (already loaded under its soname) is not looked up in again
      DEPS=$("$PY" -c "from importlib import metadata; d = metadata.distribution('nvidia-cusparse'); print(next(d.locate_file(f).parent for f in d.files if f.name == 'libcusparse.so.12'))")
      (cd "$OUT" && LD_LIBRARY_PATH="$DEPS:${LD_LIBRARY_PATH:-}" LD_PRELOAD="$LIB" CUSPARSE_UNDER_TEST="$LIB" \
         PYTHONPATH= "$VENV/bin/python" -m pytest -q \
         -p no:cacheprovider "$ROOT/bench/h200/test_cusparse_gpu.py" 2>&1 | tail -8) | tee -a "$LOG"
    else
      for so in cub thrust; do
        F=$(ls "$VENV"/lib/python3*/site-packages/cupy/cuda/$so.*.so)
        say "cupy/cuda/${F##*/}: $(stat -c %s "$F") bytes"
      done
      (cd "$OUT" && PYTHONPATH= "$VENV/bin/python" -c "import cupy, os; print('cupy from', os.path.dirname(cupy.__file__))") 2>&1 | tee -a "$LOG"
      (cd "$OUT" && PYTHONPATH= "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/bench/h200/test_cupy_gpu.py" 2>&1 \
         | tail -8) | tee -a "$LOG"
    fi
  done
done
