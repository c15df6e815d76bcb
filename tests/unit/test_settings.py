"""One settings model: precedence (-C > environment > pyproject > default), as a table."""

import pytest

from rocm_build_backend.errors import ConfigError
from rocm_build_backend.builder.settings import Settings, env_name, load_settings, settings_table, split_config_settings


def _pyproject(**table):
    return {"tool": {"rocm-build-backend": table}}


# (pyproject value, env value, -C value) -> (value, origin)
PRECEDENCE = [
    (None, None, None, "auto", "default"),
    (3, None, None, 3, "pyproject"),
    (3, "5", None, 5, "env"),
    (3, "5", "7", 7, "-C"),
    (None, None, "7", 7, "-C"),
    (None, "5", None, 5, "env"),
    (3, None, "7", 7, "-C"),
]


@pytest.mark.parametrize("pyproject, env, cs, value, origin", PRECEDENCE)
def test_precedence_table(pyproject, env, cs, value, origin):
    table = {} if pyproject is None else {"max-jobs": pyproject}
    environ = {} if env is None else {"ROCM_BUILD_BACKEND_MAX_JOBS": env}
    config = {} if cs is None else {"rocm-build-backend.max-jobs": cs}
    s = load_settings(_pyproject(**table), config, environ)
    assert s.max_jobs == value
    assert s.source_of("max-jobs") == origin


def test_every_setting_has_one_name_in_every_channel():
    for key in Settings.keys():
        assert env_name(key) == "ROCM_BUILD_BACKEND_" + key.upper().replace("-", "_")
    keys = [row[0] for row in settings_table()]
    assert {"backend", "backend-path", "targets", "max-jobs", "verify", "stale", "local-version", "guard"} <= set(keys)


def test_split_config_settings_forwards_the_rest_unchanged():
    ours, rest = split_config_settings(
        {
            "rocm-build-backend.targets": "gfx942",
            "cmake.define.FOO": "1",
            "--build-option": ["a", "b"],
        }
    )
    assert ours == {"targets": "gfx942"}
    assert rest == {"cmake.define.FOO": "1", "--build-option": ["a", "b"]}
    assert split_config_settings(None) == ({}, {})


def test_values_parsed_per_channel():
    s = load_settings(
        _pyproject(targets=["gfx942", "gfx90a"], **{"local-version": True, "backend-path": ["_b"]}),
        {"rocm-build-backend.verify": "WARN"},
        {"ROCM_BUILD_BACKEND_GUARD": "yes"},
    )
    assert s.targets == ["gfx90a", "gfx942"]
    assert s.local_version is True and s.guard is True and s.verify == "warn"
    assert s.backend_path == ["_b"]
    s = load_settings(None, {"rocm-build-backend.targets": "gfx90a,gfx942"}, {})
    assert s.targets == ["gfx90a", "gfx942"] and s.source_of("targets") == "-C"


def test_all_problems_reported_together_with_did_you_mean():
    with pytest.raises(ConfigError) as exc:
        load_settings(
            _pyproject(target="gfx942", verify="maybe"),
            {"rocm-build-backend.max_jobs": "4", "rocm-build-backend.max-jobs": "zero"},
            {"ROCM_BUILD_BACKEND_TARGETS": "gfx924", "ROCM_BUILD_BACKEND_STAEL": "clean"},
        )
    problems = exc.value.problems
    text = "\n".join(problems)
    assert len(problems) == 6, problems
    assert "unknown setting [tool.rocm-build-backend] target (did you mean 'targets'?)" in text
    assert "bad value 'maybe' for [tool.rocm-build-backend] verify" in text
    assert "unknown setting -C rocm-build-backend.max_jobs (did you mean 'max-jobs'?)" in text
    assert "bad value 'zero' for -C rocm-build-backend.max-jobs" in text
    assert "unknown GPU target 'gfx924' (did you mean 'gfx942'" in text and "ROCM_BUILD_BACKEND_TARGETS" in text
    assert "ROCM_BUILD_BACKEND_STAEL (did you mean 'stale'?)" in text
    assert exc.value.hint


@pytest.mark.parametrize(
    "key, raw",
    [
        ("backend", "not a module!"),
        ("max-jobs", "0"),
        ("max-jobs", "-3"),
        ("stale", "delete"),
        ("guard", "perhaps"),
        ("targets", ""),
        ("targets", 5),
    ],
)
def test_bad_values(key, raw):
    with pytest.raises(ConfigError) as exc:
        load_settings(_pyproject(**{key: raw}), None, {})
    assert key in exc.value.message


def test_defaults():
    s = load_settings(None, None, {})
    assert s.backend == "setuptools.build_meta" and s.targets == "auto" and s.verify == "error"
    assert s.stale == "error" and s.local_version is False and s.pinned_tools is True


def test_the_guards_run_time_switch_is_not_a_build_setting():
    s = load_settings(None, None, {"ROCM_BUILD_BACKEND_GUARD_OFF": "1", "ROCM_BUILD_BACKEND_GUARD": "true"})
    assert s.guard is True


@pytest.mark.parametrize(
    "pyproject, words",
    [
        ({"tool": {"rocm-build-backend": "setuptools.build_meta"}}, "must be a table"),
        ({"tool": "x", "project": {}}, None),
    ],
)
def test_malformed_pyproject_is_a_clear_error(pyproject, words):
    if words is None:
        assert load_settings(pyproject, None, {}).backend == "setuptools.build_meta"
        return
    with pytest.raises(ConfigError) as exc:
        load_settings(pyproject, None, {})
    assert words in exc.value.message


@pytest.mark.parametrize("raw", ["auto", "AUTO", "0", "x"])
def test_memory_per_job_is_a_number(raw):
    with pytest.raises(ConfigError):
        load_settings(None, None, {"ROCM_BUILD_BACKEND_MEMORY_PER_JOB": raw})
    assert load_settings(None, None, {"ROCM_BUILD_BACKEND_MEMORY_PER_JOB": "8"}).memory_per_job == 8


def test_repeated_config_settings():
    """pip turns a repeated -C key into a list: targets add up, other keys take the last."""
    s = load_settings(
        None, {"rocm-build-backend.targets": ["gfx90a", "gfx942"], "rocm-build-backend.verify": ["off", "warn"]}, {}
    )
    assert s.targets == ["gfx90a", "gfx942"] and s.verify == "warn"


@pytest.mark.parametrize("key", ["max-jobs", "memory-per-job"])
@pytest.mark.parametrize(
    "raw",
    [
        float("inf"),
        float("-inf"),
        float("nan"),
        1.9,
        2.0,
        1e30,
        True,
        False,
        "inf",
        "1e30",
        "1.9",
        "true",
        10**30,
        "1" + "0" * 30,
        [4],
        {"n": 4},
    ],
)
def test_numbers_must_be_whole_and_sane(key, raw):
    """inf gave an OverflowError; 1.9 and true became 1; 1e30 a 31-digit MAX_JOBS."""
    with pytest.raises(ConfigError) as exc:
        load_settings(_pyproject(**{key: raw}), None, {})
    assert exc.value.message.count("\n") == 0 and key in exc.value.message


@pytest.mark.parametrize(
    "key, raw, value",
    [
        ("max-jobs", 8, 8),
        ("max-jobs", "8", 8),
        ("max-jobs", " 12 ", 12),
        ("max-jobs", "auto", "auto"),
        ("max-jobs", 1024, 1024),
        ("memory-per-job", 16, 16),
        ("memory-per-job", "2", 2),
    ],
)
def test_whole_numbers_are_accepted(key, raw, value):
    s = load_settings(_pyproject(**{key: raw}), None, {})
    assert getattr(s, key.replace("-", "_")) == value


@pytest.mark.parametrize(
    "spec", ["rocm_build_backend", "rocm_build_backend:__init__", "rocm_build_backend.builder.flow"]
)
def test_the_shim_cannot_wrap_itself(spec):
    """backend = "rocm_build_backend" recursed until RecursionError."""
    with pytest.raises(ConfigError) as exc:
        load_settings(_pyproject(backend=spec), None, {})
    assert "cannot wrap itself" in exc.value.message


@pytest.mark.parametrize("data", [b'[project]\nname = "caf\xe9"\n', b"\xff\xfe[\x00p\x00", b"\x00\x00"])
def test_a_pyproject_that_is_not_utf8_is_a_clear_error(tmp_path, data):
    """A Latin-1 or UTF-16 pyproject.toml gave a UnicodeDecodeError traceback."""
    from rocm_build_backend.builder.source import read_pyproject

    (tmp_path / "pyproject.toml").write_bytes(data)
    with pytest.raises(ConfigError) as exc:
        read_pyproject(tmp_path)
    assert "pyproject.toml" in exc.value.message and exc.value.hint


def test_a_pyproject_that_is_not_utf8_fails_the_hook_without_a_traceback(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "pyproject.toml").write_bytes(b'[project]\nname = "caf\xe9"\n')
    proc = subprocess.run(
        [sys.executable, "-c", "import rocm_build_backend as b; b.build_wheel('out')"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert proc.returncode == ConfigError.exit_code and "Traceback" not in proc.stderr
    assert "rocm-build-backend: error: cannot read pyproject.toml" in proc.stderr
