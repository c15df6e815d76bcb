"""The public Python API: every documented name resolves, and its reference page lists them."""

from __future__ import annotations

import re
import subprocess
import sys

import rocm_build_backend.api as api
from helpers import ROOT


def test_every_public_name_resolves_to_its_home():
    for name in api.__all__:
        value = getattr(api, name)
        assert getattr(value, "__name__", name) == name, name


def test_the_reference_lists_the_public_api():
    text = (ROOT / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([A-Za-z_]+)", text))
    assert set(api.__all__) <= named, sorted(set(api.__all__) - named)


def test_importing_the_api_loads_nothing_else():
    code = (
        "import sys, rocm_build_backend.api; "
        "print(sorted(m for m in sys.modules if m.startswith('rocm_build_backend')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['rocm_build_backend', 'rocm_build_backend._version', 'rocm_build_backend.api']"


def test_the_type_checker_imports_match_the_lazy_homes():
    """api.py's TYPE_CHECKING block names every public name from the module it loads from."""
    import ast

    tree = ast.parse((ROOT / "rocm_build_backend" / "api.py").read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    seen = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        for alias in node.names:
            assert alias.asname == alias.name  # `X as X`: an explicit re-export under mypy --strict
            seen[alias.name] = node.module
    assert seen == api._HOMES
