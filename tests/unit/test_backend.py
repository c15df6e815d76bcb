"""Loading the wrapped backend, and mirroring exactly the hooks it has."""

import subprocess
import sys
import textwrap

import pytest

from rocm_build_backend.builder.backend import load_backend
from rocm_build_backend.errors import BackendUnavailableError
from helpers import gpu_less_env, pure_project


def test_loads_module_and_object(tmp_path):
    backend = load_backend("setuptools.build_meta:__legacy__", source_dir=tmp_path)
    assert hasattr(backend, "build_wheel")


def test_missing_backend_names_module_and_requirement(tmp_path):
    with pytest.raises(BackendUnavailableError) as exc:
        load_backend("scikit_build_core_nope.build", source_dir=tmp_path)
    assert "scikit_build_core_nope.build" in exc.value.message
    with pytest.raises(BackendUnavailableError) as exc:
        load_backend("mesonpy_missing", source_dir=tmp_path)
    assert "requires" in exc.value.hint


def test_in_tree_backend_path(tmp_path):
    (tmp_path / "_build").mkdir()
    (tmp_path / "_build" / "mybackend_intree.py").write_text(
        "def build_wheel(d, c=None, m=None): return 'x.whl'\ndef build_sdist(d, c=None): return 'x.tar.gz'\n"
    )
    backend = load_backend("mybackend_intree", ["_build"], source_dir=tmp_path)
    assert backend.build_wheel("d") == "x.whl"
    with pytest.raises(BackendUnavailableError) as exc:
        load_backend("mybackend_intree", ["../outside"], source_dir=tmp_path)
    assert "outside the project" in exc.value.message


def test_not_a_backend(tmp_path):
    with pytest.raises(BackendUnavailableError) as exc:
        load_backend("json", source_dir=tmp_path)
    assert "not a build backend" in exc.value.message


HOOKS = [
    "build_editable",
    "prepare_metadata_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "get_requires_for_build_wheel",
    "get_requires_for_build_sdist",
    "get_requires_for_build_editable",
]


@pytest.mark.parametrize(
    "wrapped, env",
    [
        ("setuptools.build_meta", {}),
        ("hatchling.build", {}),
        ("hatchling.build", {"PIP_BUILD_TRACKER": "/tmp/x"}),  # hatchling hides prepare_metadata under pip
        ("minimal_backend", {}),
    ],
)
def test_optional_hooks_mirror_the_wrapped_backend(tmp_path, wrapped, env):
    """In a fresh process, as frontends call it: hasattr(shim, hook) == hasattr(wrapped, hook)."""
    (tmp_path / "minimal_backend.py").write_text(
        "def build_wheel(d, c=None, m=None): pass\ndef build_sdist(d, c=None): pass\n"
    )
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.rocm-build-backend]\nbackend = "{wrapped}"\nbackend-path = ["."]\n'
        if wrapped == "minimal_backend"
        else f'[tool.rocm-build-backend]\nbackend = "{wrapped}"\n'
    )
    code = textwrap.dedent(f"""
        import importlib, json, sys
        sys.path.insert(0, '.')
        shim = importlib.import_module('rocm_build_backend')
        inner = importlib.import_module('{wrapped}')
        print(json.dumps([[h, hasattr(shim, h), hasattr(inner, h)] for h in {HOOKS!r}]))
    """)
    import json
    import os

    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=True,
    )
    rows = json.loads(out.stdout)
    for hook, shim_has, inner_has in rows:
        assert shim_has == inner_has, hook
    if wrapped == "minimal_backend":
        assert not any(r[1] for r in rows)
    if wrapped == "setuptools.build_meta":
        assert all(r[1] for r in rows)


def test_get_requires_asks_for_a_wrapped_backend_not_installed_yet(tmp_path):
    """With build isolation, [build-system] requires may name only the shim: get_requires_*
    then returns the wrapped backend's distribution, so the frontend installs it."""
    import json
    import os

    (tmp_path / "pyproject.toml").write_text('[tool.rocm-build-backend]\nbackend = "mesonpy_not_here.build"\n')
    code = (
        "import json, rocm_build_backend as s; "
        "print(json.dumps([hasattr(s, 'get_requires_for_build_wheel'), s.get_requires_for_build_wheel(None), "
        "hasattr(s, 'build_editable')]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=dict(os.environ), check=True
    )
    assert json.loads(out.stdout) == [True, ["mesonpy-not-here"], False]


def test_preparing_metadata_with_local_version_needs_the_targets(tmp_path):
    proj = pure_project(tmp_path, "local-version = true\n")
    text = (proj / "pyproject.toml").read_text().replace('verify = "off"', 'verify = "error"')
    (proj / "pyproject.toml").write_text(text)  # a project that may have GPU code
    code = "import rocm_build_backend as b; print(b.prepare_metadata_for_build_wheel('md'))"
    (proj / "md").mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=proj, capture_output=True, text=True, env=gpu_less_env(tmp_path)
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "rocm-build-backend: error: " in proc.stderr
