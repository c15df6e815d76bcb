#!/usr/bin/env bash
# Zero configuration on a GPU machine, as a CI runner would build: two real torch-extension sdists
# whose setup.py builds CUDA code only when torch.cuda.is_available() (or FORCE_CUDA=1, the
# project's own switch), built from the sdist file with the GPU hidden (CUDA_VISIBLE_DEVICES=),
# TORCH_CUDA_ARCH_LIST unset, --targets sm_90, no build isolation (rocm-build-backend build takes
# the sdist file, unpacks it into a temporary folder and wraps its declared backend, unedited);
# nothing set for the project. Then the wheel's audit must say sm_90 and nothing else, and, with
# the GPU visible again, its kernels must equal the CPU's.
#
#   bash bench/h200/zero_config.sh scatter   # torch-scatter 2.1.2: scatter sum/mean/max/min, segment_csr
#   bash bench/h200/zero_config.sh cluster   # torch-cluster 1.6.3: knn, radius, fps, grid_cluster
#   bash bench/h200/zero_config.sh report    # zero-config-report.md: both, side by side
#
# Each mode is one device call of at most 10 minutes (the build is cut off at LIMIT, default 480 s:
# exit 124; it is not resumed, the sdist is unpacked afresh each call). Results go to $OUT (default
# out/h200/zero-config, git-ignored): per mode the plan (which switches the shim applies, with
# file and line), the build log, the audit, the stamp, the GPU test, and one line in
# zero-config-summary.txt.
#
# The projects' guards (both setup.py files, read from the sdists):
#   torch_scatter-2.1.2  setup.py L18 `if torch.cuda.is_available():` -> WITH_CUDA; L21
#                        FORCE_CUDA=1 builds the CUDA extensions (and the CPU ones) anyway
#   torch_cluster-1.6.3  setup.py L18 the same guard; L22 FORCE_CUDA=1
# With the GPU hidden, torch.cuda.is_available() is False: unless the shim applies FORCE_CUDA=1
# (issue 30 item 1) the build comes out CPU-only and the shim's audit stops it (exit 1), naming
# FORCE_CUDA. USER_SWITCH=1 exports FORCE_CUDA=1 as a user would (a value the user gives wins):
# it proves the rest of the path without item 1.
#
# Needs (no network): python3 with torch 2.11 (CUDA 13.0), setuptools, wheel, packaging,
# pyproject-hooks; nvcc (/usr/local/cuda/bin); the two sdists in carry/ (CARRY), 162,595 bytes in
# all, checked against these sha256s:
#   torch_scatter-2.1.2.tar.gz  108,045 bytes  69b3aa435f2424ac6a1bfb6ff702da6eb73b33ca0db38fb26989c74159258e47
#   torch_cluster-1.6.3.tar.gz   54,550 bytes  78d5a930a5bbd0d8788df8c6d66addd68d6dd292fe3edb401e3dacba26308152
# Fetched on a machine with an index, in an environment where torch imports (pip prepares the
# sdists' metadata, which runs their setup.py, which imports torch):
#   pip download --no-deps --no-binary :all: --no-build-isolation --dest carry torch-scatter==2.1.2 torch-cluster==1.6.3
set -uo pipefail
mode=${1:?"scatter | cluster | report"}
repo=$(cd "$(dirname "$0")/../.." && pwd)
carry=${CARRY:-$repo/carry}
out=${OUT:-$repo/out/h200/zero-config}
state=$repo/out/h200/zero-config-state
mkdir -p "$out" "$state"
out=$(cd "$out" && pwd)
note() { echo "$*" | tee -a "$out/zero-config-summary.txt"; }

if [ "$mode" = report ]; then
  python3 - "$state" <<'EOF' | tee "$out/zero-config-report.md"
import json, sys
from pathlib import Path
state = Path(sys.argv[1])
print("| sdist | build | wall s | CPU s | wheel's audit | sm_90 only | kernels equal the CPU | switches applied |")
print("|---|---|---|---|---|---|---|---|")
for mode in ("scatter", "cluster"):
    f = state / mode / "result.json"
    if not f.is_file():
        print(f"| {mode} | not run | | | | | | |")
        continue
    r = json.loads(f.read_text())
    print(f"| {r['sdist']} | rc {r['rc']} | {r.get('wall', 0):.1f} | {r.get('cpu', 0):.1f} | "
          f"{' '.join(r.get('audit', [])) or '-'} | {r.get('only_sm_90')} | {r.get('kernels')} | "
          f"{'; '.join(r.get('applied', [])) or '-'} |")
EOF
  exit 0
fi
case "$mode" in
  scatter) SDIST=torch_scatter-2.1.2.tar.gz SHA256=69b3aa435f2424ac6a1bfb6ff702da6eb73b33ca0db38fb26989c74159258e47 ;;
  cluster) SDIST=torch_cluster-1.6.3.tar.gz SHA256=78d5a930a5bbd0d8788df8c6d66addd68d6dd292fe3edb401e3dacba26308152 ;;
  *) echo "unknown mode $mode: scatter | cluster | report" >&2; exit 2 ;;
esac
[ -f "$carry/$SDIST" ] || { echo "missing $carry/$SDIST (carry it; see the header for the pip download command)" >&2; exit 2; }
got=$(sha256sum "$carry/$SDIST" | cut -d' ' -f1)
[ "$got" = "$SHA256" ] || { echo "$SDIST sha256 $got is not the pinned $SHA256" >&2; exit 2; }

work=$state/$mode
rm -rf "$work" && mkdir -p "$work/wheel"
log=$out/$mode-log.txt
: >"$log"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_NO_INDEX=1
export XDG_CACHE_HOME="$work/xdg"
unset TORCH_CUDA_ARCH_LIST CUDAARCHS NVCC_APPEND_FLAGS CMAKE_ARGS PYTORCH_ROCM_ARCH ROCM_BUILD_BACKEND_TARGETS MAX_JOBS
unset FORCE_CUDA FORCE_ONLY_CUDA FORCE_ONLY_CPU WITH_CUDA NVCC_FLAGS
[ "${USER_SWITCH:-0}" = 1 ] && export FORCE_CUDA=1
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
visible=${CUDA_VISIBLE_DEVICES-__unset__}

# the build machine's view: no GPU
hidden=$(CUDA_VISIBLE_DEVICES= python3 -c "import torch; print(torch.cuda.is_available())" 2>>"$log")
note "$mode: with CUDA_VISIBLE_DEVICES= torch.cuda.is_available() = $hidden (want False)$( [ "${USER_SWITCH:-0}" = 1 ] && echo '; USER_SWITCH=1: FORCE_CUDA=1 given by hand')"
CUDA_VISIBLE_DEVICES= python3 -m rocm_build_backend plan "$carry/$SDIST" --targets sm_90 --json \
  >"$out/$mode-plan.json" 2>>"$log"
CUDA_VISIBLE_DEVICES= python3 -m rocm_build_backend plan "$carry/$SDIST" --targets sm_90 \
  >"$out/$mode-plan.txt" 2>>"$log"
grep -i "switch" "$out/$mode-plan.txt" | head -12 | tee -a "$out/zero-config-summary.txt"

# the build: the sdist file, the GPU hidden, sm_90 named, no isolation, nothing else given
CUDA_VISIBLE_DEVICES= python3 "$repo/bench/h200/timed.py" --state "$work/timed.json" --limit "${LIMIT:-480}" -- \
  python3 -m rocm_build_backend build "$carry/$SDIST" --targets sm_90 -o "$work/wheel" --json \
  >"$work/build.json" 2>>"$log"
rc=$?
tail -2 "$log" | sed "s/^/$mode: /" | tee -a "$out/zero-config-summary.txt"
[ $rc = 124 ] && note "$mode: cut off at ${LIMIT:-480} s"
grep "rocm-build-backend:" "$log" | sed 's/^ *//' >"$out/$mode-shim-lines.txt"
wheel=$(ls "$work"/wheel/*.whl 2>/dev/null | head -1)

kernels=not-run
if [ $rc = 0 ] && [ -n "$wheel" ]; then
  python3 -m rocm_build_backend audit "$wheel" >"$out/$mode-audit.txt" 2>&1
  python3 -m rocm_build_backend audit "$wheel" --json >"$work/audit.json" 2>>"$log"
  python3 - "$wheel" >"$out/$mode-stamp.json" <<'EOF'
import json, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    print(json.dumps(json.loads(next(z.read(n) for n in z.namelist() if n.endswith(".dist-info/rocm_build.json"))), indent=1))
EOF
  site=$work/site
  python3 -m pip install --no-deps --no-index --target "$site" "$wheel" >>"$log" 2>&1
  # the GPU visible again (as it was when the script started)
  if [ "$visible" = __unset__ ]; then unset CUDA_VISIBLE_DEVICES; else export CUDA_VISIBLE_DEVICES="$visible"; fi
  PYTHONPATH="$site:$PYTHONPATH" python3 - "$mode" <<'EOF' 2>&1 | tee "$out/$mode-gpu-test.txt"
import sys
import torch
mode = sys.argv[1]
torch.manual_seed(0)
ok = True
def same(what, a, b):
    global ok
    ok &= bool(a)
    print(f"{what}: {b}: {bool(a)}")
assert torch.cuda.is_available(), "the GPU is not visible for the kernel test"
if mode == "scatter":
    import torch_scatter
    src = torch.rand(100_000, 16, device="cuda")
    index = torch.randint(0, 1000, (100_000,), device="cuda")
    for reduce in ("sum", "mean", "max", "min"):
        gpu = torch_scatter.scatter(src, index, dim=0, reduce=reduce)
        cpu = torch_scatter.scatter(src.cpu(), index.cpu(), dim=0, reduce=reduce)
        same(f"scatter {reduce}", torch.allclose(gpu.cpu(), cpu, rtol=1e-5, atol=1e-5), "GPU equals CPU")
    ptr = torch.tensor([0, 10, 10, 50, 100], device="cuda")
    gpu = torch_scatter.segment_csr(src[:100], ptr, reduce="sum")
    cpu = torch_scatter.segment_csr(src[:100].cpu(), ptr.cpu(), reduce="sum")
    same("segment_csr sum", torch.allclose(gpu.cpu(), cpu, rtol=1e-5, atol=1e-5), "GPU equals CPU")
else:
    import torch_cluster
    x, y = torch.randn(2000, 3), torch.randn(300, 3)
    pairs = lambda e: sorted(map(tuple, e.t().tolist()))
    same("knn k=8", pairs(torch_cluster.knn(x, y, 8)) == pairs(torch_cluster.knn(x.cuda(), y.cuda(), 8).cpu()),
         "GPU equals CPU")
    same("radius r=0.5", pairs(torch_cluster.radius(x, y, 0.5, max_num_neighbors=2000))
         == pairs(torch_cluster.radius(x.cuda(), y.cuda(), 0.5, max_num_neighbors=2000).cpu()), "GPU equals CPU")
    # fps starts at a random point unless told not to: a fixed start on both devices
    pos = torch.randn(500, 3)
    cpu = torch_cluster.fps(pos, ratio=0.25, random_start=False)
    gpu = torch_cluster.fps(pos.cuda(), ratio=0.25, random_start=False).cpu()
    same("fps ratio=0.25", torch.equal(cpu, gpu), "GPU equals CPU")
    size = torch.tensor([0.5, 0.5, 0.5])
    cpu = torch_cluster.grid_cluster(pos, size)
    gpu = torch_cluster.grid_cluster(pos.cuda(), size.cuda()).cpu()
    same("grid_cluster", torch.equal(cpu, gpu), "GPU equals CPU")
print(mode, "kernels on", torch.cuda.get_device_name(0), "all correct:", ok)
raise SystemExit(0 if ok else 1)
EOF
  [ "${PIPESTATUS[0]}" = 0 ] && kernels=yes || kernels=no
else
  note "$mode: no wheel (rc=$rc): $(grep -E '^(error|hint): ' "$log" | tail -2 | tr '\n' ' ')"
fi

python3 - "$work" "$SDIST" "$rc" "$kernels" "$out/$mode-plan.json" <<'EOF' | tee -a "$out/zero-config-summary.txt"
import json, sys
from pathlib import Path
work, sdist, rc, kernels, plan = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], Path(sys.argv[5])
r = {"sdist": sdist, "rc": rc, "kernels": kernels}
timed = work / "timed.json"
if timed.is_file():
    t = json.loads(timed.read_text())
    r.update(wall=t["wall"], cpu=t["cpu"])
audit = work / "audit.json"
if audit.is_file():
    a = json.loads(audit.read_text())
    r["audit"] = a["targets"]
    r["only_sm_90"] = bool(a["targets"]) and set(a["targets"]) == {"sm_90"} and all(
        set(f["targets"]) <= {"sm_90"} for f in a["files"])
try:
    p = json.loads(plan.read_text())
    r["applied"] = [f"{s['file']} L{s['line']} {s['name']}: {s['detail']}" for s in p.get("switches", [])
                    if s.get("action") == "set" and s.get("role") == "gpu-on"]
except (OSError, ValueError, KeyError, TypeError):
    r["applied"] = []
(work / "result.json").write_text(json.dumps(r, indent=1))
print(f"{r['sdist']}: build rc {rc}, wall {r.get('wall', 0):.1f} s, CPU {r.get('cpu', 0):.1f} s, audit "
      f"{' '.join(r.get('audit', [])) or '-'}, sm_90 only {r.get('only_sm_90')}, kernels equal the CPU {kernels}, "
      f"switches applied {r['applied'] or 'none'}")
EOF
cp "$work/result.json" "$out/$mode-result.json"
[ $rc = 0 ] && [ "$kernels" = yes ] && python3 -c "import json,sys; sys.exit(0 if json.load(open('$work/result.json')).get('only_sm_90') else 1)"
