"""`rocm-build-backend configure` rewrites [build-system] and keeps everything else as it was."""

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

import pytest

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.build.project import configure

ORIGINAL = """\
# A project like PyTorch's, with comments we must keep.
[build-system]
# setuptools, pinned
requires = [
    "setuptools>=70",  # keep me
    "wheel",
]
build-backend = "setuptools.build_meta"  # the real one

[project]
name = "demo"  # name comment
version = "1.0"
"""


def test_wraps_the_declared_backend_and_keeps_comments(tmp_path):
    (tmp_path / "pyproject.toml").write_text(ORIGINAL)
    changed, message = configure(tmp_path)
    text = (tmp_path / "pyproject.toml").read_text()
    data = tomllib.loads(text)
    assert changed and "setuptools.build_meta" in message
    assert data["build-system"]["build-backend"] == "rocm_build_backend"
    assert data["build-system"]["requires"] == ["setuptools>=70", "wheel", "rocm-build-backend"]
    assert data["tool"]["rocm-build-backend"]["backend"] == "setuptools.build_meta"
    for comment in ("# A project like PyTorch's", "# setuptools, pinned", "# keep me", "# name comment"):
        assert comment in text
    # a second run changes nothing
    assert configure(tmp_path)[0] is False
    assert (tmp_path / "pyproject.toml").read_text() == text


def test_in_tree_backend_path_moves_to_our_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "backend"\nbackend-path = ["_build"]\n')
    configure(tmp_path)
    data = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert "backend-path" not in data["build-system"]
    assert data["tool"]["rocm-build-backend"] == {"backend": "backend", "backend-path": ["_build"]}


def test_no_build_system_table_means_legacy_setuptools(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.black]\nline-length = 100\n')
    configure(tmp_path)
    data = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert data["build-system"]["build-backend"] == "rocm_build_backend"
    assert data["tool"]["rocm-build-backend"]["backend"] == "setuptools.build_meta:__legacy__"
    assert data["tool"]["black"] == {"line-length": 100}


def test_setup_py_only_project(tmp_path):
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    configure(tmp_path)
    data = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert data["tool"]["rocm-build-backend"]["backend"] == "setuptools.build_meta:__legacy__"


def test_not_a_project(tmp_path):
    with pytest.raises(RocmBuildBackendError) as exc:
        configure(tmp_path)
    assert "no pyproject.toml or setup.py" in exc.value.message
