#!/bin/sh
# The CUDA samples built through the shim, on the GPU machine:
#   sh bench/h200/run_h200_shim.sh [OUTDIR]      (from the repository root)
# For each sample, in a fresh virtual environment that sees the system's packages (torch,
# scikit-build-core): `pip install . --no-build-isolation` with targets = auto (the shim detects
# the GPU; guard = true), then `check --env` (exit 0), the audit of what was installed, and a
# kernel launch with the import guard on; then the same sample built for sm_80 only: `check
# --env` must exit 1, the import guard must refuse naming sm_80 and the device's sm_XY, and with
# the guard off the launch must fail with CUDA error 209 (no kernel image for this device).
set -u
out=${1:-h200-shim}
mkdir -p "$out"
out=$(cd "$out" && pwd)
repo=$PWD
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
# the targets come from the shim alone: no variable of an earlier build may ask for others
unset TORCH_CUDA_ARCH_LIST CUDAARCHS NVCC_APPEND_FLAGS CMAKE_ARGS PYTORCH_ROCM_ARCH ROCM_BUILD_BACKEND_TARGETS
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
log="$out/shim.log"
: >"$log"
: >"$out/summary.txt"
run() { echo "\$ $*" >>"$log"; "$@" >>"$log" 2>&1; rc=$?; echo "rc=$rc" >>"$log"; return $rc; }
note() { echo "$*" | tee -a "$out/summary.txt"; }

for sample in skbuild_cuda:rocm_sample_skbuild_cuda torch_cuda_ext:rocm_sample_torch_cuda; do
  name=${sample%%:*} module=${sample##*:}
  if [ "$module" = rocm_sample_torch_cuda ]; then
    call="m.add_one(__import__('torch').arange(1, 5, dtype=__import__('torch').float32, device='cuda')).tolist()"
  else
    call="m.add_one([1.0, 2.0, 3.0, 4.0])"
  fi
  for targets in auto sm_80; do
    src=$(mktemp -d)/$name
    cp -r "$repo/sample_projects/$name" "$src"
    venv="$out/venv-$name-$targets"
    rm -rf "$venv"
    python3 -m venv --system-site-packages "$venv"
    # the machine's python3 is itself a venv (torch, scikit-build-core): a .pth makes its packages
    # visible after the new venv's own ones (--system-site-packages only reaches the base Python)
    python3 -c "import site; print(site.getsitepackages()[0])" > "$(ls -d "$venv"/lib/python3*/site-packages)/_outer_env.pth"
    py="$venv/bin/python"
    start=$(date +%s)
    (cd "$src" && run env ROCM_BUILD_BACKEND_TARGETS="$targets" ROCM_BUILD_BACKEND_GUARD=true \
      "$py" -m pip install --no-build-isolation --no-deps -v .)
    note "$name $targets build rc=$? seconds=$(( $(date +%s) - start ))"
    run "$py" -m rocm_build_backend check --env "$py"
    note "$name $targets check --env rc=$? (want $( [ "$targets" = auto ] && echo 0 || echo 1 ))"
    "$py" -m rocm_build_backend check --env "$py" --json >"$out/check-$name-$targets.json" 2>>"$log"
    pkg=$("$py" -c "import importlib.util as u, os; print(os.path.dirname(u.find_spec('$module').origin))")
    run "$py" -m rocm_build_backend audit "$pkg"
    note "$name $targets audit rc=$?"
    (cd "$out" && run "$py" -c "import $module as m; print('result', $call)")
    note "$name $targets run (guard on) rc=$? (want $( [ "$targets" = auto ] && echo 0 || echo '1, ImportError naming sm_80 and sm_90'))"
    (cd "$out" && run env ROCM_BUILD_BACKEND_GUARD_OFF=1 "$py" -c "import $module as m; print('result', $call)")
    note "$name $targets run (guard off) rc=$? (want $( [ "$targets" = auto ] && echo 0 || echo '1, CUDA error 209'))"
  done
done
grep -n "ImportError\|CUDA error\|result " "$log" | tail -n 20 >>"$out/summary.txt"
cat "$out/summary.txt"
