"""Build the sample projects through the shim with real frontends and real compilers.

Every build's proof is the binary: the wheel is opened and its device code read.
"""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from rocm_build_backend.binary.audit import audit_file, audit_wheel
from rocm_build_backend.wheel.stamp import read_stamp
from helpers import copy_sample, error_lines, kfd_root, only_wheel, pip_wheel, ROOT, run


def device_targets(wheel: Path) -> dict[str, list[str]]:
    return {f.path: f.targets for f in audit_wheel(wheel).files if f.targets}


# ------------------------------------------------------------------- real frontends


@pytest.mark.parametrize(
    "targets, expected",
    [
        ("gfx90a", ["gfx90a"]),
        ("gfx940;gfx90a", ["gfx90a", "gfx940"]),
    ],
)
def test_pip_wheel_setuptools_hip(tmp_path, build_env, targets, expected):
    project = copy_sample("setuptools_hip", tmp_path)
    proc = pip_wheel(project, tmp_path / "out", build_env, f"rocm-build-backend.targets={targets}")
    assert proc.returncode == 0, proc.stderr
    wheel = only_wheel(tmp_path / "out")
    assert list(device_targets(wheel).values()) == [expected]
    stamp = read_stamp(wheel)
    assert stamp["requested"]["targets"] == expected
    assert stamp["requested"]["source"] == "settings"
    assert stamp["toolchain"]["compiler"] == "hipcc"


def test_pip_wheel_skbuild_targets_from_environment(tmp_path, build_env):
    project = copy_sample("skbuild_hip", tmp_path)
    build_env["ROCM_BUILD_BACKEND_TARGETS"] = "gfx90a"
    proc = pip_wheel(project, tmp_path / "out", build_env)
    assert proc.returncode == 0, proc.stderr
    wheel = only_wheel(tmp_path / "out")
    assert list(device_targets(wheel).values()) == [["gfx90a"]]
    assert read_stamp(wheel)["requested"]["source"] == "settings"


def test_python_build_sdist_then_wheel(tmp_path, build_env):
    """python -m build makes the sdist first (no GPU content), then the wheel from it."""
    project = copy_sample("setuptools_hip", tmp_path)
    build_env["PYTORCH_ROCM_ARCH"] = "gfx90a"
    proc = run([sys.executable, "-m", "build", "--no-isolation", "--outdir", tmp_path / "dist", project], env=build_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sdist = next((tmp_path / "dist").glob("*.tar.gz"))
    with tarfile.open(sdist) as tf:
        names = tf.getnames()
    assert any(n.endswith("kernels.hip") for n in names)
    assert not any(n.endswith((".so", "rocm_build.json", ".rocm-build-backend.json")) for n in names), names
    wheel = only_wheel(tmp_path / "dist")
    assert list(device_targets(wheel).values()) == [["gfx90a"]]
    assert read_stamp(wheel)["requested"]["source"] == "PYTORCH_ROCM_ARCH"


def test_uv_build(tmp_path, build_env):
    uv = shutil.which("uv")
    assert uv, "uv is installed by the test extras"
    project = copy_sample("setuptools_hip", tmp_path)
    build_env["ROCM_BUILD_BACKEND_TARGETS"] = "gfx940"
    build_env["UV_CACHE_DIR"] = str(tmp_path / "uv-cache")
    proc = run(
        [
            uv,
            "build",
            "--wheel",
            "--no-build-isolation",
            "--python",
            sys.executable,
            "--out-dir",
            tmp_path / "dist",
            project,
        ],
        env=build_env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel = only_wheel(tmp_path / "dist")
    assert list(device_targets(wheel).values()) == [["gfx940"]]


def test_pip_install_editable(tmp_path, build_env):
    venv = tmp_path / "venv"
    # without a pip of its own, the venv uses the (current) pip of the outer site-packages
    run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], check=True)
    py = venv / "bin" / "python"
    project = copy_sample("setuptools_hip", tmp_path)
    proc = run(
        [
            py,
            "-m",
            "pip",
            "install",
            "--no-build-isolation",
            "--no-deps",
            "-e",
            project,
            "-C",
            "rocm-build-backend.targets=gfx90a",
        ],
        env=build_env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    built = list(project.rglob("_kernels*.so"))
    assert len(built) == 1 and audit_file(built[0]).targets == ["gfx90a"]
    imported = run(
        [py, "-c", "import rocm_sample_hip, sys; print(rocm_sample_hip.__file__)"], cwd=tmp_path, env=build_env
    )
    assert imported.returncode == 0 and str(project) in imported.stdout, imported.stderr


def test_pure_python_through_the_shim(tmp_path, build_env):
    for name in ("pure_python", "hatch_pure"):
        project = copy_sample(name, tmp_path)
        proc = pip_wheel(project, tmp_path / name / "out", build_env, "rocm-build-backend.targets=gfx942")
        assert proc.returncode == 0, proc.stderr
        wheel = only_wheel(tmp_path / name / "out")
        stamp = read_stamp(wheel)
        assert stamp["requested"]["targets"] == ["gfx942"] and stamp["audit"]["files"] == {}


# -------------------------------------------------------------------- where targets come from


def test_auto_detects_from_a_fake_sysfs_root(tmp_path, build_env):
    project = copy_sample("setuptools_hip", tmp_path)
    build_env["ROCM_BUILD_BACKEND_SYSFS_ROOT"] = str(kfd_root(tmp_path, 90010))
    proc = pip_wheel(project, tmp_path / "out", build_env)
    assert proc.returncode == 0, proc.stderr
    wheel = only_wheel(tmp_path / "out")
    assert list(device_targets(wheel).values()) == [["gfx90a"]]
    stamp = read_stamp(wheel)
    assert stamp["requested"]["source"] == "detected:kfd" and stamp["host"]["gpus"] == ["gfx90a"]


# ------------------------------------------------------------------------ verification


def test_hardcoded_gfx908_fails_when_built_for_gfx90a(tmp_path, build_env):
    project = copy_sample("hardcoded_gfx908", tmp_path)
    proc = pip_wheel(project, tmp_path / "out", build_env, "rocm-build-backend.targets=gfx90a")
    assert proc.returncode != 0
    lines = error_lines(proc)
    assert lines and "_kernels" in lines[0] and "gfx908" in lines[0] and "gfx90a" in lines[0], lines
    assert any("hint:" in line and "offload-arch" in line for line in lines)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not list((tmp_path / "out").glob("*.whl")) if (tmp_path / "out").exists() else True


# ------------------------------------------------------------------------- bad input

BAD = [
    (
        "unknown target",
        {},
        ["rocm-build-backend.targets=gfx924"],
        "unknown GPU target 'gfx924'",
        "did you mean 'gfx942'",
    ),
    ("compiler rejects", {}, ["rocm-build-backend.targets=gfx942"], "hipcc (HIP 5.2", "cannot emit code for gfx942"),
    (
        "backend missing",
        {},
        ["rocm-build-backend.targets=gfx90a", "rocm-build-backend.backend=no_such_backend.build"],
        "cannot import the wrapped build backend 'no_such_backend.build'",
        "no-such-backend",
    ),
    (
        "conflict",
        {"PYTORCH_ROCM_ARCH": "gfx1030"},
        ["rocm-build-backend.targets=gfx90a"],
        "PYTORCH_ROCM_ARCH=gfx1030",
        "gfx90a",
    ),
    (
        "unknown setting",
        {"ROCM_BUILD_BACKEND_TARGET": "gfx90a"},
        [],
        "unknown setting ROCM_BUILD_BACKEND_TARGET",
        "did you mean 'targets'",
    ),
    ("bad value", {}, ["rocm-build-backend.verify=sometimes"], "bad value 'sometimes'", "verify"),
    ("auto, no GPU", {"ROCM_BUILD_BACKEND_SYSFS_ROOT": "EMPTY"}, [], "no GPU found", "ROCM_BUILD_BACKEND_TARGETS="),
]


@pytest.mark.parametrize("case, env, settings, first, second", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_clear_error(tmp_path, build_env, case, env, settings, first, second):
    project = copy_sample("setuptools_hip", tmp_path)
    if env.get("ROCM_BUILD_BACKEND_SYSFS_ROOT") == "EMPTY":
        env = {
            **env,
            "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(kfd_root(tmp_path)),
            "PATH": "/usr/local/bin:/usr/bin:/bin",
        }  # no rocminfo answers either
    build_env.update(env)
    proc = pip_wheel(project, tmp_path / "out", build_env, *settings)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Traceback" not in out, out
    lines = error_lines(proc)
    assert lines and lines[0].startswith("rocm-build-backend: error:"), out
    text = "\n".join(lines)
    assert first in text and second in text, text
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.whl"))
    assert not list(project.rglob("*.so")), "nothing compiled before the error"


def test_cpu_only_build_of_a_known_project_names_the_knob(tmp_path, build_env):
    """A project with a profile whose wheel comes out without device code (torchvision without
    FORCE_CUDA, here played by a pure project under that name): the error names the fix."""
    project = copy_sample("pure_python", tmp_path)
    text = (project / "pyproject.toml").read_text()
    text = text.replace('name = "rocm-sample-pure"', 'name = "torchvision"').replace(
        'verify = "off"', 'verify = "error"'
    )
    (project / "pyproject.toml").write_text(text)
    proc = pip_wheel(project, tmp_path / "out", build_env, "rocm-build-backend.targets=gfx90a")
    assert proc.returncode != 0
    lines = error_lines(proc)
    assert "no GPU device code" in lines[0] and "gfx90a" in lines[0], lines
    assert any(line.startswith("rocm-build-backend: hint: set FORCE_CUDA=1") for line in lines), lines


# ------------------------------------------------------------ every GPU sample, every frontend


def _pip_wheel(project, out, env):
    return run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", out, project], env=env)


def _pip_install(project, out, env):
    """pip install builds the wheel (into its own temp folder) and installs it: keep the wheel."""
    return run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-build-isolation",
            "--no-deps",
            "--target",
            out / "site",
            project,
        ],
        env=env,
    )


def _python_build(project, out, env):
    return run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", out, project], env=env)


def _uv_build(project, out, env):
    return run(
        [
            shutil.which("uv"),
            "build",
            "--wheel",
            "--no-build-isolation",
            "--python",
            sys.executable,
            "--out-dir",
            out,
            project,
        ],
        env={**env, "UV_CACHE_DIR": str(out / "uv-cache")},
    )


FRONTENDS = {"pip-wheel": _pip_wheel, "pip-install": _pip_install, "python-build": _python_build, "uv-build": _uv_build}


@pytest.mark.parametrize("sample", ["setuptools_hip", "skbuild_hip"])
@pytest.mark.parametrize("frontend", list(FRONTENDS))
def test_every_gpu_sample_with_every_frontend(tmp_path, build_env, sample, frontend):
    project = copy_sample(sample, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    build_env["ROCM_BUILD_BACKEND_TARGETS"] = "gfx940;gfx90a"
    proc = FRONTENDS[frontend](project, out, build_env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    if frontend == "pip-install":
        (so,) = (out / "site").rglob("_kernels*.so")
        assert audit_file(so).targets == ["gfx90a", "gfx940"]
        (dist_info,) = (out / "site").glob("*.dist-info")
        stamp = json.loads((dist_info / "rocm_build.json").read_text())
    else:
        wheel = only_wheel(out)
        assert list(device_targets(wheel).values()) == [["gfx90a", "gfx940"]]
        stamp = read_stamp(wheel)
    assert stamp["requested"]["targets"] == ["gfx90a", "gfx940"]
    assert list(stamp["audit"]["files"].values())[0]["targets"] == ["gfx90a", "gfx940"]


def test_build_isolation_with_find_links(tmp_path, build_env):
    """The README's recipe: python -m build with isolation finds the shim through PIP_FIND_LINKS."""
    wheels = tmp_path / "wheels"
    shim = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, ROOT], env=build_env
    )
    assert shim.returncode == 0, shim.stdout + shim.stderr
    project = copy_sample("pure_python", tmp_path)
    env = {**build_env, "PIP_FIND_LINKS": str(wheels), "ROCM_BUILD_BACKEND_TARGETS": "gfx90a"}
    env.pop("PYTHONPATH", None)  # the isolated environment gets the shim from its wheel, nothing else
    proc = run([sys.executable, "-m", "build", "--wheel", "--outdir", tmp_path / "dist", project], env=env)
    if "No matching distribution found for setuptools" in proc.stdout + proc.stderr:
        pytest.skip("no package index reachable for the isolated environment's setuptools")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel = only_wheel(tmp_path / "dist")
    assert read_stamp(wheel)["requested"] == {"targets": ["gfx90a"], "source": "settings"}
