"""The settings schema and reference: generated from the settings model, in sync with it, agreeing
with the tool's own parsers, and found by validate-pyproject through its entry point."""

from __future__ import annotations

import sys
import tomllib

import jsonschema
import pytest

from helpers import ROOT, run, write_file
from rocm_build_backend import data
from rocm_build_backend.builder import settings_schema as gen
from rocm_build_backend.builder.settings import Settings, load_settings, value_schema
from rocm_build_backend.errors import ConfigError


def test_the_shipped_schema_is_the_generated_one():
    """A changed setting without `python tools/gen_settings.py` fails here."""
    assert data.path(gen.SCHEMA_NAME).read_text(encoding="utf-8") == gen.schema_text()
    assert data.settings_schema() == gen.settings_schema()


def test_the_settings_reference_is_the_generated_one():
    assert (ROOT / gen.REFERENCE).read_text(encoding="utf-8") == gen.reference_markdown()


def test_every_setting_is_in_the_schema_with_its_default_and_words():
    props = gen.settings_schema()["properties"]
    assert list(props) == Settings.keys()
    assert props["verify"]["enum"] == ["error", "warn", "off"] and props["verify"]["default"] == "error"
    assert props["backend-path"]["default"] == [] and props["enforce"]["default"] is True
    for key, prop in props.items():
        assert prop["description"], key
    reference = gen.reference_markdown()
    assert all(f"\n## {key}\n" in reference for key in props)
    assert '`"warn"`' in reference


def test_a_parser_without_a_schema_is_named():
    with pytest.raises(KeyError, match="add one to value_schema"):
        value_schema(lambda value: value)


# (key, value): both the tool and the schema accept each; the tool's parser is the judge.
AGREE = [
    ("targets", "auto"),
    ("targets", ["gfx942", "gfx90a"]),
    ("targets", "gfx90a;gfx942"),
    ("targets", ["sm_90"]),
    ("max-jobs", 8),
    ("max-jobs", "auto"),
    ("max-jobs", "12"),
    ("memory-per-job", 16),
    ("verify", "warn"),
    ("verify", "off"),
    ("stale", "clean"),
    ("ptx", "highest"),
    ("vendor", "nvidia"),
    ("guard", True),
    ("guard", "yes"),
    ("local-version", False),
    ("backend", "setuptools.build_meta"),
    ("backend", "scikit_build_core.build"),
    ("backend", "pkg.sub:obj.attr"),
    ("backend-path", ["_b"]),
    ("compiler", "clang++-19"),
    ("sysfs-root", "/tmp/x"),
    ("profile", "none"),
]
# (key, value): both reject each.
DISAGREE = [
    ("targets", []),
    ("targets", 5),
    ("targets", ";,"),
    ("max-jobs", 0),
    ("max-jobs", 5000),
    ("max-jobs", 1.5),
    ("max-jobs", True),
    ("memory-per-job", 2048),
    ("memory-per-job", "auto"),
    ("verify", "warning"),
    ("stale", "keep"),
    ("ptx", "some"),
    ("vendor", "intel"),
    ("guard", "maybe"),
    ("guard", 2),
    ("backend", "rocm_build_backend"),
    ("backend", "rocm_build_backend.api"),
    ("backend", "not a module"),
    ("backend-path", 5),
    ("backend-path", [1]),
]


def _tool_accepts(key, value) -> bool:
    try:
        load_settings({"tool": {"rocm-build-backend": {key: value}}}, {}, {})
    except ConfigError:
        return False
    return True


def _schema_accepts(key, value) -> bool:
    validator = jsonschema.Draft7Validator(data.settings_schema())
    return validator.is_valid({key: value})


@pytest.mark.parametrize("key, value", AGREE + DISAGREE)
def test_the_schema_and_the_parser_agree(key, value):
    expected = (key, value) in AGREE
    assert _tool_accepts(key, value) is expected
    assert _schema_accepts(key, value) is expected


def test_the_schema_refuses_an_unknown_key():
    assert not _schema_accepts("targts", ["gfx942"])
    jsonschema.Draft7Validator.check_schema(data.settings_schema())


def test_only_its_own_table(tmp_path):
    with pytest.raises(ValueError, match=r"only \[tool.rocm-build-backend\]"):
        data.settings_schema("scikit-build")


@pytest.fixture
def plugin_path(tmp_path):
    """A dist-info with this checkout's entry points (from pyproject.toml), so validate-pyproject
    finds the plugin the way it finds an installed one."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    points = project["project"]["entry-points"]["validate_pyproject.tool_schema"]
    site = tmp_path / "site"
    info = site / "rocm_build_backend_schema-0.dist-info"
    write_file(info / "METADATA", "Metadata-Version: 2.1\nName: rocm-build-backend-schema\nVersion: 0\n")
    write_file(
        info / "entry_points.txt",
        "[validate_pyproject.tool_schema]\n" + "".join(f"{name} = {target}\n" for name, target in points.items()),
    )
    return f"{ROOT}:{site}"


PYPROJECT = """\
[build-system]
requires = ["rocm-build-backend==0.1.0", "setuptools>=77"]
build-backend = "rocm_build_backend"

[project]
name = "demo"
version = "1.0"

[tool.rocm-build-backend]
{table}
"""


@pytest.mark.parametrize(
    "table, ok",
    [
        ('targets = ["gfx942"]\nverify = "warn"\nmax-jobs = 8\nbackend = "setuptools.build_meta"', True),
        ('targts = ["gfx942"]', False),
        ('verify = "sometimes"', False),
    ],
)
def test_validate_pyproject_checks_the_table(tmp_path, plugin_path, table, ok):
    pyproject = write_file(tmp_path / "pyproject.toml", PYPROJECT.format(table=table))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": plugin_path, "HOME": str(tmp_path)}
    proc = run([sys.executable, "-m", "validate_pyproject", pyproject], env=env)
    out = proc.stdout + proc.stderr
    assert "rocm-build-backend" in run([sys.executable, "-m", "validate_pyproject", "--help"], env=env).stdout
    assert (proc.returncode == 0) is ok, out
    if not ok:
        assert "tool.rocm-build-backend" in out, out
        assert ("targts" in out) if "targts" in table else ("sometimes" in out or "verify" in out), out
