"""Every core: the job budget split between parallel setuptools extensions and each one's jobs
(a table), what setup.py shows of its extensions (real snippets), the merged DIST_EXTRA_CONFIG,
the projects' own job variables and the plan's share of MAX_JOBS. The real build through the shim
is in tests/integration/test_parallel_build.py."""

from __future__ import annotations

import configparser

import pytest

from rocm_build_backend.builder.parallel import Extensions, job_variables, merged_config, read_extensions, split
from rocm_build_backend.builder.plan import Host, make_plan
from rocm_build_backend.builder.settings import load_settings
from rocm_build_backend.gpu.targets import parse_targets

@pytest.mark.parametrize("budget, ext, kind, at_once, each, words", [
    (16, Extensions(sites=1), "setuptools", 1, 16, "one extension"),
    (16, Extensions(sites=14, torch=True, ninja=True), "setuptools", 1, 16, "build.ninja"),
    (16, Extensions(sites=14, torch=True, ninja=False), "setuptools", 14, 1, "14 extensions without ninja"),
    (16, Extensions(sites=1, looped=True, torch=True, ninja=False), "setuptools", 16, 1, "made in a loop"),
    (16, Extensions(sites=3), "setuptools", 3, 5, "3 extensions"),
    (4, Extensions(sites=10), "setuptools", 4, 1, "10 extensions"),
    (16, Extensions(sites=5, custom=True), "setuptools", 1, 16, "not a setuptools extension build"),
    (16, Extensions(sites=5), "scikit-build-core", 1, 16, "not a setuptools extension build"),
    (16, Extensions(sites=8, theirs=4), "setuptools", 4, 4, "from setup.cfg"),
    (16, Extensions(sites=8, theirs=4, user=2), "setuptools", 2, 8, "from DIST_EXTRA_CONFIG"),
    (16, Extensions(sites=14, torch=True, ninja=False, cxx_apart=False), "setuptools", 1, 16, "compiler_so_cxx"),
])
def test_split_stays_within_the_budget(budget, ext, kind, at_once, each, words):
    got = split(budget, ext, backend_kind=kind)
    assert got[:2] == (at_once, each) and words in got[2]
    assert got[0] * got[1] <= budget


TORCH_SCATTER_SHAPE = '''from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension
def get_extensions():
    extensions = []
    for main, suffix in product(main_files, suffices):
        Extension = CppExtension if suffix == "cpu" else CUDAExtension
        extension = Extension(f"torch_scatter._{main}_{suffix}", [main])
        extensions += [extension]
    return extensions
setup(ext_modules=get_extensions(), cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)})
'''
FLASH_ATTN_SHAPE = '''from torch.utils.cpp_extension import BuildExtension, CUDAExtension
ext_modules = []
if not SKIP:
    ext_modules.append(CUDAExtension(name="flash_attn_2_cuda", sources=[]))
elif ROCM:
    ext_modules.append(CUDAExtension(name="flash_attn_2_cuda", sources=[]))
setup(ext_modules=ext_modules, cmdclass={"build_ext": BuildExtension})
'''
CMAKE_SHAPE = '''from setuptools import Extension, setup
class CMakeExtension(Extension):
    pass
setup(ext_modules=[CMakeExtension("a"), CMakeExtension("b")])
'''


@pytest.mark.parametrize("text, expected", [
    (TORCH_SCATTER_SHAPE, Extensions(sites=1, looped=True, torch=True, ninja=False)),
    (FLASH_ATTN_SHAPE, Extensions(sites=2, looped=False, torch=True, ninja=True)),
    (CMAKE_SHAPE, Extensions(sites=0, custom=True)),
    ("def broken(:", Extensions()),
])
def test_read_extensions(tmp_path, text, expected):
    (tmp_path / "setup.py").write_text(text)
    assert read_extensions(tmp_path, {}) == expected


def test_theirs_and_the_users_parallel_are_read(tmp_path):
    (tmp_path / "setup.py").write_text(CMAKE_SHAPE)
    (tmp_path / "setup.cfg").write_text("[build_ext]\nparallel = 3\n")
    user = tmp_path / "mine.cfg"
    user.write_text("[build_ext]\nparallel = 5\n")
    got = read_extensions(tmp_path, {"DIST_EXTRA_CONFIG": str(user)})
    assert (got.theirs, got.user) == (3, 5)


def test_merged_config_keeps_the_users_file_and_adds_ours(tmp_path):
    user = tmp_path / "mine.cfg"
    text = "# mine\n[egg_info]\ntag_build = .dev7\n"
    user.write_text(text)
    (tmp_path / "build").mkdir()
    out = merged_config(tmp_path / "build", 4, str(user))
    parser = configparser.RawConfigParser()
    parser.read(out)
    assert parser.get("build_ext", "parallel") == "4" and parser.get("egg_info", "tag_build") == ".dev7"
    assert user.read_text() == text  # theirs is never edited
    user.write_text("[build_ext]\nparallel = 2\n")
    parser = configparser.RawConfigParser()
    parser.read(merged_config(tmp_path / "build", 4, str(user)))
    assert parser.get("build_ext", "parallel") == "2"  # theirs wins


def test_job_variables_come_from_the_table():
    assert job_variables("flash_attn", 8, 16) == {"NVCC_THREADS": ("1", job_variables("flash-attn", 8, 16)["NVCC_THREADS"][1])}
    assert job_variables("cupy", 2, 16)["CUPY_NUM_BUILD_JOBS"][0] == "16"
    assert job_variables("unknown-project", 2, 16) == {} and job_variables(None, 2, 16) == {}


def test_plan_sets_max_jobs_to_each_extensions_share():
    settings = load_settings({}, None, {})
    plan = make_plan(parse_targets("sm_90"), "settings", settings, {}, backend_kind="setuptools",
                     host=Host(cpus=16, mem_available=512 << 30),
                     extensions=Extensions(sites=1, looped=True, torch=True, ninja=False))
    assert plan.build_ext_parallel == 16 and plan.env["MAX_JOBS"] == "1" and plan.max_jobs == 1
    assert "16 extensions at once x 1" in plan.jobs_reason
    user = make_plan(parse_targets("sm_90"), "settings", settings, {"NVCC_THREADS": "4"},
                     backend_kind="setuptools", host=Host(cpus=16, mem_available=512 << 30),
                     extensions=Extensions(sites=1), dist_name="flash-attn")
    assert user.env.get("NVCC_THREADS") is None and any("NVCC_THREADS=4 kept" in n for n in user.notes)
