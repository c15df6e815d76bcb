#!/usr/bin/env bash
# Every core on a GPU machine: torch-cluster 1.6.3 from its sdist (18 extensions: 9 sources x cpu and
# cuda, made in a loop, built by torch's BuildExtension with use_ninja=False, one file at a time),
# through the shim with targets = auto.
#
#   bash bench/h200/parallel.sh parallel  # the shim's plan: setuptools' parallel build_ext, within the job budget
#   bash bench/h200/parallel.sh serial    # the same with [build_ext] parallel = 1 in the user's DIST_EXTRA_CONFIG
#   bash bench/h200/parallel.sh report    # wall time, CPU time, CPU / wall / cores, the ratio
#
# Each mode is one device call of at most 10 minutes (LIMIT, default 560 s, for the build); a build
# cut off at the limit exits 124 and resumes on the next call of the same mode (setuptools skips the
# extensions it built; the tree and the times are kept under out/h200/parallel/, git-ignored).
# Results go to $OUT (default out/h200/results). Needs: the sdist in carry/ (CARRY), python3 with a
# CUDA torch, setuptools; nvcc; no network.
set -uo pipefail
mode=${1:?"parallel | serial | report"}
repo=$(cd "$(dirname "$0")/../.." && pwd)
carry=${CARRY:-$repo/carry}
out=${OUT:-$repo/out/h200/results}
state=$repo/out/h200/parallel
SDIST=torch_cluster-1.6.3.tar.gz
SHA256=78d5a930a5bbd0d8788df8c6d66addd68d6dd292fe3edb401e3dacba26308152
mkdir -p "$out" "$state"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_NO_INDEX=1
export XDG_CACHE_HOME="$state/xdg"
unset TORCH_CUDA_ARCH_LIST CUDAARCHS NVCC_APPEND_FLAGS CMAKE_ARGS PYTORCH_ROCM_ARCH ROCM_BUILD_BACKEND_TARGETS MAX_JOBS DIST_EXTRA_CONFIG
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
note() { echo "$*" | tee -a "$out/parallel-summary.txt"; }

if [ "$mode" = report ]; then
  python3 - "$state" <<'EOF' | tee "$out/parallel-report.md"
import json, sys
from pathlib import Path
state = Path(sys.argv[1])
rows = {m: json.loads((state / m / "state.json").read_text()) for m in ("serial", "parallel")
        if (state / m / "state.json").is_file()}
print("| build | wall s | CPU s | CPU / wall / cores | done | x serial |")
print("|---|---|---|---|---|---|")
base = rows.get("serial", {}).get("wall")
for mode, s in rows.items():
    ratio = f"{s['wall'] / base:.2f}" if base else "-"
    print(f"| {mode} | {s['wall']:.1f} | {s['cpu']:.1f} | {s['cpu'] / s['wall'] / s['cores']:.0%} | "
          f"{'yes' if s.get('done') else 'no (cut off)'} | {ratio} |")
EOF
  exit 0
fi
case "$mode" in parallel|serial) ;; *) echo "unknown mode $mode: parallel | serial | report" >&2; exit 2 ;; esac
[ -f "$carry/$SDIST" ] || { echo "missing $carry/$SDIST (carry it)" >&2; exit 2; }
got=$(sha256sum "$carry/$SDIST" | cut -d' ' -f1)
[ "$got" = "$SHA256" ] || { echo "$SDIST sha256 $got is not the pinned $SHA256" >&2; exit 2; }

work=$state/$mode
tree=$work/torch_cluster-1.6.3
if [ ! -f "$tree/setup.py" ]; then
  rm -rf "$work" && mkdir -p "$work" && tar xzf "$carry/$SDIST" -C "$work"
  (cd "$tree" && python3 -m rocm_build_backend configure .) >> "$out/parallel-$mode-log.txt" 2>&1
fi
if [ "$mode" = serial ]; then
  printf '[build_ext]\nparallel = 1\n' > "$work/serial.cfg"
  export DIST_EXTRA_CONFIG="$work/serial.cfg"
fi
(cd "$tree" && python3 -m rocm_build_backend plan . --json) > "$out/parallel-$mode-plan.json" 2>>"$out/parallel-$mode-log.txt"
rm -rf "$work/wheel"
(cd "$tree" && python3 "$repo/bench/h200/timed.py" --state "$work/state.json" --limit "${LIMIT:-560}" -- \
   python3 -m pip wheel --no-build-isolation --no-deps -v -w "$work/wheel" .) >> "$out/parallel-$mode-log.txt" 2>&1
rc=$?
tail -1 "$out/parallel-$mode-log.txt"
if [ $rc = 124 ]; then
  note "$mode: cut off at ${LIMIT:-560} s this call; run 'bash bench/h200/parallel.sh $mode' again to resume"
  exit 124
fi
grep "rocm-build-backend:" "$out/parallel-$mode-log.txt" | sed 's/^ *//' > "$out/parallel-$mode-shim-lines.txt"
wheel=$(ls "$work"/wheel/*.whl 2>/dev/null | head -1)
[ $rc = 0 ] && [ -n "$wheel" ] || { note "$mode: build failed rc=$rc (see parallel-$mode-log.txt)"; exit 1; }
python3 -m rocm_build_backend audit "$wheel" > "$out/parallel-$mode-audit.txt" 2>&1
python3 - "$wheel" "$work/state.json" "$mode" <<'EOF' | tee -a "$out/parallel-summary.txt"
import json, sys, zipfile
wheel, state, mode = sys.argv[1:]
s = json.load(open(state))
with zipfile.ZipFile(wheel) as z:
    sos = [i for i in z.infolist() if i.filename.endswith(".so")]
    stamp = json.loads(next(z.read(n) for n in z.namelist() if n.endswith("/rocm_build.json")))
print(f"{mode}: wall {s['wall']:.1f} s over {s['calls']} call(s), CPU {s['cpu']:.1f} s, "
      f"CPU/wall/cores {s['cpu'] / s['wall'] / s['cores']:.0%} of {s['cores']}; {len(sos)} .so files; "
      f"wheel targets {' '.join(stamp['audit']['targets'])}")
EOF
grep -E "build_ext parallel|MAX_JOBS=" "$out/parallel-$mode-shim-lines.txt" | head -2 | tee -a "$out/parallel-summary.txt"
[ "$mode" != parallel ] && exit 0

# the kernels run: knn on the GPU equals knn on the CPU
site=$work/site
rm -rf "$site" && python3 -m pip install --no-deps --no-index --target "$site" "$wheel" > /dev/null
PYTHONPATH="$site:$PYTHONPATH" python3 - <<'EOF' 2>&1 | tee "$out/parallel-gpu-test.txt"
import torch
import torch_cluster
torch.manual_seed(0)
x = torch.randn(2000, 3)
y = torch.randn(300, 3)
cpu = torch_cluster.knn(x, y, 8)
gpu = torch_cluster.knn(x.cuda(), y.cuda(), 8).cpu()
same = sorted(map(tuple, cpu.t().tolist())) == sorted(map(tuple, gpu.t().tolist()))
print("knn on", torch.cuda.get_device_name(0), "equals knn on the CPU:", same)
raise SystemExit(0 if same else 1)
EOF
