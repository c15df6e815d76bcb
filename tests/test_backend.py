"""Loading the wrapped backend, and mirroring exactly the hooks it has."""

import subprocess
import sys
import textwrap

import pytest

from conftest import assert_valid_stamp
from rocm_build_backend.builder.backend import load_backend
from rocm_build_backend.errors import BackendUnavailableError


def test_loads_module_and_object(tmp_path):
    backend = load_backend("setuptools.build_meta:__legacy__", source_dir=tmp_path)
    assert hasattr(backend, "build_wheel")


def test_missing_backend_names_module_and_requirement(tmp_path):
    with pytest.raises(BackendUnavailableError) as exc:
        load_backend("scikit_build_core_nope.build", source_dir=tmp_path)
    assert "scikit_build_core_nope.build" in exc.value.message
    with pytest.raises(BackendUnavailableError) as exc:
        load_backend("mesonpy_missing", source_dir=tmp_path)
    assert 'requires' in exc.value.hint


def test_in_tree_backend_path(tmp_path):
    (tmp_path / "_build").mkdir()
    (tmp_path / "_build" / "mybackend_intree.py").write_text(
        "def build_wheel(d, c=None, m=None): return 'x.whl'\ndef build_sdist(d, c=None): return 'x.tar.gz'\n")
    backend = load_backend("mybackend_intree", ["_build"], source_dir=tmp_path)
    assert backend.build_wheel("d") == "x.whl"
    with pytest.raises(BackendUnavailableError) as exc:
        load_backend("mybackend_intree", ["../outside"], source_dir=tmp_path)
    assert "outside the project" in exc.value.message


def test_not_a_backend(tmp_path):
    with pytest.raises(BackendUnavailableError) as exc:
        load_backend("json", source_dir=tmp_path)
    assert "not a build backend" in exc.value.message


HOOKS = ["build_editable", "prepare_metadata_for_build_wheel", "prepare_metadata_for_build_editable",
         "get_requires_for_build_wheel", "get_requires_for_build_sdist", "get_requires_for_build_editable"]


@pytest.mark.parametrize("wrapped, env", [
    ("setuptools.build_meta", {}),
    ("hatchling.build", {}),
    ("hatchling.build", {"PIP_BUILD_TRACKER": "/tmp/x"}),  # hatchling hides prepare_metadata under pip
    ("minimal_backend", {}),
])
def test_optional_hooks_mirror_the_wrapped_backend(tmp_path, wrapped, env):
    """In a fresh process, as frontends call it: hasattr(shim, hook) == hasattr(wrapped, hook)."""
    (tmp_path / "minimal_backend.py").write_text(
        "def build_wheel(d, c=None, m=None): pass\ndef build_sdist(d, c=None): pass\n")
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.rocm-build-backend]\nbackend = "{wrapped}"\nbackend-path = ["."]\n'
        if wrapped == "minimal_backend" else f'[tool.rocm-build-backend]\nbackend = "{wrapped}"\n')
    code = textwrap.dedent(f"""
        import importlib, json, sys
        sys.path.insert(0, '.')
        shim = importlib.import_module('rocm_build_backend')
        inner = importlib.import_module('{wrapped}')
        print(json.dumps([[h, hasattr(shim, h), hasattr(inner, h)] for h in {HOOKS!r}]))
    """)
    import json
    import os

    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, **env}, check=True)
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
    code = ("import json, rocm_build_backend as s; "
            "print(json.dumps([hasattr(s, 'get_requires_for_build_wheel'), s.get_requires_for_build_wheel(None), "
            "hasattr(s, 'build_editable')]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env=dict(os.environ), check=True)
    assert json.loads(out.stdout) == [True, ["mesonpy-not-here"], False]


PURE_PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "rocm_build_backend"
[project]
name = "purepkg"
version = "1.0"
[tool.rocm-build-backend]
backend = "setuptools.build_meta"
verify = "off"
"""


def _kfd(root, version):
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    for i, v in enumerate((0, version)):
        (nodes / str(i)).mkdir(parents=True)
        (nodes / str(i) / "properties").write_text(
            f"cpu_cores_count {16 if v == 0 else 0}\nsimd_count {0 if v == 0 else 440}\nvendor_id 4098\n"
            f"gfx_target_version {v}\ndrm_render_minor {128 + i}\n")
        (nodes / str(i) / "gpu_id").write_text("0\n" if v == 0 else f"{1000 + i}\n")
    return root


@pytest.mark.parametrize("channel, source", [
    ("-C", "settings"), ("env", "settings"), ("pyproject", "settings"),
    ("PYTORCH_ROCM_ARCH", "PYTORCH_ROCM_ARCH"), ("detected", "detected:kfd"),
])
def test_every_stamp_follows_the_shipped_schema(tmp_path, channel, source):
    """requested.source was written as "from -C rocm-build-backend.targets", "detected by kfd", ..."""
    import os

    from rocm_build_backend.wheel.stamp import read_stamp

    proj = tmp_path / "proj"
    (proj / "purepkg").mkdir(parents=True)
    (proj / "purepkg" / "__init__.py").write_text("")
    table = 'targets = "gfx90a"\n' if channel == "pyproject" else ""
    (proj / "pyproject.toml").write_text(PURE_PYPROJECT + table)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_BUILD_BACKEND_") and k != "PYTORCH_ROCM_ARCH"}
    settings = {"rocm-build-backend.targets": "gfx90a"} if channel == "-C" else {}
    if channel == "env":
        env["ROCM_BUILD_BACKEND_TARGETS"] = "gfx90a"
    elif channel == "PYTORCH_ROCM_ARCH":
        env["PYTORCH_ROCM_ARCH"] = "gfx90a"
    elif channel == "detected":
        env["ROCM_BUILD_BACKEND_SYSFS_ROOT"] = str(_kfd(tmp_path / "sysroot", 90010))
    out = tmp_path / "out"
    code = f"import rocm_build_backend as b; print(b.build_wheel({str(out)!r}, {settings!r}))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=proj, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    wheel = out / proc.stdout.strip().splitlines()[-1]
    assert assert_valid_stamp(wheel) is not None
    assert read_stamp(wheel)["requested"] == {"targets": ["gfx90a"], "source": source}


def _gpu_less_env(tmp_path):
    """No GPU and no way to find one: an empty sysfs, no ROCm tools on PATH, no target variables."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_BUILD_BACKEND_")
           and k not in ("PYTORCH_ROCM_ARCH", "HSA_OVERRIDE_GFX_VERSION", "PIP_CONFIG_FILE")}
    (tmp_path / "empty-root").mkdir()
    env.update(ROCM_BUILD_BACKEND_SYSFS_ROOT=str(tmp_path / "empty-root"), PATH=os.path.dirname(sys.executable),
               PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def _pure_project(tmp_path, extra=""):
    proj = tmp_path / "proj"
    (proj / "purepkg").mkdir(parents=True)
    (proj / "purepkg" / "__init__.py").write_text("")
    (proj / "pyproject.toml").write_text(PURE_PYPROJECT + extra)
    return proj


def test_preparing_metadata_needs_no_gpu(tmp_path):
    """pip install --dry-run --report . failed on a machine without a GPU: the metadata does not
    depend on the targets (unless local-version is on)."""
    import json

    proj = _pure_project(tmp_path)
    env = _gpu_less_env(tmp_path)
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-build-isolation", "--no-deps",
                           "--report", str(report), str(proj)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (item,) = json.loads(report.read_text())["install"]
    assert item["metadata"]["name"] == "purepkg" and item["metadata"]["version"] == "1.0"
    # verify = "off": the project has no GPU code, so its build needs no GPU either
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w",
                            str(tmp_path / "out"), str(proj)], capture_output=True, text=True, env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    # a project that may have GPU code still needs targets, and says so
    (proj / "pyproject.toml").write_text(PURE_PYPROJECT.replace('verify = "off"', 'verify = "error"'))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w",
                            str(tmp_path / "out2"), str(proj)], capture_output=True, text=True, env=env)
    assert built.returncode != 0 and "rocm-build-backend: error: " in built.stdout + built.stderr


def test_preparing_metadata_with_local_version_needs_the_targets(tmp_path):
    proj = _pure_project(tmp_path, "local-version = true\n")
    text = (proj / "pyproject.toml").read_text().replace('verify = "off"', 'verify = "error"')
    (proj / "pyproject.toml").write_text(text)  # a project that may have GPU code
    code = "import rocm_build_backend as b; print(b.prepare_metadata_for_build_wheel('md'))"
    (proj / "md").mkdir()
    proc = subprocess.run([sys.executable, "-c", code], cwd=proj, capture_output=True, text=True, env=_gpu_less_env(tmp_path))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "rocm-build-backend: error: " in proc.stderr
