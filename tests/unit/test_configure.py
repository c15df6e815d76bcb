"""`rocm-build-backend configure` rewrites [build-system] and keeps everything else as it was."""

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

import pytest

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.builder.configure import PIN, configure

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
    result = configure(tmp_path)
    changed, message = result.changed, result.message
    text = (tmp_path / "pyproject.toml").read_text()
    data = tomllib.loads(text)
    assert changed and "setuptools.build_meta" in message
    assert data["build-system"]["build-backend"] == "rocm_build_backend"
    assert data["build-system"]["requires"] == ["setuptools>=70", "wheel", PIN]
    assert data["tool"]["rocm-build-backend"]["backend"] == "setuptools.build_meta"
    for comment in ("# A project like PyTorch's", "# setuptools, pinned", "# keep me", "# name comment"):
        assert comment in text
    # a second run changes nothing
    assert configure(tmp_path).changed is False
    assert (tmp_path / "pyproject.toml").read_text() == text


def test_in_tree_backend_path_moves_to_our_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "backend"\nbackend-path = ["_build"]\n'
    )
    configure(tmp_path)
    data = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert "backend-path" not in data["build-system"]
    assert data["tool"]["rocm-build-backend"] == {"backend": "backend", "backend-path": ["_build"]}


def test_no_build_system_table_means_legacy_setuptools(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 100\n")
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


# ---------------------------------------------------------------- real files that broke (issue 11)


def _configure_and_load(tmp_path, text):
    (tmp_path / "pyproject.toml").write_text(text)
    before = tomllib.loads(text)
    result = configure(tmp_path)
    after_text = (tmp_path / "pyproject.toml").read_text()
    after = tomllib.loads(after_text)  # must still parse
    for key in set(before) | set(after):
        if key not in ("build-system", "tool"):
            assert after.get(key) == before.get(key), key
    others = {k: v for k, v in (before.get("tool") or {}).items() if k != "rocm-build-backend"}
    assert {k: v for k, v in after["tool"].items() if k != "rocm-build-backend"} == others
    return result, after, after_text


def test_requirement_with_extras_stays_valid(tmp_path):
    """llama-cpp-python: the ']' of an extra closed the array for the old text edit."""
    text = (
        '[build-system]\nrequires = ["scikit-build-core[pyproject]>=0.9.2"]\n'
        'build-backend = "scikit_build_core.build"\n\n[project]\nname = "llama_cpp_python"\n'
        'dynamic = ["version"]\n'
    )
    _, after, _ = _configure_and_load(tmp_path, text)
    assert after["build-system"]["requires"] == ["scikit-build-core[pyproject]>=0.9.2", PIN]
    assert after["tool"]["rocm-build-backend"] == {"backend": "scikit_build_core.build"}


def test_torch_extra_in_a_multiline_array(tmp_path):
    text = (
        '[build-system]\nrequires = [\n    "setuptools>=64",\n    "torch[cpu]>=2",\n]\n'
        'build-backend = "setuptools.build_meta"\n\n[project]\nname = "demo"\n'
    )
    _, after, after_text = _configure_and_load(tmp_path, text)
    assert after["build-system"]["requires"] == ["setuptools>=64", "torch[cpu]>=2", PIN]
    assert '    "torch[cpu]>=2",\n' in after_text


def test_bracket_in_a_comment_inside_the_array(tmp_path):
    text = (
        '[build-system]\nrequires = [\n    "setuptools",  # needs >= 64 [see below]\n'
        '    "wheel",  # ] closes nothing\n]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "demo"\nversion = "1"\n'
    )
    _, after, after_text = _configure_and_load(tmp_path, text)
    assert after["build-system"]["requires"] == ["setuptools", "wheel", PIN]
    assert "# ] closes nothing" in after_text and "# needs >= 64 [see below]" in after_text


def test_dotted_keys_keep_the_project_table(tmp_path):
    """A file of dotted keys: a prepended [build-system] header swallowed the project.* keys."""
    text = (
        'build-system.requires = ["setuptools>=64"]\n'
        'build-system.build-backend = "setuptools.build_meta"\n'
        'project.name = "dotted"\nproject.version = "0.1"\n'
    )
    _, after, _ = _configure_and_load(tmp_path, text)
    assert after["project"] == {"name": "dotted", "version": "0.1"}
    assert after["build-system"]["build-backend"] == "rocm_build_backend"


def test_dotted_project_keys_without_a_build_system(tmp_path):
    text = 'project.name = "dotted"\nproject.version = "0.1"\n'
    _, after, _ = _configure_and_load(tmp_path, text)
    assert after["project"] == {"name": "dotted", "version": "0.1"}
    assert after["tool"]["rocm-build-backend"]["backend"] == "setuptools.build_meta:__legacy__"


def test_our_table_named_only_in_a_comment_is_not_configured(tmp_path):
    text = (
        '# later: [tool.rocm-build-backend]\n[build-system]\nrequires = ["setuptools"]\n'
        'build-backend = "setuptools.build_meta"\n'
    )
    result, after, _ = _configure_and_load(tmp_path, text)
    assert result.changed
    assert after["tool"]["rocm-build-backend"] == {"backend": "setuptools.build_meta"}


def test_existing_table_without_backend_gets_it(tmp_path):
    text = (
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[tool.rocm-build-backend]\ntargets = "gfx942"  # the lab\'s GPUs\n'
    )
    _, after, after_text = _configure_and_load(tmp_path, text)
    assert after["tool"]["rocm-build-backend"] == {"targets": "gfx942", "backend": "setuptools.build_meta"}
    assert "# the lab's GPUs" in after_text


def test_existing_table_with_another_backend_is_refused(tmp_path):
    text = (
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[tool.rocm-build-backend]\nbackend = "hatchling.build"\n'
    )
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(RocmBuildBackendError) as exc:
        configure(tmp_path)
    assert "hatchling.build" in exc.value.message
    assert (tmp_path / "pyproject.toml").read_text() == text


def test_invalid_toml_is_refused_and_nothing_written(tmp_path):
    text = '[build-system]\nrequires = ["setuptools"\n'
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(RocmBuildBackendError) as exc:
        configure(tmp_path)
    assert exc.value.exit_code == 2 and "pyproject.toml" in exc.value.message
    assert (tmp_path / "pyproject.toml").read_text() == text
    assert [p.name for p in tmp_path.iterdir()] == ["pyproject.toml"]


def test_requirement_already_listed_is_not_added_twice(tmp_path):
    text = (
        '[build-system]\nrequires = ["setuptools", "rocm_build_backend>=0.1"]\n'
        'build-backend = "setuptools.build_meta"\n'
    )
    _, after, _ = _configure_and_load(tmp_path, text)
    assert after["build-system"]["requires"] == ["setuptools", "rocm_build_backend>=0.1"]


def test_inline_tool_table(tmp_path):
    text = (
        'tool = {black = {line-length = 100}}\n[build-system]\nrequires = ["setuptools"]\n'
        'build-backend = "setuptools.build_meta"\n'
    )
    _, after, _ = _configure_and_load(tmp_path, text)
    assert after["tool"]["rocm-build-backend"] == {"backend": "setuptools.build_meta"}


def test_crlf_file_keeps_crlf(tmp_path):
    text = '[build-system]\r\nrequires = ["setuptools"]\r\nbuild-backend = "setuptools.build_meta"\r\n'
    (tmp_path / "pyproject.toml").write_bytes(text.encode())
    configure(tmp_path)
    raw = (tmp_path / "pyproject.toml").read_bytes()
    assert b"\n" not in raw.replace(b"\r\n", b"")
    assert tomllib.loads(raw.decode())["build-system"]["build-backend"] == "rocm_build_backend"


def test_diff_and_dry_run_write_nothing(tmp_path):
    (tmp_path / "pyproject.toml").write_text(ORIGINAL)
    result = configure(tmp_path, write=False)
    assert result.changed
    assert (tmp_path / "pyproject.toml").read_text() == ORIGINAL
    diff = result.diff()
    assert '-build-backend = "setuptools.build_meta"  # the real one' in diff
    assert '+build-backend = "rocm_build_backend"  # the real one' in diff
    assert "+[tool.rocm-build-backend]" in diff
    assert [p.name for p in tmp_path.iterdir()] == ["pyproject.toml"]


def test_write_keeps_the_file_mode(tmp_path):
    file = tmp_path / "pyproject.toml"
    file.write_text(ORIGINAL)
    file.chmod(0o640)
    configure(tmp_path)
    assert file.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["pyproject.toml"]


def test_too_large_a_file_is_refused(tmp_path):
    (tmp_path / "pyproject.toml").write_text("# x\n" * 300_000)
    with pytest.raises(RocmBuildBackendError, match="too large"):
        configure(tmp_path)


# ------------------------------------------------------------------------------ the command


def _cli(*argv):
    import subprocess

    return subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", "configure", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_diff_shows_the_change_and_writes_nothing(tmp_path):
    (tmp_path / "pyproject.toml").write_text(ORIGINAL)
    proc = _cli(tmp_path, "--diff")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("--- a/pyproject.toml\n+++ b/pyproject.toml\n")
    assert "+requires = [" not in proc.stdout and f'+    "{PIN}",' in proc.stdout
    assert (tmp_path / "pyproject.toml").read_text() == ORIGINAL


def test_cli_dry_run_says_what_it_would_do(tmp_path):
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    proc = _cli(tmp_path, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("would write ") and "__legacy__" in proc.stdout
    assert not (tmp_path / "pyproject.toml").exists()


def test_cli_invalid_toml_is_one_error_and_a_hint(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[build-system\n")
    proc = _cli(tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("error: cannot read ") and lines[1].startswith("hint: ")
    assert "Traceback" not in proc.stderr


def test_cli_not_a_folder(tmp_path):
    proc = _cli(tmp_path / "missing")
    assert proc.returncode == 2 and proc.stderr.startswith("error: ")


def test_tool_tables_spread_over_the_file(tmp_path):
    """llama-cpp-python: [tool.scikit-build] before [project], [tool.pytest.ini_options] after it."""
    text = (
        '[build-system]\nrequires = ["scikit-build-core[pyproject]>=0.9.2"]\n'
        'build-backend = "scikit_build_core.build"\n\n[project]\nname = "llama_cpp_python"\n\n'
        '[tool.scikit-build]\nwheel.packages = ["llama_cpp"]\n\n[project.urls]\nHomepage = "https://x"\n\n'
        '[tool.pytest.ini_options]\ntestpaths = "tests"\n'
    )
    _, after, after_text = _configure_and_load(tmp_path, text)
    assert after["tool"]["rocm-build-backend"] == {"backend": "scikit_build_core.build"}
    assert after_text.startswith(
        text.split("[tool.pytest")[0]
        .replace('build-backend = "scikit_build_core.build"', 'build-backend = "rocm_build_backend"')
        .replace('>=0.9.2"]', f'>=0.9.2", "{PIN}"]')
    )


def test_file_without_a_final_newline(tmp_path):
    text = '[build-system]\nrequires = ["setuptools>=45"]\n\n[tool.setuptools_scm]\nlocal_scheme = "no-local-version"'
    _, after, after_text = _configure_and_load(tmp_path, text)
    assert after["tool"]["setuptools_scm"] == {"local_scheme": "no-local-version"}
    assert after["tool"]["rocm-build-backend"] == {"backend": "setuptools.build_meta:__legacy__"}
    assert after_text.endswith("\n")


# ------------------------------------------------- any layout: a valid edit or a clean refusal

from hypothesis import HealthCheck, assume, given, settings, strategies as st  # noqa: E402

_REQUIRES = st.lists(
    st.sampled_from(
        [
            '"setuptools>=64"',
            '"scikit-build-core[pyproject]>=0.9.2"',
            '"torch[cpu]>=2"',
            '"wheel"  # ] not the end',
            '"rocm-build-backend"',
        ]
    ),
    max_size=3,
)
_ROOT = st.sampled_from(
    [
        'project.name = "dotted"\n',
        "tool.ruff.line-length = 100\n",
        "tool = {black = {line-length = 100}}\n",
        "# [tool.rocm-build-backend] in a comment\n",
        'build-system.build-backend = "setuptools.build_meta"\n',
    ]
)
_TABLES = st.sampled_from(
    [
        '[project]\nname = "p"  # [tool.x]\nversion = "1"\n',
        "[tool.black]\nline-length = 88\n",
        '[tool.scikit-build]\nwheel.packages = ["p"]\n',
        '[[tool.cibuildwheel.overrides]]\nselect = "*"\n',
        '[tool.rocm-build-backend]\ntargets = "gfx942"\n',
        '[project.urls]\nHome = "https://x"\n',
        "[tool]\nfoo = 1\n",
        '[tool.pytest.ini_options]\naddopts = "-q"\n',
    ]
)


@st.composite
def _pyproject(draw):
    root = draw(st.lists(_ROOT, max_size=3, unique=True))
    items = draw(_REQUIRES)
    multiline = draw(st.booleans())
    body = (
        ("[\n" + "".join(f"    {i},\n" for i in items) + "]")
        if multiline
        else "[" + ", ".join(i.split("  #")[0] for i in items) + "]"
    )
    system = draw(
        st.sampled_from(
            [
                f'[build-system]\nrequires = {body}\nbuild-backend = "setuptools.build_meta"\n',
                f"[build-system]\nrequires = {body}\n",
                f"build-system.requires = {body}\n",
                "",
            ]
        )
    )
    tables = draw(st.lists(_TABLES, max_size=4, unique=True))
    place = draw(st.integers(0, len(tables)))
    if system.startswith("build-system."):
        root.append(system)
    elif system:
        tables.insert(place, system)
    text = "".join(root) + "\n".join(tables)
    return text if draw(st.booleans()) else text.rstrip("\n")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_pyproject())
def test_any_layout_gives_a_valid_edit_or_a_clean_refusal(tmp_path_factory, text):
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        assume(False)
    folder = tmp_path_factory.mktemp("p")
    (folder / "pyproject.toml").write_text(text)
    try:
        result = configure(folder)
    except RocmBuildBackendError:
        assert (folder / "pyproject.toml").read_text() == text
        return
    after = tomllib.loads((folder / "pyproject.toml").read_text())
    if not result.changed:
        assert before["build-system"]["build-backend"] == "rocm_build_backend"
        return

    def strip(d):
        return {
            **{k: v for k, v in d.items() if k not in ("build-system", "tool")},
            "tool": {k: v for k, v in (d.get("tool") or {}).items() if k != "rocm-build-backend"},
        }

    assert strip(after) == strip(before)
    assert after["build-system"]["build-backend"] == "rocm_build_backend"
    assert configure(folder).changed is False


def test_an_editor_failure_is_a_refusal_not_a_traceback(tmp_path, monkeypatch):
    """tomlkit raised AttributeError on a layout it cannot append to (llama-cpp-python's, since
    handled); any such failure must end as one error line with nothing written."""
    import tomlkit

    def broken(text):
        raise AttributeError("'OutOfOrderTableProxy' object has no attribute 'append'")

    monkeypatch.setattr(tomlkit, "parse", broken)
    (tmp_path / "pyproject.toml").write_text(ORIGINAL)
    with pytest.raises(RocmBuildBackendError) as exc:
        configure(tmp_path)
    assert exc.value.exit_code == 2 and "cannot edit" in exc.value.message
    assert (tmp_path / "pyproject.toml").read_text() == ORIGINAL


def test_diff_of_a_file_without_a_final_newline_applies_with_patch(tmp_path):
    import shutil
    import subprocess

    text = '[build-system]\nrequires = ["setuptools>=45"]\n\n[tool.setuptools_scm]\nlocal_scheme = "no-local-version"'
    (tmp_path / "pyproject.toml").write_text(text)
    result = configure(tmp_path, write=False)
    assert '-local_scheme = "no-local-version"\n\\ No newline at end of file\n+local_scheme' in result.diff()
    if shutil.which("patch"):
        subprocess.run(["patch", "-p1", "-s"], input=result.diff(), text=True, cwd=tmp_path, check=True)
        assert (tmp_path / "pyproject.toml").read_text() == result.after


# -- safe by default: an exact pin, the build requirements setup.py shows, what isolation lacks --

TORCH_SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension
import numpy, pybind11, packaging.version
import versioneer  # the project's own module, beside setup.py
import cupy_builder  # the project's own package, one folder down (sys.path extended)
import os.path

setup(name="ext", cmdclass={"build_ext": BuildExtension})
"""


def test_it_pins_this_version_and_says_how_to_add_its_hash(tmp_path):
    from rocm_build_backend._version import __version__

    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
    )
    result = configure(tmp_path)
    assert PIN == f"rocm-build-backend=={__version__}" and result.added == (PIN,)
    assert tomllib.loads((tmp_path / "pyproject.toml").read_text())["build-system"]["requires"] == [
        "setuptools>=64",
        PIN,
    ]
    (note,) = result.notes
    assert "--require-hashes" in note and f"{PIN} --hash=sha256:" in note
    assert result.to_json()["requires_added"] == [PIN] and result.to_json()["notes"] == [note]


def test_a_torch_extension_gets_torch_and_hears_what_isolation_lacks(tmp_path):
    (tmp_path / "setup.py").write_text(TORCH_SETUP)
    (tmp_path / "versioneer.py").write_text("")
    (tmp_path / "install" / "cupy_builder").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64", "numpy"]\nbuild-backend = "setuptools.build_meta"\n'
    )
    result = configure(tmp_path)
    requires = tomllib.loads((tmp_path / "pyproject.toml").read_text())["build-system"]["requires"]
    assert requires == ["setuptools>=64", "numpy", PIN, "torch"] and result.added == (PIN, "torch")
    torch_note, lacking = result.notes[1:]
    assert (
        torch_note.startswith("added torch to requires (setup.py imports it)") and "--no-build-isolation" in torch_note
    )
    # not numpy (listed), packaging (setuptools brings it), versioneer, cupy_builder (the project's), os
    assert lacking.startswith("warning: setup.py imports pybind11, which requires does not list")


def test_a_setup_py_only_torch_project_gets_torch_too(tmp_path):
    (tmp_path / "setup.py").write_text(TORCH_SETUP)
    result = configure(tmp_path)
    requires = tomllib.loads((tmp_path / "pyproject.toml").read_text())["build-system"]["requires"]
    assert requires == ["setuptools>=40.8.0", PIN, "torch"] and "torch" in result.added


def test_an_unpinned_shim_already_listed_is_warned_about(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools", "rocm-build-backend>=0.1"]\n'
        'build-backend = "setuptools.build_meta"\n'
    )
    result = configure(tmp_path)
    assert result.added == ()
    (note,) = result.notes
    assert note.startswith("warning: requires lists 'rocm-build-backend>=0.1' without an exact version") and PIN in note


def test_the_cli_prints_the_notes_on_stderr(tmp_path):
    (tmp_path / "setup.py").write_text(TORCH_SETUP)
    proc = _cli(tmp_path, "--dry-run")
    assert proc.returncode == 0 and proc.stdout.startswith("would write ")
    lines = proc.stderr.splitlines()
    assert lines[0].startswith(f"note: {PIN} is pinned") and lines[1].startswith("note: added torch")
    assert lines[2].startswith("warning: setup.py imports numpy, pybind11, versioneer, cupy_builder,")
    assert not (tmp_path / "pyproject.toml").exists()
