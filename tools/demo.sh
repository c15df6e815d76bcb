#!/usr/bin/env bash
# The main job: build the HIP sample through the shim for this machine's GPU (or, on a machine
# with no AMD GPU, for the stated default target gfx90a), then show what the wheel really holds.
set -euo pipefail
cd "$(dirname "$0")/.."

DEFAULT_TARGET=gfx90a   # only this demo has a default; the shim itself never guesses
out=$(mktemp -d)
cp -r sample_projects/setuptools_hip "$out/src"
if python3 -m rocm_build_backend detect; then
    echo "== building for this machine's GPU"
else
    echo "== no AMD GPU here: building for the stated default target $DEFAULT_TARGET"
    export ROCM_BUILD_BACKEND_TARGETS=$DEFAULT_TARGET
fi
python3 -m rocm_build_backend build "$out/src" --outdir "$out"
echo "== what the wheel holds"
python3 -m rocm_build_backend audit "$out"/*.whl
echo "== its stamp"
python3 - "$out"/*.whl <<'PY'
import json, sys
from rocm_build_backend.api import read_stamp
print(json.dumps(read_stamp(sys.argv[1]), indent=2))
PY
rm -rf "$out"
