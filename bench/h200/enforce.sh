#!/usr/bin/env bash
# Enforcement on a GPU machine: causal-conv1d 1.6.0 from its sdist, through the shim with
# targets = auto (the GPU's own sm_90 is detected; TORCH_CUDA_ARCH_LIST unset). Its setup.py
# (L177-203) passes its own -gencode list: on CUDA 13, sm_75 80 87 90 100 103 110 120 121.
#
#   bash bench/h200/enforce.sh on      # enforce = true: each compile cut to sm_90; audit; the GPU test
#   bash bench/h200/enforce.sh hand    # the list cut to sm_90 by hand in setup.py (the baseline)
#   bash bench/h200/enforce.sh off     # enforce = false: the project's whole list (may need 2-3 calls)
#   bash bench/h200/enforce.sh report  # the table of the three, side by side
#
# Each mode is one device call of at most 10 minutes (LIMIT, default 560 s, for the build); a build
# cut off at the limit stops with exit 124 and resumes where it was on the next call of the same
# mode (the tree and the times are kept under out/h200/enforce/, git-ignored). Results go to $OUT
# (default out/h200/results). Needs: the sdist in carry/ (CARRY), python3 with a CUDA torch,
# setuptools, wheel, ninja; nvcc; no network (CAUSAL_CONV1D_FORCE_BUILD=TRUE: the project's own
# switch, which `plan` names, stops it from downloading a prebuilt wheel first).
set -uo pipefail
mode=${1:?"on | hand | off | report"}
repo=$(cd "$(dirname "$0")/../.." && pwd)
carry=${CARRY:-$repo/carry}
out=${OUT:-$repo/out/h200/results}
state=$repo/out/h200/enforce
SDIST=causal_conv1d-1.6.0.tar.gz
SHA256=4eae3220d08e1e88238f3a0a88783147cbdf47f612cc610add75127c7a37ca3e
mkdir -p "$out" "$state"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_NO_INDEX=1
export XDG_CACHE_HOME="$state/xdg" CAUSAL_CONV1D_FORCE_BUILD=TRUE
unset TORCH_CUDA_ARCH_LIST CUDAARCHS NVCC_APPEND_FLAGS CMAKE_ARGS PYTORCH_ROCM_ARCH ROCM_BUILD_BACKEND_TARGETS MAX_JOBS
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
note() { echo "$*" | tee -a "$out/enforce-summary.txt"; }

if [ "$mode" = report ]; then
  python3 - "$state" <<'EOF' | tee "$out/enforce-report.md"
import json, sys
from pathlib import Path
state = Path(sys.argv[1])
rows = {}
for mode in ("hand", "on", "off"):
    f = state / mode / "state.json"
    if f.is_file():
        rows[mode] = json.loads(f.read_text())
words = {"hand": "sm_90 set by hand in setup.py", "on": "its own list, enforce = true", "off": "its own list, enforce = false"}
print("| build | wall s | CPU s | CPU / wall / cores | done | x hand |")
print("|---|---|---|---|---|---|")
base = rows.get("hand", {}).get("wall")
for mode, s in rows.items():
    ratio = f"{s['wall'] / base:.2f}" if base else "-"
    print(f"| {words[mode]} | {s['wall']:.1f} | {s['cpu']:.1f} | {s['cpu'] / s['wall'] / s['cores']:.0%} | "
          f"{'yes' if s.get('done') else 'no (cut off)'} | {ratio} |")
EOF
  exit 0
fi
case "$mode" in on|hand|off) ;; *) echo "unknown mode $mode: on | hand | off | report" >&2; exit 2 ;; esac
[ -f "$carry/$SDIST" ] || { echo "missing $carry/$SDIST (carry it)" >&2; exit 2; }
got=$(sha256sum "$carry/$SDIST" | cut -d' ' -f1)
[ "$got" = "$SHA256" ] || { echo "$SDIST sha256 $got is not the pinned $SHA256" >&2; exit 2; }

work=$state/$mode
tree=$work/causal_conv1d-1.6.0
if [ ! -f "$tree/pyproject.toml" ]; then
  rm -rf "$work" && mkdir -p "$work" && tar xzf "$carry/$SDIST" -C "$work"
  if [ "$mode" = hand ]; then  # keep only the sm_90 entry of its -gencode list
    python3 - "$tree/setup.py" <<'EOF'
import re, sys
p = sys.argv[1]
text = open(p).read()
pair = re.compile(r'\n(\s*)cc_flag\.append\("-gencode"\)\n\s*cc_flag\.append\("arch=compute_(\d+),code=sm_\d+"\)')
text = pair.sub(lambda m: m.group(0) if m.group(2) == "90" else f"\n{m.group(1)}pass", text)
open(p, "w").write(text)
EOF
    grep -n 'code=sm_' "$tree/setup.py" > "$out/hand-setup-gencode.txt"
  fi
  (cd "$tree" && python3 -m rocm_build_backend configure .) >> "$out/enforce-$mode-log.txt" 2>&1
fi
extra=()
[ "$mode" != on ] && extra=(-C rocm-build-backend.enforce=false)
(cd "$tree" && python3 -m rocm_build_backend plan . --json ${extra[@]+"${extra[@]}"}) > "$out/enforce-$mode-plan.json" 2>>"$out/enforce-$mode-log.txt"
rm -rf "$work/wheel"
(cd "$tree" && python3 "$repo/bench/h200/timed.py" --state "$work/state.json" --limit "${LIMIT:-560}" -- \
   python3 -m pip wheel --no-build-isolation --no-deps -v -w "$work/wheel" . ${extra[@]+"${extra[@]}"}) >> "$out/enforce-$mode-log.txt" 2>&1
rc=$?
tail -1 "$out/enforce-$mode-log.txt"
if [ $rc = 124 ]; then
  note "$mode: cut off at ${LIMIT:-560} s this call; run 'bash bench/h200/enforce.sh $mode' again to resume"
  exit 124
fi
grep "rocm-build-backend:" "$out/enforce-$mode-log.txt" | sed 's/^ *//' > "$out/enforce-$mode-shim-lines.txt"
wheel=$(ls "$work"/wheel/*.whl 2>/dev/null | head -1)
[ $rc = 0 ] && [ -n "$wheel" ] || { note "$mode: build failed rc=$rc (see enforce-$mode-log.txt)"; exit 1; }
python3 -m rocm_build_backend audit "$wheel" > "$out/enforce-$mode-audit.txt" 2>&1
python3 - "$wheel" "$work/state.json" "$mode" <<'EOF' | tee -a "$out/enforce-summary.txt"
import json, sys, zipfile
wheel, state, mode = sys.argv[1:]
s = json.load(open(state))
with zipfile.ZipFile(wheel) as z:
    so = sum(i.file_size for i in z.infolist() if i.filename.endswith(".so"))
    stamp = json.loads(next(z.read(n) for n in z.namelist() if n.endswith("/rocm_build.json")))
print(f"{mode}: wall {s['wall']:.1f} s over {s['calls']} call(s), CPU {s['cpu']:.1f} s, "
      f"CPU/wall/cores {s['cpu'] / s['wall'] / s['cores']:.0%} of {s['cores']}; wheel targets "
      f"{' '.join(stamp['audit']['targets'])}; .so bytes {so}; enforced: {json.dumps(stamp.get('enforced', {}).get('dropped'))}")
EOF
cp "$wheel" "$out/" 2>/dev/null
[ "$mode" != on ] && exit 0

# the GPU test: the enforced wheel holds sm_90 only and its kernel equals the torch reference
site=$work/site
rm -rf "$site" && python3 -m pip install --no-deps --no-index --target "$site" "$wheel" > /dev/null
PYTHONPATH="$site:$PYTHONPATH" python3 - "$wheel" <<'EOF' 2>&1 | tee "$out/enforce-gpu-test.txt"
import json, sys, zipfile
import torch
from causal_conv1d import causal_conv1d_fn
from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref
with zipfile.ZipFile(sys.argv[1]) as z:
    stamp = json.loads(next(z.read(n) for n in z.namelist() if n.endswith("/rocm_build.json")))
only = stamp["audit"]["targets"] == ["sm_90"]
print("wheel holds sm_90 only:", only, stamp["audit"]["targets"])
torch.manual_seed(0)
ok = only
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    for act in (None, "silu"):
        x = torch.randn(2, 64, 512, device="cuda", dtype=dtype)
        w = torch.randn(64, 4, device="cuda", dtype=dtype)
        b = torch.randn(64, device="cuda", dtype=dtype)
        got = causal_conv1d_fn(x, w, b, activation=act)
        ref = causal_conv1d_ref(x, w, b, activation=act)
        tol = 1e-5 if dtype == torch.float32 else 1e-2
        same = torch.allclose(got, ref, rtol=tol, atol=tol)
        ok &= same
        print(f"causal_conv1d_fn {dtype} activation={act}: equals causal_conv1d_ref: {same} "
              f"(max abs diff {(got - ref).abs().max().item():.3g})")
print("on", torch.cuda.get_device_name(0), "all correct:", ok)
raise SystemExit(0 if ok else 1)
EOF
