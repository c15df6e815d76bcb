#!/usr/bin/env bash
# A real project from PyPI with CUDA sources, built from its sdist through the shim, on the GPU
# machine (no network: the sdist is carried there):
#   bash bench/h200/real_sdist.sh SDIST OUTDIR [auto|list|both] [TREE]
# TREE (auto only): where the sdist is unpacked; an existing TREE is reused, so a build cut off by
# a time limit (BUILD_LIMIT seconds, default 540) resumes there: setuptools skips the extensions it
# already built (the shim's freshness check accepts a tree built for the same targets).
# FORCE_ONLY_CUDA=1 (torch-scatter's own switch, setup.py L23) builds its four CUDA extensions
# without the four CPU-only ones, halving a build that compiles one file at a time.
# PARALLEL=N: setuptools' own `build_ext --parallel N` (through DIST_EXTRA_CONFIG, setuptools'
# extra configuration file), so the extensions build side by side; the project's setup.py is
# untouched. The results are packed into OUTDIR/real.tar.gz as well.
# SDIST is torch-scatter 2.1.2 as PyPI serves it (torch_scatter-2.1.2.tar.gz, sha256 below; a
# setup.py project on torch.utils.cpp_extension with three .cu files, no profile of ours):
#   auto  `rocm-build-backend configure` makes it build through the shim, then
#         `pip install . --no-build-isolation` with targets = auto in a venv: the log shows what
#         was detected, the audit and the stamp of what was installed, `check --env`, and its
#         scatter/segment kernels run on the GPU against the CPU result;
#   list  the same sdist built through the shim for torch 2.11's own arch list
#         (7.5;8.0;8.6;9.0;10.0;12.0, as -C rocm-build-backend.targets): time and .so size side
#         by side with the auto build (same machine, same run). torch-scatter builds its eight
#         extensions one file at a time (use_ninja=False), so MAX_JOBS does not speed it up.
set -uo pipefail
sdist=$(cd "$(dirname "${1:?SDIST}")" && pwd)/$(basename "$1")
out=${2:?OUTDIR}
mode=${3:-both}
tree=${4:-}
mkdir -p "$out"
out=$(cd "$out" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
SHA256=69b3aa435f2424ac6a1bfb6ff702da6eb73b33ca0db38fb26989c74159258e47
LIST="sm_75;sm_80;sm_86;sm_90;sm_100;sm_120"  # torch 2.11's TORCH_CUDA_ARCH_LIST 7.5;8.0;8.6;9.0;10.0;12.0
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
unset TORCH_CUDA_ARCH_LIST CUDAARCHS NVCC_APPEND_FLAGS CMAKE_ARGS PYTORCH_ROCM_ARCH ROCM_BUILD_BACKEND_TARGETS
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
log="$out/log.txt"
summary="$out/summary.txt"
: >"$log"
note() { echo "$*" | tee -a "$summary"; }
run() { echo "\$ $*" >>"$log"; "$@" >>"$log" 2>&1; local rc=$?; echo "rc=$rc" >>"$log"; return $rc; }

if [ -n "${PARALLEL:-}" ]; then
  printf '[build_ext]\nparallel = %s\n' "$PARALLEL" >"$out/parallel.cfg"
  export DIST_EXTRA_CONFIG="$out/parallel.cfg"
  note "setuptools build_ext parallel = $PARALLEL (DIST_EXTRA_CONFIG)"
fi
got=$(sha256sum "$sdist" | cut -d' ' -f1)
[ "$got" = "$SHA256" ] || { note "sdist sha256 $got is not the pinned $SHA256"; exit 2; }

venv=$(mktemp -d)/venv  # outside OUTDIR: a venv's thousands of files are no result
rm -rf "$venv"
python3 -m venv --system-site-packages "$venv"
# the machine's python3 is itself a venv (torch): a .pth makes its packages visible in this one
python3 -c "import site; print(site.getsitepackages()[0])" > "$(ls -d "$venv"/lib/python3*/site-packages)/_outer_env.pth"
py="$venv/bin/python"

fresh_tree() {  # a new copy of the sdist's tree, configured to build through the shim
  local dir
  dir=$(mktemp -d)
  tar xzf "$sdist" -C "$dir"
  dir="$dir/torch_scatter-2.1.2"
  (cd "$dir" && run "$py" -m rocm_build_backend configure .) || return 1
  echo "$dir"
}
so_bytes() { python3 - "$1" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    print(sum(i.file_size for i in z.infolist() if i.filename.endswith(".so")))
EOF
}

if [ "$mode" != list ]; then
  if [ -n "$tree" ] && [ -f "$tree/torch_scatter-2.1.2/pyproject.toml" ]; then
    src="$tree/torch_scatter-2.1.2"
    note "auto: resuming in $src"
  elif [ -n "$tree" ]; then
    mkdir -p "$tree" && tar xzf "$sdist" -C "$tree" && src="$tree/torch_scatter-2.1.2"
    (cd "$src" && run "$py" -m rocm_build_backend configure .) || { note "configure failed"; exit 1; }
  else
    src=$(fresh_tree) || { note "configure failed"; exit 1; }
  fi
  cp "$src/pyproject.toml" "$out/pyproject-after-configure.toml"
  start=$(date +%s.%N)
  (cd "$src" && run timeout "${BUILD_LIMIT:-540}" "$py" -m pip install --no-build-isolation --no-deps -v .)
  rc=$?
  [ $rc = 124 ] && { note "auto: cut off after ${BUILD_LIMIT:-540} s; run again with the same TREE to resume"; exit 124; }
  secs=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  note "auto: pip install . --no-build-isolation rc=$rc seconds=$secs"
  grep "rocm-build-backend:" "$log" | sed 's/^ *//' | sort -u >"$out/shim-lines.txt"
  grep -E "rocm-build-backend: (targets|audit|stamped|compiler)" "$out/shim-lines.txt" | tee -a "$summary"
  dist=$(ls -d "$venv"/lib/python3*/site-packages/torch_scatter-2.1.2.dist-info)
  cp "$dist/rocm_build.json" "$out/stamp.json" 2>>"$log"
  "$py" - "$out/stamp.json" <<'EOF' | tee -a "$summary"
import json, sys
s = json.load(open(sys.argv[1]))
print("stamp: requested", s.get("requested"), "| audit targets", s.get("audit", {}).get("targets"))
EOF
  pkg=$("$py" -c "import importlib.util as u, os; print(os.path.dirname(u.find_spec('torch_scatter').origin))")
  run "$py" -m rocm_build_backend audit "$pkg"
  note "audit of the installed package rc=$?"
  "$py" -m rocm_build_backend audit "$pkg" >"$out/audit.txt" 2>&1
  run "$py" -m rocm_build_backend check --env "$py"
  note "check --env rc=$? (want 0)"
  "$py" -m rocm_build_backend check --env "$py" --json >"$out/check-env.json" 2>>"$log"
  (cd "$out" && "$py" - <<'EOF') 2>&1 | tee -a "$summary"
import torch, torch_scatter
torch.manual_seed(0)
src = torch.rand(100_000, 16, device="cuda")
index = torch.randint(0, 1000, (100_000,), device="cuda")
ok = True
for reduce in ("sum", "mean", "max", "min"):
    gpu = torch_scatter.scatter(src, index, dim=0, reduce=reduce)
    cpu = torch_scatter.scatter(src.cpu(), index.cpu(), dim=0, reduce=reduce)
    same = torch.allclose(gpu.cpu(), cpu, rtol=1e-5, atol=1e-5)
    ok &= same
    print(f"scatter {reduce}: GPU result equals CPU result: {same}")
ptr = torch.tensor([0, 10, 10, 50, 100], device="cuda")
seg = torch_scatter.segment_csr(src[:100], ptr, reduce="sum")
ref = torch.stack([src[:100][a:b].sum(0) for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist())])
same = torch.allclose(seg, ref, rtol=1e-5, atol=1e-5)
ok &= same
print(f"segment_csr sum: GPU result equals the sum of the slices: {same}")
print("kernels on", torch.cuda.get_device_name(0), "all correct:", ok)
raise SystemExit(0 if ok else 1)
EOF
  note "kernels rc=${PIPESTATUS[0]}"
  note "auto: so_bytes=$(cat "$pkg"/*.so | wc -c) (the installed torch_scatter/*.so)"
fi

if [ "$mode" != auto ]; then
  src=$(fresh_tree) || exit 1
  start=$(date +%s.%N)
  (cd "$src" && run "$py" -m pip wheel --no-build-isolation --no-deps -w "$out/list-wheel" -v \
     -C rocm-build-backend.targets="$LIST" .)
  rc=$?
  secs=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  wheel_list=$(ls "$out"/list-wheel/*.whl 2>/dev/null | head -1)
  note "list ($LIST): pip wheel rc=$rc seconds=$secs so_bytes=$( [ -n "$wheel_list" ] && so_bytes "$wheel_list")"
  [ -n "$wheel_list" ] && "$py" -m rocm_build_backend audit "$wheel_list" | tail -3 | tee -a "$summary"
fi
rm -rf "$venv"
tar czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")" 2>/dev/null
cat "$summary"
