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


@pytest.mark.parametrize(
    "budget, ext, kind, at_once, each, pool, words",
    [
        (16, Extensions(sites=1), "setuptools", 1, 16, 0, "one extension"),
        (16, Extensions(sites=14, torch=True, ninja=True), "setuptools", 14, 1, 0, "build.ninja"),
        (16, Extensions(sites=4, torch=True, ninja=True), "setuptools", 4, 4, 0, "largest first"),
        (
            16,
            Extensions(sites=14, torch=True, ninja=False),
            "setuptools",
            14,
            1,
            16,
            "14 extensions without ninja: 14 at once",
        ),
        (
            16,
            Extensions(sites=1, looped=True, torch=True, ninja=False),
            "setuptools",
            64,
            1,
            16,
            "made in a loop without ninja: up to 64",
        ),
        (16, Extensions(sites=3), "setuptools", 3, 1, 16, "one pool of 16 slots, largest first"),
        (4, Extensions(sites=10), "setuptools", 10, 1, 4, "10 extensions: 10 at once"),
        (16, Extensions(sites=100), "setuptools", 64, 1, 16, "100 extensions: 64 at once"),
        (1, Extensions(sites=10), "setuptools", 1, 1, 0, "10 extensions: 1 at once x 1 jobs each, within 1"),
        # where the pool cannot go (not POSIX), extensions at once x jobs each stay within the budget
        (16, Extensions(sites=3, pool=False), "setuptools", 3, 5, 0, "3 extensions: 3 at once x 5"),
        (4, Extensions(sites=10, pool=False), "setuptools", 4, 1, 0, "10 extensions: 4 at once"),
        (16, Extensions(sites=1, looped=True, pool=False), "setuptools", 16, 1, 0, "made in a loop: 16 at once"),
        # ... unless each sets the shared compiler's settings for itself: one at a time
        (
            16,
            Extensions(
                sites=3, pool=False, per_extension="build_extension sets the compiler's compiler_so (setup.py line 9)"
            ),
            "setuptools",
            1,
            16,
            0,
            "one at a time, 16 jobs: build_extension sets the compiler's",
        ),
        (16, Extensions(sites=5, custom=True), "setuptools", 1, 16, 0, "not a setuptools extension build"),
        (16, Extensions(sites=5), "scikit-build-core", 1, 16, 0, "not a setuptools extension build"),
        (16, Extensions(sites=8, theirs=4), "setuptools", 4, 4, 0, "from setup.cfg"),
        (16, Extensions(sites=8, theirs=4, user=2), "setuptools", 2, 8, 0, "from DIST_EXTRA_CONFIG"),
        (16, Extensions(sites=14, torch=True, ninja=False, cxx_apart=False), "setuptools", 1, 16, 0, "compiler_so_cxx"),
        (
            16,
            Extensions(sites=6, own_pool="setup.py line 1 imports pybind11's ParallelCompile"),
            "setuptools",
            1,
            16,
            16,
            "compiles side by side itself (setup.py line 1 imports pybind11's ParallelCompile)",
        ),
        (
            16,
            Extensions(sites=6, own_pool="setup.py line 9 replaces a compiler's compile", pool=False),
            "setuptools",
            1,
            16,
            0,
            "replaces a compiler's compile",
        ),
    ],
)
def test_split_stays_within_the_budget(budget, ext, kind, at_once, each, pool, words):
    got = split(budget, ext, backend_kind=kind)
    assert (got.at_once, got.each, got.pool) == (at_once, each, pool) and words in got.why, got
    # the compiles at once stay within the budget: the pool's slots x 1 job, or extensions x jobs; where
    # the pool steps aside for the project's own parallel compile, every compiler process takes a slot
    assert (got.pool if got.aside else got.pool * got.each if got.pool else got.at_once * got.each) <= budget
    assert bool(got.aside) == bool(ext.own_pool and ext.pool)


TORCH_SCATTER_SHAPE = """from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension
def get_extensions():
    extensions = []
    for main, suffix in product(main_files, suffices):
        Extension = CppExtension if suffix == "cpu" else CUDAExtension
        extension = Extension(f"torch_scatter._{main}_{suffix}", [main])
        extensions += [extension]
    return extensions
setup(ext_modules=get_extensions(), cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)})
"""
FLASH_ATTN_SHAPE = """from torch.utils.cpp_extension import BuildExtension, CUDAExtension
ext_modules = []
if not SKIP:
    ext_modules.append(CUDAExtension(name="flash_attn_2_cuda", sources=[]))
elif ROCM:
    ext_modules.append(CUDAExtension(name="flash_attn_2_cuda", sources=[]))
setup(ext_modules=ext_modules, cmdclass={"build_ext": BuildExtension})
"""
CMAKE_SHAPE = """from setuptools import Extension, setup
class CMakeExtension(Extension):
    pass
setup(ext_modules=[CMakeExtension("a"), CMakeExtension("b")])
"""


@pytest.mark.parametrize(
    "text, expected",
    [
        (TORCH_SCATTER_SHAPE, Extensions(sites=1, looped=True, torch=True, ninja=False)),
        (FLASH_ATTN_SHAPE, Extensions(sites=2, looped=False, torch=True, ninja=True)),
        (CMAKE_SHAPE, Extensions(sites=0, custom=True)),
        ("def broken(:", Extensions()),
        (
            "from pybind11.setup_helpers import ParallelCompile, Pybind11Extension\n"
            "ParallelCompile('NPY_NUM_BUILD_JOBS').install()\n"
            "setup(ext_modules=[Pybind11Extension('a', []), Pybind11Extension('b', [])])\n",
            Extensions(sites=2, own_pool="setup.py line 1 imports pybind11's ParallelCompile"),
        ),
        # pybind11's ParallelCompile under another name
        (
            "from pybind11.setup_helpers import ParallelCompile as PC\nPC('N').install()\n"
            "setup(ext_modules=[Extension('a', []), Extension('b', [])])\n",
            Extensions(sites=2, own_pool="setup.py line 1 imports pybind11's ParallelCompile"),
        ),
        # the parallelCCompile monkeypatch, whatever the function is called
        (
            "import distutils.ccompiler\ndef fast(self, sources, **kw):\n    return []\n"
            "distutils.ccompiler.CCompiler.compile = fast\nsetup(ext_modules=[Extension('a', []), Extension('b', [])])\n",
            Extensions(sites=2, own_pool="setup.py line 4 replaces a compiler's compile"),
        ),
        (
            "import distutils.ccompiler as cc\nsetattr(cc.CCompiler, 'compile', lambda *a, **k: [])\n"
            "setup(ext_modules=[Extension('a', []), Extension('b', [])])\n",
            Extensions(sites=2, own_pool="setup.py line 2 replaces a compiler's compile"),
        ),
        # a command's own "compile" option is no compile put in place
        (
            "class I(install):\n    def initialize_options(self):\n        self.compile = 0\n        self.x.compile = None\n"
            "setup(ext_modules=[Extension('a', [])])\n",
            Extensions(sites=1),
        ),
        # compiler settings per extension: assigned, set_executable, changed in place
        (
            "class B(build_ext):\n    def build_extension(self, ext):\n        self.compiler.compiler_so = ['cc', '-DX']\n"
            "setup(ext_modules=[Extension('a', []), Extension('b', [])])\n",
            Extensions(sites=2, per_extension="build_extension sets the compiler's compiler_so (setup.py line 3)"),
        ),
        (
            "class B(build_ext):\n    def build_extension(self, ext):\n        c = 1\n"
            "        self.compiler.set_executable('compiler_so', ['cc'])\nsetup(ext_modules=[Extension('a', [])])\n",
            Extensions(sites=1, per_extension="build_extension calls the compiler's set_executable (setup.py line 4)"),
        ),
        (
            "class B(build_ext):\n    def build_extension(self, ext):\n        self.compiler.compiler_so.append('-DX')\n"
            "setup(ext_modules=[Extension('a', [])])\n",
            Extensions(sites=1, per_extension="build_extension changes the compiler's compiler_so (setup.py line 3)"),
        ),
        # the same in build_extensions (once, before the extensions start) is shared, not per extension
        (
            "class B(build_ext):\n    def build_extensions(self):\n        self.compiler.compiler_so = ['cc']\n"
            "setup(ext_modules=[Extension('a', [])])\n",
            Extensions(sites=1),
        ),
    ],
)
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
    assert job_variables("flash_attn", 8, 16) == {
        "NVCC_THREADS": ("1", job_variables("flash-attn", 8, 16)["NVCC_THREADS"][1])
    }
    assert job_variables("cupy", 2, 16)["CUPY_NUM_BUILD_JOBS"][0] == "16"
    assert job_variables("unknown-project", 2, 16) == {} and job_variables(None, 2, 16) == {}


def test_plan_sets_max_jobs_to_each_extensions_share():
    settings = load_settings({}, None, {})
    plan = make_plan(
        parse_targets("sm_90"),
        "settings",
        settings,
        {},
        backend_kind="setuptools",
        host=Host(cpus=16, mem_available=512 << 30),
        extensions=Extensions(sites=1, looped=True, torch=True, ninja=False),
    )
    assert plan.build_ext_parallel == 64 and plan.env["MAX_JOBS"] == "1" and plan.max_jobs == 1
    assert plan.compile_pool == 16 and "one compile pool of 16 slots, 1 job each" in plan.jobs_reason
    assert (
        "compile pool: 16 slots shared by the extensions (up to 64 at once), largest first, links through the "
        "same slots, each extension's compiler settings its own"
    ) in plan.summary()
    assert plan.to_json()["compile_pool"] == 16 and plan.to_json()["compile_pool_aside"] is None
    user = make_plan(
        parse_targets("sm_90"),
        "settings",
        settings,
        {"NVCC_THREADS": "4"},
        backend_kind="setuptools",
        host=Host(cpus=16, mem_available=512 << 30),
        extensions=Extensions(sites=1),
        dist_name="flash-attn",
    )
    assert user.env.get("NVCC_THREADS") is None and any("NVCC_THREADS=4 kept" in n for n in user.notes)


def test_the_plan_says_when_the_pool_steps_aside_and_why():
    settings = load_settings({}, None, {})
    why = "setup.py line 4 replaces a compiler's compile"
    plan = make_plan(
        parse_targets("gfx90a"),
        "settings",
        settings,
        {},
        backend_kind="setuptools",
        host=Host(cpus=4, mem_available=512 << 30),
        extensions=Extensions(sites=8, own_pool=why),
    )
    assert (plan.build_ext_parallel, plan.compile_pool, plan.env["MAX_JOBS"]) == (1, 4, "4")
    assert plan.to_json()["compile_pool_aside"] == f"setup.py compiles side by side itself ({why})"
    assert (
        f"compile pool steps aside: setup.py compiles side by side itself ({why}): one extension at a time, "
        "every compiler process setuptools starts within 4 slots"
    ) in plan.summary()
    assert "every compiler process setuptools starts within 4 places" in plan.jobs_reason
    per = make_plan(
        parse_targets("gfx90a"),
        "settings",
        settings,
        {},
        backend_kind="setuptools",
        host=Host(cpus=4, mem_available=512 << 30),
        extensions=Extensions(
            sites=8, per_extension="build_extension sets the compiler's compiler_so (setup.py line 3)"
        ),
    )
    assert (
        "build_extension sets the compiler's compiler_so (setup.py line 3): each extension built beside the "
        "others gets the compiler settings it sets (a compiler state of its own)"
    ) in per.notes
