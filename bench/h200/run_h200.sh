#!/bin/sh
# Run the H200 proof from the repository root and pack what it wrote into one archive.
#   sh bench/h200/run_h200.sh [ARCHIVE]      (default: h200-results.tar.gz)
# Needs: an NVIDIA GPU, nvcc, python3 with torch (CUDA), scikit-build-core, setuptools, cmake, ninja.
set -u
archive=${1:-h200-results.tar.gz}
work=$(mktemp -d)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
shift 2>/dev/null
timeout "${BENCH_TIMEOUT:-540}" python3 bench/h200/run_h200.py "$work/h200" "$@"
echo "bench exit status $?"
tar czf "$archive" -C "$work" h200 && echo "wrote $archive"
