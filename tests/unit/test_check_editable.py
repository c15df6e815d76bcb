"""``check --env`` follows editable installs to the files they import: setuptools' PEP 660
finder (``MAPPING``), ``.pth`` path entries, and ``direct_url.json`` (``dir_info.editable``).

Each pointer is read here from files written as the frontends write them; real pip and uv
editable installs of the HIP sample are in tests/integration/test_check_editable_installs.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocm_build_backend.wheel.check import editable as E
from rocm_build_backend.wheel.check.environment import check_environment, distributions
from helpers import TESTS

BIN = TESTS / "data" / "binaries"


def test_finder_mapping_is_read_as_setuptools_writes_it(tmp_path):
    finder = tmp_path / "__editable___demo_1_0_finder.py"
    finder.write_text(
        "import sys\nfrom importlib.machinery import ModuleSpec\n"
        "MAPPING: dict[str, str] = {'demo': '/src/demo', 'other': '/src/other.py'}\n"
        "NAMESPACES: dict[str, list[str]] = {}\nPATH_PLACEHOLDER = '__editable__.demo-1.0.finder'\n"
    )
    assert E.finder_mapping(finder) == {"demo": "/src/demo", "other": "/src/other.py"}
    finder.write_text("MAPPING = {'demo': '/src/demo'}\n")
    assert E.finder_mapping(finder) == {"demo": "/src/demo"}
    finder.write_text("MAPPING = compute()\n")  # not a literal: nothing is run
    assert E.finder_mapping(finder) == {}
    finder.write_text("def broken(:\n")
    assert E.finder_mapping(finder) == {}


def test_pth_paths_outside_site_packages_only(tmp_path):
    site, src = tmp_path / "site", tmp_path / "src"
    (site / "inside").mkdir(parents=True)
    src.mkdir()
    pth = site / "x.pth"
    pth.write_text(f"# a comment\nimport os; os.getcwd()\n{src}\ninside\n{tmp_path / 'missing'}\n\n")
    assert E.pth_paths(pth, site) == [src.resolve()]


def test_direct_url_names_the_project_only_when_editable(tmp_path):
    info, proj = tmp_path / "demo-1.0.dist-info", tmp_path / "proj"
    info.mkdir()
    proj.mkdir()
    (info / "direct_url.json").write_text(json.dumps({"url": proj.as_uri(), "dir_info": {"editable": True}}))
    assert E.editable_project(info) == proj
    (info / "direct_url.json").write_text(json.dumps({"url": proj.as_uri(), "dir_info": {}}))
    assert E.editable_project(info) is None


def _fake_editable(tmp_path: Path, pointer: str) -> tuple[Path, Path]:
    """A site-packages folder with an editable install of ``demo`` whose sources hold a gfx90a
    library, and a non-importable copy of it under build/."""
    site, proj = tmp_path / "site", tmp_path / "proj"
    (proj / "demo").mkdir(parents=True)
    (proj / "demo" / "__init__.py").write_text("")
    code = (BIN / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes()
    (proj / "demo" / "k.co").write_bytes(code)
    (proj / "build" / "lib.linux-x86_64-cpython-311" / "demo").mkdir(parents=True)
    (proj / "build" / "lib.linux-x86_64-cpython-311" / "demo" / "k.co").write_bytes(code)
    info = site / "demo-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n\n")
    (info / "direct_url.json").write_text(json.dumps({"url": proj.as_uri(), "dir_info": {"editable": True}}))
    files = ["demo-1.0.dist-info/METADATA", "demo-1.0.dist-info/direct_url.json"]
    if pointer == "finder":
        (site / "__editable___demo_1_0_finder.py").write_text(f"MAPPING = {{'demo': {str(proj / 'demo')!r}}}\n")
        (site / "__editable__.demo-1.0.pth").write_text("import __editable___demo_1_0_finder; x.install()\n")
        files += ["__editable___demo_1_0_finder.py", "__editable__.demo-1.0.pth"]
    elif pointer == "pth":
        (site / "__editable__.demo-1.0.pth").write_text(f"{proj}\n")
        files += ["__editable__.demo-1.0.pth"]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files) + "demo-1.0.dist-info/RECORD,,\n")
    return site, proj


@pytest.mark.parametrize("pointer", ["finder", "pth", "direct_url"])
def test_each_pointer_leads_to_the_importable_files(tmp_path, pointer):
    site, proj = _fake_editable(tmp_path, pointer)
    (dist,) = distributions(site)
    followed = [f for f in dist.files if f.startswith("/")]
    assert str(proj / "demo" / "k.co") in followed
    assert not any("/build/" in f for f in followed)  # a copy Python cannot import from there
    report = check_environment(None, ["gfx942"], locations=[site])
    (check,) = report.dists
    assert check.status == "fails" and list(check.files) == [str(proj / "demo" / "k.co")]
    assert check_environment(None, ["gfx90a"], locations=[site]).exit_code == 0
