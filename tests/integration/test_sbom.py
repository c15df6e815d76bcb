"""SBOMs (PEP 770, ``.dist-info/sboms/``) name the wheel they are in: after ``split`` (and any
rewrite that gives a wheel a new version) they name the new file, not the old one.

The SBOM is auditwheel's own: a HIP extension built by clang-19 (``--offload-compress``) that
links libzstd and the HIP runtime, repaired with the command of
``examples/scale-out/cibuildwheel.toml`` (``auditwheel repair --exclude 'libamdhip64.so*' ...``:
the GPU runtime stays the system's; libzstd is grafted, and auditwheel records which Debian
package it came from).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from helpers import TARGET_VARS as _TARGET_VARS, ROOT, pip_wheel
from rocm_build_backend.gpu.targets import parse_targets
from rocm_build_backend.wheel.sbom import renamed_sbom
from rocm_build_backend.wheel.thin.split import split_wheel
from rocm_build_backend.wheel.rewrite import rewrite_members
from rocm_build_backend.wheel.stamp import read_stamp
from rocm_build_backend.wheel.thin.run import thin_wheel


AUDITWHEEL = shutil.which("auditwheel")
NAME = "compressed_bundles"


def _sbom(wheel: Path) -> tuple[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if "/sboms/" in n and not n.endswith("/")]
        return name, zf.read(name)


def _purl(version: str, wheel: str) -> str:
    return f"pkg:pypi/{NAME}@{quote(version, safe='')}?file_name={quote(wheel, safe='')}"


@pytest.fixture(scope="module")
def repaired(tmp_path_factory) -> Path:
    if not (AUDITWHEEL and shutil.which("patchelf") and shutil.which("clang++-19")):
        pytest.skip("needs auditwheel, patchelf and clang++-19")
    tmp = tmp_path_factory.mktemp("sbom")
    project = Path(
        shutil.copytree(
            ROOT / "tests" / "projects" / "compressed_bundles",
            tmp / "project",
            ignore=shutil.ignore_patterns("build", "*.egg-info"),
        )
    )
    setup = project / "setup.py"
    setup.write_text(
        setup.read_text().replace('["csrc/kernels.hip"])', '["csrc/kernels.hip"], libraries=[":libzstd.so.1"])')
    )
    (tmp / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in _TARGET_VARS and not k.startswith("ROCM_BUILD_BACKEND_")}
    env.update(XDG_CACHE_HOME=str(tmp / "cache"), TMPDIR=str(tmp / "tmp"), PIP_NO_CACHE_DIR="1")
    proc = pip_wheel(project, tmp / "built", env, "rocm-build-backend.targets=gfx90a;gfx942")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (built,) = (tmp / "built").glob("*.whl")
    # the repair command of examples/scale-out/cibuildwheel.toml, run as cibuildwheel runs it (a shell)
    config = tomllib.loads((ROOT / "examples" / "scale-out" / "cibuildwheel.toml").read_text())
    command = config["tool"]["cibuildwheel"]["linux"]["repair-wheel-command"]
    command = command.format(dest_dir=shlex.quote(str(tmp / "repaired")), wheel=shlex.quote(str(built)))
    proc = subprocess.run(command, shell=True, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = (tmp / "repaired").glob("*.whl")
    return wheel


def test_auditwheel_repair_keeps_the_gpu_runtime_out_and_writes_an_sbom(repaired):
    with zipfile.ZipFile(repaired) as zf:
        libs = [n for n in zf.namelist() if ".libs/" in n and not n.endswith("/")]
    assert len(libs) == 1 and "libzstd" in libs[0], libs  # libamdhip64 and what it needs stay out
    assert read_stamp(repaired)["audit"]["files"]  # the stamp survives the repair
    name, data = _sbom(repaired)
    assert name == f"{NAME}-0.1.0.dist-info/sboms/auditwheel.cdx.json"
    doc = json.loads(data)
    assert doc["metadata"]["component"]["purl"] == _purl("0.1.0", repaired.name)


def test_split_wheels_name_themselves_in_their_sbom(repaired, tmp_path):
    result = split_wheel(repaired, tmp_path)
    old = json.loads(_sbom(repaired)[1])
    assert [r.output.name.split("-")[1] for r in result.wheels] == ["0.1.0+gfx90a", "0.1.0+gfx942"]
    for r in result.wheels:
        name, data = _sbom(r.output)
        version = r.output.name.split("-")[1]
        assert name == f"{NAME}-{version}.dist-info/sboms/auditwheel.cdx.json"
        doc = json.loads(data)
        me = {
            "type": "library",
            "bom-ref": _purl(version, r.output.name),
            "name": NAME,
            "version": version,
            "purl": _purl(version, r.output.name),
        }
        assert doc["metadata"]["component"] == me and doc["components"][0] == me
        assert doc["components"][1:] == old["components"][1:]  # libzstd1, as auditwheel found it
        assert doc["dependencies"][0] == {**old["dependencies"][0], "ref": me["bom-ref"]}
        assert doc["dependencies"][1:] == old["dependencies"][1:]
        assert repaired.name not in data.decode() and quote(repaired.name, safe="") not in data.decode()


def test_thin_under_the_same_name_keeps_the_sbom_as_it_was(repaired, tmp_path):
    thin_wheel(repaired, parse_targets("gfx942"), tmp_path)
    assert _sbom(tmp_path / repaired.name) == _sbom(repaired)


def test_a_new_local_version_renames_the_wheel_in_its_sbom(repaired, tmp_path):
    """The rewrite behind the build's ``local-version`` and stamp updates an SBOM the same way."""
    copy = Path(shutil.copy(repaired, tmp_path))
    out = rewrite_members(copy, new_version="0.1.0+gfx942")
    doc = json.loads(_sbom(out)[1])
    assert doc["metadata"]["component"]["purl"] == _purl("0.1.0+gfx942", out.name)
    assert doc["metadata"]["component"]["version"] == "0.1.0+gfx942"


def test_the_rename_gives_what_auditwheel_writes_for_the_new_name():
    """auditwheel's own SBOM for the old file name, renamed, equals its SBOM for the new one."""
    sboms = pytest.importorskip("auditwheel.sboms")
    lib = Path("/usr/lib/x86_64-linux-gnu/libzstd.so.1")
    old = "demo_gpu-1.0-cp311-cp311-manylinux_2_35_x86_64.whl"
    new = "demo_gpu-1.0+gfx90a.gfx942-cp311-cp311-manylinux_2_35_x86_64.whl"
    before = sboms.create_sbom_for_wheel(old, [lib]) if lib.exists() else None
    if before is None:
        pytest.skip("no system package manager tells auditwheel where libzstd came from")
    renamed = renamed_sbom(json.dumps(before).encode(), old, new)
    assert json.loads(renamed) == sboms.create_sbom_for_wheel(new, [lib])
    assert renamed_sbom(json.dumps(before).encode(), old, old) == json.dumps(before).encode()


@pytest.mark.parametrize(
    "text, expected",
    [
        # a text (not JSON) SBOM: the names change, nothing else
        (
            b"PackageName: demo\nExternalRef: PACKAGE-MANAGER purl pkg:pypi/demo@1.0?file_name=demo-1.0-py3-none-any.whl\n"
            b"FileName: demo-1.0-py3-none-any.whl\n",
            b"PackageName: demo\nExternalRef: PACKAGE-MANAGER purl pkg:pypi/demo@1.0%2Bsm90?file_name=demo-1.0%2Bsm90-py3-none-any.whl\n"
            b"FileName: demo-1.0+sm90-py3-none-any.whl\n",
        ),
        # another package's purl at the same version, and this package at another version: untouched
        (
            b'{"purl": "pkg:pypi/other@1.0", "old": "pkg:pypi/demo@0.9", "name": "other", "version": "1.0"}',
            b'{"purl": "pkg:pypi/other@1.0", "old": "pkg:pypi/demo@0.9", "name": "other", "version": "1.0"}',
        ),
        # SPDX JSON: versionInfo beside the package's name
        (
            b'{"packages": [{"name": "Demo", "versionInfo": "1.0"}]}',
            b'{"packages": [{"name": "Demo", "versionInfo": "1.0+sm90"}]}',
        ),
        # not UTF-8, not JSON: bytes around the names are kept
        (b"\xff\xfe demo-1.0-py3-none-any.whl \xff", b"\xff\xfe demo-1.0+sm90-py3-none-any.whl \xff"),
        # deeply nested JSON does not exhaust the stack
        (b"[" * 100_000 + b"]" * 100_000, b"[" * 100_000 + b"]" * 100_000),
    ],
)
def test_renamed_sbom_on_other_shapes(text, expected):
    assert renamed_sbom(text, "demo-1.0-py3-none-any.whl", "demo-1.0+sm90-py3-none-any.whl") == expected
