"""make_plan is pure: tables of inputs -> the variables and config settings a build gets."""

import shlex

import pytest

from rocm_build_backend.errors import ConfigError
from rocm_build_backend.builder.plan import Host, make_plan
from rocm_build_backend.builder.settings import load_settings
from rocm_build_backend.gpu.targets import parse_targets
from helpers import kfd_root

GIB = 1 << 30
T2 = parse_targets("gfx942;gfx90a")


def plan(
    env=None,
    kind="setuptools",
    targets=T2,
    settings=None,
    cs=None,
    host=Host(cpus=16, mem_available=64 * GIB),
    dist=None,
):
    s = load_settings(settings or {}, None, {})
    return make_plan(
        targets, "from test", s, env or {}, backend_kind=kind, config_settings=cs, host=host, dist_name=dist
    )


def test_generic_knobs_for_every_backend():
    for kind in ("setuptools", "scikit-build-core", "hatchling", "other"):
        p = plan(kind=kind)
        assert p.env["PYTORCH_ROCM_ARCH"] == "gfx90a;gfx942"
        assert p.env["GPU_TARGETS"] == p.env["AMDGPU_TARGETS"] == "gfx90a;gfx942"
        assert p.env["HCC_AMDGPU_TARGET"] == "gfx90a,gfx942"
        # enforce = true (the default): clang's reset first, so the targets are the last word
        assert (
            p.env["HIPCC_COMPILE_FLAGS_APPEND"] == "--no-offload-arch=all --offload-arch=gfx90a --offload-arch=gfx942"
        )
        assert p.env["HIP_PLATFORM"] == "amd"
        assert shlex.split(p.env["CMAKE_ARGS"]) == [
            "-DCMAKE_HIP_ARCHITECTURES=gfx90a;gfx942",
            "-DGPU_TARGETS=gfx90a;gfx942",
            "-DAMDGPU_TARGETS=gfx90a;gfx942",
        ]


@pytest.mark.parametrize(
    "kind, defines",
    [
        (
            "scikit-build-core",
            {"cmake.define.CMAKE_HIP_ARCHITECTURES", "cmake.define.GPU_TARGETS", "cmake.define.AMDGPU_TARGETS"},
        ),
        ("setuptools", set()),
        ("hatchling", set()),
    ],
)
def test_config_settings_per_backend(kind, defines):
    p = plan(kind=kind, cs={"other.key": "x"})
    assert set(p.config_settings) == defines | {"other.key"}
    for key in defines:
        assert p.config_settings[key] == "gfx90a;gfx942"


def test_skbuild_conflicting_define_is_an_error():
    with pytest.raises(ConfigError) as exc:
        plan(kind="scikit-build-core", cs={"cmake.define.GPU_TARGETS": "gfx1030"})
    assert "cmake.define.GPU_TARGETS=gfx1030" in exc.value.message
    p = plan(kind="scikit-build-core", cs={"cmake.define.GPU_TARGETS": "gfx942;gfx90a"})
    assert p.config_settings["cmake.define.GPU_TARGETS"] == "gfx942;gfx90a"  # agrees: kept as given


@pytest.mark.parametrize(
    "env, kept, replaced",
    [
        ({"GPU_TARGETS": "gfx942,gfx90a"}, {"GPU_TARGETS"}, set()),
        ({"GPU_TARGETS": "gfx1030"}, set(), {"GPU_TARGETS"}),
        ({"HCC_AMDGPU_TARGET": "gfx90a,gfx942"}, {"HCC_AMDGPU_TARGET"}, set()),
        ({"HIP_PLATFORM": "nvidia"}, set(), {"HIP_PLATFORM"}),
        ({"HIP_PLATFORM": "amd"}, {"HIP_PLATFORM"}, set()),
    ],
)
def test_user_values_kept_when_they_agree(env, kept, replaced):
    p = plan(env=env)
    assert set(p.kept) == kept and set(p.replaced) == replaced
    for var in kept:
        assert p.env[var] == env[var]


def test_user_flags_and_cmake_args_survive():
    p = plan(
        env={
            "HIPCC_COMPILE_FLAGS_APPEND": "-O3 --offload-arch=gfx1030",
            "CMAKE_ARGS": "-DGGML_HIP=on -DGPU_TARGETS=gfx1030",
        }
    )
    assert (
        p.env["HIPCC_COMPILE_FLAGS_APPEND"] == "-O3 --no-offload-arch=all --offload-arch=gfx90a --offload-arch=gfx942"
    )
    args = shlex.split(p.env["CMAKE_ARGS"])
    assert "-DGGML_HIP=on" in args and "-DGPU_TARGETS=gfx1030" not in args and "-DGPU_TARGETS=gfx90a;gfx942" in args
    assert {"HIPCC_COMPILE_FLAGS_APPEND", "CMAKE_ARGS"} <= set(p.replaced)


def test_enforce_off_appends_the_targets_without_the_reset():
    p = plan(settings={"tool": {"rocm-build-backend": {"enforce": False}}}, env={"HIPCC_COMPILE_FLAGS_APPEND": "-O3"})
    assert p.env["HIPCC_COMPILE_FLAGS_APPEND"] == "-O3 --offload-arch=gfx90a --offload-arch=gfx942"
    assert p.enforce is None and p.to_json()["enforce"] == {"enabled": False, "how": []}
    assert "enforce = false" in " ".join(p.summary())


@pytest.mark.parametrize(
    "settings, env, host, jobs",
    [
        ({}, {}, Host(cpus=64, mem_available=32 * GIB), 8),  # memory-bound: 32 GiB / 4 GiB
        ({}, {}, Host(cpus=2, mem_available=64 * GIB), 2),  # core-bound
        ({}, {}, Host(cpus=8, mem_available=1 * GIB), 1),  # never zero
        ({}, {}, Host(cpus=6, mem_available=None), 6),  # memory unknown
        ({"memory-per-job": 8}, {}, Host(cpus=64, mem_available=32 * GIB), 4),
        ({}, {"MAX_JOBS": "3"}, Host(cpus=64, mem_available=256 * GIB), 3),  # the user's value
        ({"max-jobs": 5}, {"MAX_JOBS": "3"}, Host(cpus=64, mem_available=256 * GIB), 5),  # setting wins
    ],
)
def test_max_jobs(settings, env, host, jobs):
    p = plan(settings={"tool": {"rocm-build-backend": settings}}, env=env, host=host)
    assert p.max_jobs == jobs and p.env["MAX_JOBS"] == str(jobs)


def test_plan_is_pure_and_json_shaped():
    a, b = plan(), plan()
    assert a == b
    data = a.to_json()
    assert data["targets"] == ["gfx90a", "gfx942"] and "env" in data and "config_settings" in data


def test_targets_of_two_vendors_are_refused():
    with pytest.raises(ConfigError, match="more than one vendor"):
        plan(targets=parse_targets("gfx942;sm_90"))


@pytest.mark.parametrize(
    "dist, settings, expect",
    [
        ("flash-attn", {}, {"GPU_ARCHS": "gfx90a;gfx942", "FLASH_ATTENTION_FORCE_BUILD": "TRUE"}),
        ("Flash_Attn", {}, {"GPU_ARCHS": "gfx90a;gfx942"}),
        ("xformers", {}, {"HIP_ARCHITECTURES": "gfx90a gfx942"}),
        ("torchvision", {}, {"FORCE_CUDA": "1"}),
        ("my-fork", {"profile": "xformers"}, {"HIP_ARCHITECTURES": "gfx90a gfx942"}),
        ("flash-attn", {"profile": "none"}, {}),
    ],
)
def test_profiles_add_project_knobs(dist, settings, expect):
    p = plan(settings={"tool": {"rocm-build-backend": settings}}, dist=dist)
    for var, value in expect.items():
        assert p.env[var] == value
    if not expect:
        assert p.profile is None and "GPU_ARCHS" not in p.env
    else:
        assert p.profile
    assert p.env["PYTORCH_ROCM_ARCH"] == "gfx90a;gfx942"  # the generic knobs stay


def test_profile_cmake_defines_for_scikit_build_core():
    p = plan(kind="scikit-build-core", dist="bitsandbytes")
    assert any(k.startswith("cmake.define.BNB_ROCM_ARCH") for k in p.config_settings), p.config_settings


def test_unknown_profile_setting():
    with pytest.raises(ConfigError) as exc:
        plan(settings={"tool": {"rocm-build-backend": {"profile": "xformer"}}})
    assert "unknown profile 'xformer'" in exc.value.message and "did you mean 'xformers'" in exc.value.message


@pytest.mark.parametrize(
    "var, value",
    [
        ("CMAKE_ARGS", '-DFOO="unbalanced'),
        ("HIPCC_COMPILE_FLAGS_APPEND", "-O3 'x"),
        ("CMAKE_ARGS", "-DA=b\\"),
    ],
)
def test_a_variable_that_does_not_split_as_shell_words(var, value):
    """An unbalanced quote gave a ValueError traceback, even for a project without GPU code."""
    with pytest.raises(ConfigError) as exc:
        plan(env={var: value})
    assert var in exc.value.message and "shell words" in exc.value.message and "quoting" in exc.value.hint
    # a project that declares it has no GPU code builds on, the variable left as it is
    p = plan(env={var: value}, settings={"tool": {"rocm-build-backend": {"verify": "off"}}}, dist="llama-cpp-python")
    assert var not in p.env and any(var in n and "left as it is" in n for n in p.notes)


# ------------------------------------------------------------------ the plan command


def _plan_cli(*args, cwd=None):
    import os
    import subprocess
    import sys

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ROCM_BUILD_BACKEND_")
        and k not in ("PYTORCH_ROCM_ARCH", "CMAKE_ARGS", "HIPCC_COMPILE_FLAGS_APPEND")
    }
    return subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", "plan", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )


def _unconfigured_skbuild(folder):
    folder.mkdir()
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n'
        '[project]\nname = "skb-demo"\nversion = "1.0"\n'
    )
    (folder / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.21)\nproject(x LANGUAGES CXX)\n")
    return folder


def test_plan_of_an_unconfigured_project_uses_its_declared_backend(tmp_path):
    """plan showed setuptools.build_meta and no cmake.define.* where build used scikit_build_core.build."""
    import json

    project = _unconfigured_skbuild(tmp_path / "proj")
    proc = _plan_cli(
        "--json", project, "-C", "rocm-build-backend.targets=gfx90a", "-C", "rocm-build-backend.compiler-check=false"
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["backend"] == "scikit_build_core.build"
    assert data["config_settings"]["cmake.define.GPU_TARGETS"] == "gfx90a"
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    proc = _plan_cli(
        "--json", legacy, "-C", "rocm-build-backend.targets=gfx90a", "-C", "rocm-build-backend.compiler-check=false"
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["backend"] == "setuptools.build_meta:__legacy__"


def test_plan_names_the_stale_tree_that_will_stop_the_build(tmp_path):
    import json

    project = _unconfigured_skbuild(tmp_path / "proj")
    (project / "build").mkdir()
    (project / "build" / "k.o").write_text("")
    (project / "build" / ".rocm-build-backend.json").write_text('{"schema_version": 1, "targets": ["gfx90a"]}')
    cs = ["-C", "rocm-build-backend.targets=gfx942", "-C", "rocm-build-backend.compiler-check=false"]
    text = _plan_cli(project, *cs)
    assert text.returncode == 0, text.stderr
    assert "build (built for gfx90a) will stop the build" in text.stdout
    data = json.loads(_plan_cli("--json", project, *cs).stdout)
    assert data["stale"] == [{"path": str(project / "build"), "built_for": "gfx90a", "owned": True, "action": "stop"}]
    clean = json.loads(_plan_cli("--json", project, *cs, "-C", "rocm-build-backend.stale=clean").stdout)
    assert clean["stale"][0]["action"] == "remove"
    assert (project / "build" / "k.o").exists()  # plan removes nothing


@pytest.mark.parametrize("what", ["missing", "file", "empty"])
def test_plan_of_a_path_that_is_no_project(tmp_path, what):
    """plan /nonexistent said "no AMD GPU found"."""
    path = {"missing": tmp_path / "nonexistent", "file": tmp_path / "f.txt", "empty": tmp_path}[what]
    if what == "file":
        path.write_text("x")
    proc = _plan_cli(path)
    assert proc.returncode == ConfigError.exit_code and "Traceback" not in proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith("error: ") and str(path.name) in first and "GPU" not in proc.stderr
    assert {"missing": "does not exist", "file": "is not an sdist", "empty": "no pyproject.toml"}[what] in first


@pytest.mark.parametrize("user", ["", "-DLLAMA_HIPBLAS=on -DX='a b'"])
def test_several_targets_keep_cmake_args_readable(user):
    """Each -D...=gfx90a;gfx942 was quoted, and the log quoted the quotes again."""
    p = plan(env={"CMAKE_ARGS": user} if user else {})
    value = p.env["CMAKE_ARGS"]
    words = shlex.split(value)
    assert words[-3:] == [
        "-DCMAKE_HIP_ARCHITECTURES=gfx90a;gfx942",
        "-DGPU_TARGETS=gfx90a;gfx942",
        "-DAMDGPU_TARGETS=gfx90a;gfx942",
    ]
    assert value.endswith(" ".join(words[-3:]))  # no quotes around a word that needs none
    assert value.split()[-3:] == words[-3:]  # a reader that splits on spaces gets the same
    if user:
        assert words[:2] == ["-DLLAMA_HIPBLAS=on", "-DX=a b"]
    line = next(line for line in p.summary() if line.startswith("environment "))
    assert "-DCMAKE_HIP_ARCHITECTURES=gfx90a;gfx942 -DGPU_TARGETS=gfx90a;gfx942 -DAMDGPU" in line
    if not user:
        assert "'\"'\"'" not in line and "CMAKE_ARGS='-DCMAKE_HIP_ARCHITECTURES=gfx90a;gfx942 -DGPU" in line


def test_our_setting_without_our_prefix_is_named_once_with_its_spelling():
    """-C targets=gfx942 went silently to the wrapped backend."""
    p = plan(cs={"targets": "gfx942", "build-dir": "build/x", "max-jobs": ["2", "3"]})
    notes = [n for n in p.summary() if "is not read by rocm-build-backend" in n]
    assert len(notes) == 2
    assert "-C targets=gfx942" in notes[0] and "-C rocm-build-backend.targets=gfx942" in notes[0]
    assert "-C rocm-build-backend.max-jobs=" in notes[1]
    assert p.config_settings["targets"] == "gfx942"  # still forwarded: it may be the backend's own
    assert not any("build-dir" in n for n in p.summary() if n.startswith("warning"))


def test_plan_and_build_take_targets(tmp_path):
    import json

    project = _unconfigured_skbuild(tmp_path / "proj")
    proc = _plan_cli("--json", project, "--targets", "gfx942;gfx90a", "-C", "rocm-build-backend.compiler-check=false")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["targets"] == ["gfx90a", "gfx942"] and data["source"] == "settings"
    clash = _plan_cli(project, "--targets", "gfx942", "-C", "rocm-build-backend.targets=gfx90a")
    assert clash.returncode != 0 and "disagree" in clash.stderr and "Traceback" not in clash.stderr
    import subprocess
    import sys

    helps = subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", "build", "--help"], capture_output=True, text=True
    )
    assert "--targets" in helps.stdout


# ------------------------------------------------------------------ plan --json and its schema


def _schema():
    import json

    from rocm_build_backend import data

    return json.loads(data.path("schemas/plan.schema.json").read_text(encoding="utf-8"))


def test_plan_json_outputs_follow_the_shipped_schema(tmp_path):
    """Real outputs of `plan --json`, in the shapes it has: each valid, schema_version first."""
    import json

    import jsonschema

    schema = _schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    skb = _unconfigured_skbuild(tmp_path / "skb")
    (skb / "build").mkdir()
    (skb / "build" / "k.o").write_text("")
    legacy = tmp_path / "flash-attn"
    legacy.mkdir()
    (legacy / "pyproject.toml").write_text('[project]\nname = "flash-attn"\nversion = "2.0"\n')
    sysroot = kfd_root(tmp_path, 90010)
    runs = [
        (
            skb,
            "--targets",
            "gfx90a;gfx942",
            "-C",
            "targets=gfx90a",
            "-C",
            "build-dir=build/x",
            "-C",
            "rocm-build-backend.compiler-check=false",
        ),
        (skb, "--targets", "gfx90a"),  # the real compiler check: hipcc's facts
        (
            legacy,
            "-C",
            f"rocm-build-backend.sysfs-root={sysroot}",
            "-C",
            "rocm-build-backend.compiler-check=false",
            "-C",
            "rocm-build-backend.stale=clean",
        ),
    ]
    outputs = []
    for args in runs:
        proc = _plan_cli("--json", *args)
        assert proc.returncode == 0, proc.stderr
        outputs.append(json.loads(proc.stdout))
        assert next(iter(outputs[-1])) == "schema_version"
        jsonschema.validate(outputs[-1], schema)
    assert outputs[0]["stale"] and outputs[0]["notes"] and outputs[0]["compiler"] is None
    assert outputs[1]["compiler"] is None or outputs[1]["compiler"]["compiler"]
    assert outputs[2]["source"] == "detected:kfd" and outputs[2]["profile"]
    broken = dict(outputs[0])
    del broken["schema_version"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_a_project_without_gpu_code_gets_no_pinned_compilers():
    """verify = "off" says the project has no GPU code: nothing to hold, nothing written for it."""
    assert plan().enforce is not None
    p = plan(settings={"tool": {"rocm-build-backend": {"verify": "off"}}})
    assert p.enforce is None and any("no pinned compilers" in n for n in p.notes)
    assert not p.env["HIPCC_COMPILE_FLAGS_APPEND"].startswith("--no-offload-arch=all")
