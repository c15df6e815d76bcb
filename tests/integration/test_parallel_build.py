"""Every core, for real: a project with many extensions built through the shim with pip, which
setuptools builds side by side (``[build_ext] parallel`` through ``DIST_EXTRA_CONFIG``, their compiles
through the compile pool: tests/integration/test_pool_build.py) with the user's own configuration
file read too and left as it was."""

from __future__ import annotations

import shutil
import sys

from helpers import PROJECTS, only_wheel, run


def test_setuptools_builds_the_extensions_in_parallel_with_the_users_config(tmp_path, build_env):
    project = tmp_path / "many_ext"
    shutil.copytree(PROJECTS / "many_ext", project)
    user = tmp_path / "mine.cfg"
    user.write_text("[egg_info]\ntag_build = .dev7\n")
    build_env["DIST_EXTRA_CONFIG"] = str(user)
    argv = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-v",
        "--no-build-isolation",
        "--no-deps",
        "-w",
        tmp_path / "out",
        project,
        "-C",
        "rocm-build-backend.targets=gfx90a",
        "-C",
        "rocm-build-backend.max-jobs=4",
        "-C",
        "rocm-build-backend.compiler-check=false",
    ]
    proc = run(argv, env=build_env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "many-ext: build_ext parallel=64" in log  # all at once: the compile pool bounds the compiles
    assert (
        "build_ext parallel = 64 (extensions made in a loop: up to 64 at once, their compiles through one pool "
        "of 4 slots, largest first, 1 job each)"
    ) in log
    assert "compile pool: 6 compiles from 6 compile calls and 6 other compiler runs (links), at most " in log
    wheel = only_wheel(tmp_path / "out")
    assert wheel.name.startswith("many_ext-0.1.0.dev7-")  # the user's own file was read too
    assert user.read_text() == "[egg_info]\ntag_build = .dev7\n"
