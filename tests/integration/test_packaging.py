"""The package as users get it: a final release version, the sdist's contents, the wheel's
LICENSE and ``py.typed``, and an API whose types a type checker sees from an installed wheel."""

from __future__ import annotations

import email.parser
import re
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from helpers import ROOT, run
from rocm_build_backend import _version


def test_the_version_is_a_final_release():
    """A pre-release loses to any final release of the same name on an index (and `>=0.1` skips it)."""
    version = Version(_version.__version__)
    assert not version.is_prerelease and not version.is_devrelease and not version.local


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    proc = run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", out, ROOT])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (path,) = out.glob("*.tar.gz")
    return path


@pytest.fixture(scope="module")
def wheel(sdist, tmp_path_factory) -> Path:
    """The wheel built from the sdist, as a frontend builds it."""
    out = tmp_path_factory.mktemp("wheel")
    proc = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", out, sdist])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (path,) = out.glob("*.whl")
    return path


def test_the_sdist_holds_the_package_its_tests_and_docs(sdist):
    """A packager can run the tests from the sdist: it holds every tracked file they read."""
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {
        "LICENSE",
        "README.md",
        "CHANGELOG.md",
        "pyproject.toml",
        "PKG-INFO",
        "rocm_build_backend/py.typed",
        "rocm_build_backend/data/stamp.schema.json",
        "rocm_build_backend/data/schemas/thin.schema.json",
        "rocm_build_backend/data/schemas/settings.schema.json",
        "rocm_build_backend/api.py",
        "docs/index.md",
        "docs/reference/settings.md",
        "tests/conftest.py",
        ".ci/run",
        "tools/setup.sh",
    } <= names
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (the tests run from an sdist): no list of tracked files")
    tracked = run(
        ["git", "ls-files", "tests", "sample_projects", "docs", "tools", "examples", ".ci"], cwd=ROOT, check=True
    )
    assert set(tracked.stdout.split()) <= names
    assert not [n for n in names if n.startswith("bench/") or "__pycache__" in n]
    shipped = {n for n in names if n.startswith("rocm_build_backend/") and n.endswith(".py")}
    assert shipped == {p.relative_to(ROOT).as_posix() for p in (ROOT / "rocm_build_backend").rglob("*.py")}


def zf_text(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(name).decode()


def test_the_wheel_carries_the_license_and_py_typed(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        dist_info = f"rocm_build_backend-{_version.__version__}.dist-info"
        meta = email.parser.BytesParser().parsebytes(zf.read(f"{dist_info}/METADATA"))
        license_text = zf.read(f"{dist_info}/licenses/LICENSE").decode()
    assert "rocm_build_backend/py.typed" in names
    assert meta["License-Expression"] == "MIT" and meta.get_all("License-File") == ["LICENSE"]
    assert license_text.startswith("MIT License") and "rocm-build-backend contributors" in license_text
    classifiers = meta.get_all("Classifier")
    assert "Typing :: Typed" in classifiers
    assert [c for c in classifiers if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)] == [
        f"Programming Language :: Python :: 3.{minor}" for minor in range(10, 15)
    ]
    assert meta["Requires-Python"] == ">=3.10"
    assert "AMD ROCm" in meta["Summary"] and "NVIDIA CUDA" in meta["Summary"]
    assert meta.get_all("Provides-Extra") is None  # the test tools are a dependency group, not an extra
    entry_points = zf_text(wheel, f"{dist_info}/entry_points.txt")
    assert (
        "[validate_pyproject.tool_schema]\nrocm-build-backend = rocm_build_backend.data:settings_schema" in entry_points
    )
    # the zstd decoder for compressed device code is in the default install, not behind an extra
    plain = [r for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    assert 'backports.zstd>=1.0; python_version < "3.14"' in plain, plain


SNIPPET = """\
from rocm_build_backend.api import GpuTarget, audit_wheel, detect, parse_targets, read_stamp, thin_wheel
import rocm_build_backend

reveal_type(audit_wheel)
reveal_type(parse_targets("gfx942"))
reveal_type(detect)
reveal_type(read_stamp)
reveal_type(thin_wheel)
reveal_type(rocm_build_backend.build_editable)
target: GpuTarget = parse_targets("gfx942")[0]
wrong: int = audit_wheel("x.whl")
"""


def test_a_type_checker_sees_the_api_of_the_installed_wheel(wheel, tmp_path):
    """mypy against the wheel installed in a fresh environment (not this checkout): without
    ``py.typed`` it refuses the import, with the lazy names untyped it reveals ``Any``."""
    venv = tmp_path / "venv"
    assert run([sys.executable, "-m", "venv", "--without-pip", venv]).returncode == 0
    python = venv / "bin" / "python"
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], check=True).stdout.strip()
    proc = run([sys.executable, "-m", "installer", "--destdir", "/", "--prefix", venv, wheel])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (Path(site) / "rocm_build_backend" / "py.typed").is_file()
    (tmp_path / "user.py").write_text(SNIPPET)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--python-executable",
            python,
            "--no-incremental",
            "--cache-dir",
            tmp_path / "cache",
            "user.py",
        ],
        cwd=tmp_path,
        env=env,
    )
    out = proc.stdout + proc.stderr
    revealed = [line.split("Revealed type is ", 1)[1] for line in out.splitlines() if "Revealed type is" in line]
    assert len(revealed) == 6, out
    assert not [r for r in revealed if r.strip('"') == "Any"], out
    assert "rocm_build_backend.binary.report.AuditReport" in revealed[0], out
    assert re.fullmatch(r'"(builtins\.)?list\[rocm_build_backend\.gpu\.target\.GpuTarget\]"', revealed[1]), out
    assert "rocm_build_backend.gpu.device.Detection" in revealed[2] and "wheel_path" in revealed[3], out
    assert "ThinResult" in revealed[4] and "metadata_directory" in revealed[5], out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1 and 'Incompatible types in assignment (expression has type "AuditReport"' in errors[0], out
