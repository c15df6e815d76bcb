"""A failed build whose cause we know ends with a line saying what it is and what to do instead:
the ``build`` command on a project whose compiler is killed by signal 9, and on one that skipped
its GPU code because torch could not be imported.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import PROJECTS, ROOT


def test_the_build_command_ends_with_the_cause(tmp_path):
    """A compiler killed by signal 9 ended in "see the lines above"."""
    import os

    proj = tmp_path / "proj"
    (proj / "pkg").mkdir(parents=True)
    (proj / "pkg" / "__init__.py").write_text("")
    (proj / "setup.py").write_text(
        "import subprocess\nfrom setuptools import setup\nfrom setuptools.command.build_py import build_py\n"
        "class B(build_py):\n    def run(self):\n        self.spawn(['sh', '-c', 'kill -9 $$'])\n"
        "setup(name='pkg', version='1.0', packages=['pkg'], cmdclass={'build_py': B})\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_BUILD_BACKEND_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "build",
            proj,
            "-o",
            tmp_path / "out",
            "--targets",
            "gfx90a",
            "-C",
            "rocm-build-backend.verify=off",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr.splitlines()[-1]
    last = proc.stderr.strip().splitlines()[-2:]
    assert last[0].startswith("error: building proj failed: a compiler was killed (signal 9)"), proc.stderr
    assert last[1].startswith("hint: build with fewer parallel jobs: -C rocm-build-backend.max-jobs=")
    assert "rocm-build-backend: error: the build failed: a compiler was killed" in proc.stderr  # the hook's log
    assert proc.stdout == ""


@pytest.mark.parametrize("force_cuda", [None, "1"])
def test_a_build_that_skipped_its_gpu_code_without_torch_is_told_to_install_torch(tmp_path, force_cuda):
    """The mmcv shape (tests/projects/skip_without_torch): without torch importable the build
    prints "Skip building ext ops due to the absence of torch." and makes a wheel without device
    code. The hint was "give FORCE_CUDA=1" (its switch), and with FORCE_CUDA=1 set "a hard-coded
    -arch/-gencode"; the cause is torch missing from the build environment."""
    import os
    import shutil

    hidden = tmp_path / "no-torch" / "torch"  # a build environment without torch, where one is installed
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    proj = tmp_path / "skip_without_torch"
    shutil.copytree(PROJECTS / "skip_without_torch", proj)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_BUILD_BACKEND_") and k != "FORCE_CUDA"}
    env["PYTHONPATH"] = os.pathsep.join([str(hidden.parent), str(ROOT)])
    if force_cuda:
        env["FORCE_CUDA"] = force_cuda
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "build",
            proj,
            "-o",
            tmp_path / "out",
            "--targets",
            "sm_90",
            "-C",
            "rocm-build-backend.compiler-check=false",
            "-C",
            "rocm-build-backend.enforce=false",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "Skip building ext ops due to the absence of torch." in proc.stdout + proc.stderr
    error, hint = proc.stderr.strip().splitlines()[-2:]
    assert error.startswith("error: building skip_without_torch stopped: ") and "holds no GPU device code" in error
    assert "because torch could not be imported during the build" in error, error
    assert hint.startswith("hint: install torch") and "--no-build-isolation" in hint, hint
    assert "FORCE_CUDA" not in hint and "hard-coded" not in hint
    assert not list((tmp_path / "out").glob("*.whl"))
