"""Build trees made by real setuptools builds: found with the targets they were built for, and
never confused with a scikit-build-core build folder.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rocm_build_backend.errors import StaleBuildTreeError
from rocm_build_backend.builder.freshness import FRESH_NAME, check_fresh, mark_fresh
from helpers import write_file


SETUP = """\
from setuptools import Extension, setup
setup(name="tinyext", version="1.0", ext_modules=[Extension("tinyext", ["tinyext.c"])])
"""
C_SOURCE = """\
#include <Python.h>
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "tinyext", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_tinyext(void) { return PyModule_Create(&m); }
"""


def test_real_setuptools_build_tree(tmp_path):
    proj = tmp_path / "tinyext"
    write_file(proj / "setup.py", SETUP)
    write_file(proj / "tinyext.c", C_SOURCE)
    write_file(
        proj / "pyproject.toml",
        textwrap.dedent("""\
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"
        """),
    )

    def build():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-build-isolation",
                "--no-deps",
                "--no-cache-dir",
                "-q",
                "-w",
                str(tmp_path / "dist"),
                str(proj),
            ],
            check=True,
            capture_output=True,
        )

    build()
    assert any(p.suffix == ".o" for p in (proj / "build").rglob("*"))
    # A tree from a build without the shim: unknown targets, compiled objects; not ours to remove.
    with pytest.raises(StaleBuildTreeError, match="unknown targets"):
        check_fresh(proj, ["gfx90a"])
    with pytest.raises(StaleBuildTreeError, match="not removed"):
        check_fresh(proj, ["gfx90a"], stale="clean")
    assert (proj / "build").is_dir()
    build()
    mark_fresh(proj, ["gfx90a"])
    assert check_fresh(proj, ["gfx90a"]) == []
    with pytest.raises(StaleBuildTreeError, match="built for gfx90a"):
        check_fresh(proj, ["gfx942"])


@pytest.mark.parametrize("where", ["env", "-C", "pyproject"])
def test_a_setuptools_build_never_reads_a_scikit_build_dir(tmp_path, where):
    """SKBUILD_BUILD_DIR, -C build-dir or [tool.scikit-build] build-dir naming a user's folder:
    a setuptools build neither removes it (stale = "clean") nor stamps it."""
    import os

    users = tmp_path / "my-work"
    keep = write_file(users / "results" / "model.so", "mine")
    proj = tmp_path / "proj"
    write_file(proj / "pkg" / "__init__.py")
    table = f'[tool.scikit-build]\nbuild-dir = "{users}"\n' if where == "pyproject" else ""
    write_file(
        proj / "pyproject.toml",
        textwrap.dedent("""\
        [build-system]
        requires = ["setuptools"]
        build-backend = "rocm_build_backend"
        [project]
        name = "pkg"
        version = "1.0"
        [tool.rocm-build-backend]
        backend = "setuptools.build_meta"
        targets = "gfx90a"
        verify = "off"
        stale = "clean"
        """)
        + table,
    )
    settings = {"build-dir": str(users)} if where == "-C" else {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_BUILD_BACKEND_")}
    env.pop("PYTORCH_ROCM_ARCH", None)
    if where == "env":
        env["SKBUILD_BUILD_DIR"] = str(users)
    code = f"import rocm_build_backend as b; print(b.build_wheel({str(tmp_path / 'out')!r}, {settings!r}))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=proj, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "removed" not in proc.stderr
    assert keep.read_text() == "mine" and not (users / FRESH_NAME).exists()
