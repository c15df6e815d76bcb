"""``thin`` on a real, small wheel with CUDA device code: torchao 0.18.0 (manylinux x86_64,
3.4 MB: ``_C_cutlass_90a`` holds sm_90a fatbins and a device-link stub, ``_C_mxfp8`` sm_100 and
PTX compute_120), pinned in ``tests/real_wheels.json`` and downloaded once into the test cache
through pip's configured index (``tests/realinputs.py``).
NVIDIA's ``cuobjdump`` checks the result too when ``$CUOBJDUMP`` or ``cuobjdump`` is there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from helpers import real_wheel, wheel_pin
from rocm_build_backend.binary.audit import audit_bytes, audit_wheel
from rocm_build_backend.gpu.targets import parse_targets
from rocm_build_backend.wheel.thin.run import thin_wheel

pytestmark = [pytest.mark.integration, pytest.mark.realinputs]

NAME = wheel_pin("torchao")["filename"]
CUOBJDUMP = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
READELF = shutil.which("llvm-readelf-19") or shutil.which("llvm-readelf")


@pytest.fixture(scope="module")
def torchao() -> Path:
    return real_wheel(wheel_pin("torchao"))


def _memory_layout(readelf_out: str) -> list[tuple[str, ...]]:
    """(name, type, address, flags) of each section: what a program sees in memory."""
    rows = []
    for line in readelf_out.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) > 7 and fields[0].startswith("[") and fields[0][1:-1].isdigit():
            rows.append((fields[1], fields[2], fields[3], fields[7] if len(fields) > 10 else ""))
    return rows


@pytest.mark.parametrize("keep_layout", [True, False])
@pytest.mark.parametrize(
    "target, cutlass, mxfp8",
    [
        ("sm_90", ["sm_90a"], []),
        ("sm_100", [], ["sm_100"]),
        ("sm_120", [], ["compute_120"]),
    ],
)
def test_thin_a_real_cuda_wheel(tmp_path, torchao, target, cutlass, mxfp8, keep_layout):
    """In place: the same layout; compacted (the default): the same symbols and sections at
    the same addresses, a file no larger, and LLVM's reader finds nothing wrong."""
    result = thin_wheel(torchao, parse_targets(target), tmp_path, keep_layout=keep_layout)
    out = tmp_path / NAME
    files = {m.name.split("/")[-1].split(".")[0]: m for m in result.members}
    assert sorted(set(files["_C_cutlass_90a"].kept)) == cutlass
    assert sorted(set(files["_C_mxfp8"].kept)) == mxfp8
    report = audit_wheel(out)
    assert set(report.targets) == set(cutlass + mxfp8)
    with zipfile.ZipFile(torchao) as zs, zipfile.ZipFile(out) as zd:
        stamp = [n for n in zd.namelist() if n.endswith(".dist-info/rocm_build.json")]
        assert len(stamp) == 1 and sorted(zd.namelist()) == sorted(zs.namelist() + stamp)
        for m in result.members:
            old, new = zs.read(m.name), zd.read(m.name)
            assert len(old) == len(new) if keep_layout else len(new) <= len(old)
            if m.action == "thinned":
                assert m.layout == ("in place" if keep_layout else "compacted") or m.layout_reason
            if READELF:
                (tmp_path / "old.so").write_bytes(old)
                (tmp_path / "new.so").write_bytes(new)
                what = ["-h", "-l", "-S", "-s", "--dyn-syms"] if keep_layout else ["-s", "--dyn-syms"]
                layouts = [
                    subprocess.run([READELF, *what, f], capture_output=True, text=True, cwd=tmp_path).stdout.replace(
                        f, ""
                    )
                    for f in ("old.so", "new.so")
                ]
                assert layouts[0] == layouts[1]
                sections = [
                    _memory_layout(
                        subprocess.run([READELF, "-S", "-W", f], capture_output=True, text=True, cwd=tmp_path).stdout
                    )
                    for f in ("old.so", "new.so")
                ]
                assert sections[0] == sections[1]
                clean = subprocess.run([READELF, "-a", "new.so"], capture_output=True, text=True, cwd=tmp_path)
                assert clean.returncode == 0 and not clean.stderr
            if CUOBJDUMP:
                listed = subprocess.run(
                    [CUOBJDUMP, "--list-elf", "--list-ptx", "new.so"], capture_output=True, text=True, cwd=tmp_path
                ).stdout
                archs = {line.rsplit(".", 2)[-2] for line in listed.splitlines() if line.startswith(("ELF", "PTX"))}
                assert archs == {t.replace("compute_", "sm_").rstrip("f") for t in m.kept}
            assert not [p for p in audit_bytes(new, m.name).problems if "holds no entries" not in p]
