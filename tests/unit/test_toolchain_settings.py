"""The toolchain check's settings: an unknown compiler, and no compiler at all (the real
compilers' answers: tests/integration/test_toolchain.py).
"""

import os

import pytest

from rocm_build_backend.errors import ToolchainError
from rocm_build_backend.gpu.amd.toolchain import find_compiler


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    e["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return e


def test_unknown_compiler_setting(env):
    with pytest.raises(ToolchainError) as exc:
        find_compiler("no-such-hipcc", env=env)
    assert "no-such-hipcc" in exc.value.message


def test_no_compiler_at_all(env, tmp_path):
    env["PATH"] = str(tmp_path)  # nothing on it
    env.pop("HIP_PATH", None)
    env.pop("ROCM_PATH", None)
    got = find_compiler("auto", env=env)
    assert got is None or got.path.startswith("/opt/rocm")
