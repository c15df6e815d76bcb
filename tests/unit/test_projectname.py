"""A project's distribution name, read from pyproject.toml, PKG-INFO, setup.cfg or setup.py (never run)."""

from __future__ import annotations

import pytest

from rocm_build_backend.builder.projectname import (
    MAX_BYTES,
    find_name,
    name_from_pkg_info,
    name_from_setup_cfg,
    name_from_setup_py,
)


def test_order_pyproject_then_pkg_info_then_setup_cfg_then_setup_py(tmp_path):
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='from-setup-py')\n")
    assert find_name(tmp_path) == ("from-setup-py", "setup.py")
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = from-setup-cfg\n")
    assert find_name(tmp_path) == ("from-setup-cfg", "setup.cfg")
    (tmp_path / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: from-pkg-info\n")
    assert find_name(tmp_path) == ("from-pkg-info", "PKG-INFO")
    assert find_name(tmp_path, {"project": {"name": "from-pyproject"}}) == ("from-pyproject", "pyproject.toml")


def test_nothing_names_it(tmp_path):
    assert find_name(tmp_path) == (None, None)
    (tmp_path / "setup.py").write_text("import setuptools\nsetuptools.setup(**load())\n")
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = attr: pkg.NAME\n")
    assert find_name(tmp_path, {"project": {"dynamic": ["name"]}}) == (None, None)


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("from setuptools import setup\nsetup(name='deepspeed', version='1')\n", "deepspeed"),
        ('import setuptools\nif True:\n    setuptools.setup(\n        name="xformers",\n    )\n', "xformers"),
        ('PACKAGE_NAME = "flash_attn"\nsetup(name=PACKAGE_NAME)\n', "flash_attn"),
        ('setup(name=f"bitsandbytes")\n', "bitsandbytes"),
        ("setup_info = dict(\n    name='torchvision',\n)\nsetup(**setup_info)\n", "torchvision"),
        ("setup(**{'name': 'from-a-dict'})\n", "from-a-dict"),
        (
            'import os\npackage_name = os.getenv("TORCHVISION_PACKAGE_NAME", "torchvision")\n'
            'if __name__ == "__main__":\n    setup(name=package_name)\n',
            "torchvision",
        ),
        ('setup(name=os.environ.get("PKG", "from-environ-default"))\n', "from-environ-default"),
        ('setup(name=os.getenv("PKG"))\n', None),
        ("setup(name=compute())\n", None),
        ('setup(name=f"{prefix}-kernels")\n', None),
        ("print 'python 2'\nsetup(name='old')\n", None),
        ("setup(name='')\n", None),
    ],
)
def test_setup_py_is_read_not_run(source, name):
    assert name_from_setup_py(source) == name


def test_setup_py_never_runs(tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "setup.py").write_text(f"open({str(marker)!r}, 'w').close()\nsetup(name='x')\n")
    assert find_name(tmp_path) == ("x", "setup.py")
    assert not marker.exists()


def test_pkg_info_headers_only():
    assert name_from_pkg_info("Metadata-Version: 2.1\nSummary: s\nname:  flash_attn \n") == "flash_attn"
    assert name_from_pkg_info("Metadata-Version: 2.1\n\nName: in-the-body\n") is None


def test_setup_cfg_that_does_not_parse():
    assert name_from_setup_cfg("[metadata\nname = x\n") is None
    assert name_from_setup_cfg("[metadata]\nname = cupy\n") == "cupy"


def test_too_large_a_file_gives_no_name(tmp_path):
    (tmp_path / "setup.py").write_text("setup(name='x')\n" + "#" * (MAX_BYTES + 1))
    assert find_name(tmp_path) == (None, None)
