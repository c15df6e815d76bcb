#!/usr/bin/env bash
# Every cell of tests/version_matrix.json: the oldest and the newest build tools, each frontend
# through the shim and the install side (CI runs the cells marked "ci"). Needs pip's index.
set -euo pipefail
cd "$(dirname "$0")/.."
ROCM_BUILD_BACKEND_MATRIX=full exec python3 -m pytest -q tests/integration/test_version_matrix.py "$@"
