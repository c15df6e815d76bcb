"""Third-party sdists through the shim, unedited: a plain setuptools project (it knows nothing of
rocm-build-backend) whose HIP extension sits behind its own switch, DEMO_WITH_HIP, packed as a
real sdist (``python -m build --sdist``) and served from a local folder (``--find-links``, no
network). ``install --targets gfx90a`` builds it through the shim for gfx90a; without the
switch the run exits 1 naming it, never "loads here"; ``build x.tar.gz`` and ``build
NAME==VERSION`` build the sdist as they build a folder.
"""

from __future__ import annotations

import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import PROJECTS, ROOT, clean_build_env, run, validate_json

NAME, VERSION = "demo-hip-switch", "1.0"

pytestmark = pytest.mark.skipif(shutil.which("hipcc") is None, reason="needs hipcc")


@pytest.fixture(scope="module")
def links(tmp_path_factory) -> Path:
    """A folder index holding the project's real sdist, and nothing else."""
    tmp = tmp_path_factory.mktemp("sdist")
    project = shutil.copytree(PROJECTS / "hip_switch_plain", tmp / "project")
    out = tmp / "links"
    proc = run(
        [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", out, project], env=clean_build_env(tmp)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [p.name for p in out.iterdir()] == ["demo_hip_switch-1.0.tar.gz"]
    return out


def _env(tmp_path: Path, links: Path, **extra: str) -> dict[str, str]:
    env = clean_build_env(tmp_path)
    env.pop("DEMO_WITH_HIP", None)
    env.update(PYTHONPATH=str(ROOT), HIP_PLATFORM="amd", **extra)
    return env


def _install(tmp_path: Path, links: Path, env: dict[str, str]):
    pip = ["--no-index", "--find-links", str(links), "--no-build-isolation", "--target", str(tmp_path / "site")]
    return run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "install",
            "--targets",
            "gfx90a",
            "--",
            *pip,
            f"{NAME}=={VERSION}",
        ],
        env=env,
        cwd=tmp_path,
    )


def _so_targets(wheel: Path) -> list[str]:
    from rocm_build_backend.binary.audit import audit_wheel

    return sorted({t for f in audit_wheel(wheel).files for t in f.targets})


def test_install_builds_the_plain_sdist_through_the_shim_for_the_targets(tmp_path, links):
    from rocm_build_backend.binary.audit import audit_file

    proc = _install(tmp_path, links, _env(tmp_path, links, DEMO_WITH_HIP="1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith(NAME))
    assert row.split()[2:] == ["built", "gfx90a", "yes"], proc.stdout
    assert f"note: {NAME} {VERSION} built from its sdist through rocm-build-backend" in proc.stdout
    (so,) = (tmp_path / "site").glob("demo_hip_switch/_kernels*.so")
    assert audit_file(so).targets == ["gfx90a"]
    assert list(links.iterdir()) == [links / "demo_hip_switch-1.0.tar.gz"]  # the sdist is not touched


def test_install_without_the_switch_exits_1_naming_it(tmp_path, links):
    proc = _install(tmp_path, links, _env(tmp_path, links))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "loads here" not in proc.stdout and "nothing installed" in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if line.startswith(NAME))
    assert row.split()[2:] == ["built", "no", "device", "code", "no"], proc.stdout
    assert "setup.py L23 DEMO_WITH_HIP" in proc.stdout and "give DEMO_WITH_HIP=1" in proc.stdout
    assert not (tmp_path / "site").exists()


def test_build_takes_the_sdist_file(tmp_path, links):
    sdist = tmp_path / "demo_hip_switch-1.0.tar.gz"
    shutil.copy(links / sdist.name, sdist)
    env = _env(tmp_path, links, DEMO_WITH_HIP="1")
    proc = run(
        [sys.executable, "-m", "rocm_build_backend", "build", sdist, "--targets", "gfx90a", "--json"],
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = validate_json("build", proc.stdout)
    wheel = Path(doc["wheel"])
    assert wheel.parent == tmp_path and doc["project"] == str(sdist) and doc["targets"] == ["gfx90a"]
    assert _so_targets(wheel) == ["gfx90a"]
    with zipfile.ZipFile(wheel) as zf:
        assert "demo_hip_switch-1.0.dist-info/rocm_build.json" in zf.namelist()
    assert {p.name for p in tmp_path.iterdir() if p.is_file()} == {sdist.name, wheel.name}


def test_build_of_a_requirement_without_device_code_is_a_finding_naming_the_switch(tmp_path, links):
    # NAME==VERSION: the sdist is found through pip's configured index (here its environment);
    # verify = "warn" lets the wheel through the build's own audit, and the finding still stops it
    env = _env(tmp_path, links, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(links), PIP_NO_BUILD_ISOLATION="0")
    proc = run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "build",
            f"{NAME}=={VERSION}",
            "--targets",
            "gfx90a",
            "-C",
            "rocm-build-backend.verify=warn",
        ],
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Saved " in proc.stderr and "demo_hip_switch-1.0.tar.gz" in proc.stderr  # pip download's line
    error, hint = [ln for ln in proc.stderr.splitlines() if ln.startswith(("error: ", "hint: "))][-2:]
    assert "holds no device code" in error and "setup.py L23 DEMO_WITH_HIP=1" in error, proc.stderr
    assert hint.startswith("hint: turn its GPU build on (DEMO_WITH_HIP=1)"), hint
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert Path(proc.stdout.strip()) == wheel and _so_targets(wheel) == []
