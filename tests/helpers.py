"""Everything the tests share, in one module; test modules import from here and from nowhere else
(no test module imports another). ``conftest.py`` holds only pytest's hooks and fixtures.

    paths          ROOT, TESTS, DATA, PROJECTS, SAMPLES
    processes      run, run_main, copy_sample, pip_wheel, only_wheel, assert_valid_stamp, error_lines,
                   validate_json, pip_options and install_table_gaps (pip's options from its --help)
    wheels         record_line, valid_stamp, stamp_for, make_wheel, damage_member, huge_member
    fake machines  kfd_root (sysfs), FakeNvml and nvml (libnvidia-ml), decoy_tools, cmake_hip_env
    variants       code_object (clang-19), gpu_wheel, picked_variants (variantlib), uv_or_skip
    one subject    the inputs a subject's unit and integration tests both use: pure_project,
                   gpu_less_env and no_gpu_env (backend), gpu_demo_project and pure_wheel (cache), install_dist
                   (check --env), guard_root (guard), fat_wheel and zip_members (thin), index_fleet,
                   split_wheels, variant_links,
                   variant_dir (index), variant_project and variant_build_env (variant builds),
                   sample_stamp, set_member, handmade_wheel (stamp)
    real inputs    sdist_tree, real_wheel and their pins (from ``realinputs.py``): pinned sdists and
                   wheels downloaded once into a cache, checked by size and sha256
                   (``tests/real_sdists.json``, ``tests/real_sdists_more.json``, ``tests/real_wheels.json``)

Generated hostile inputs (wheels that inflate past the budget, lying RECORDs, planted files,
programs that flood) live in ``hostile_gen.py`` (shared with ``bench/bench_wheel_hostile.py``),
re-exported here as ``hostile``.

Real inputs live in ``realinputs.py`` (how a pinned file is found through pip's configured index,
downloaded once into a cache and checked); the names the tests use are re-exported here.
"""

from __future__ import annotations

import base64
import hashlib
import html.parser
import json
import os
import re
import resource
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from urllib.parse import unquote
from typing import Any

from rocm_build_backend.gpu.vendor import Entry

import hostile_gen as hostile  # noqa: F401 (re-exported: generated hostile inputs)
from realinputs import (  # noqa: F401 (re-exported: the real inputs the tests use)
    MARKER,
    MORE_PINS,
    PINS,
    WHEEL_PINS,
    CorpusError,
    cache_dir,
    copy_tree,
    load_pins,
    pin_named,
    pinned_file,
    real_wheel,
    sdist_tree,
    wanted_members,
    wheel_pin,
)

# ------------------------------------------------------------------------------------- paths

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
PROJECTS = TESTS / "projects"
SAMPLES = ROOT / "sample_projects"

# variables a build reads; tests start from an environment without them
TARGET_VARS = (
    "PYTORCH_ROCM_ARCH",
    "GPU_TARGETS",
    "AMDGPU_TARGETS",
    "HCC_AMDGPU_TARGET",
    "HIPCC_COMPILE_FLAGS_APPEND",
    "CMAKE_ARGS",
    "MAX_JOBS",
    "HSA_OVERRIDE_GFX_VERSION",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "PIP_CONFIG_FILE",
    "TORCH_CUDA_ARCH_LIST",
    "CUDAARCHS",
    "NVCC_APPEND_FLAGS",
    "CUDA_VISIBLE_DEVICES",
)


# --------------------------------------------------------------------------------- processes


def clean_build_env(tmp_path: Path) -> dict[str, str]:
    """A clean environment for a build: no target variables, private caches and temp folder
    (the ``build_env`` fixture)."""
    env = {k: v for k, v in os.environ.items() if k not in TARGET_VARS and not k.startswith("ROCM_BUILD_BACKEND_")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env.update(
        XDG_CACHE_HOME=str(tmp_path / "xdg-cache"),
        TMPDIR=str(tmp_path / "tmp"),
        PIP_NO_CACHE_DIR="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
    )
    return env


def copy_sample(name: str, dest: Path) -> Path:
    target = dest / name
    shutil.copytree(SAMPLES / name, target, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    return target


def run(argv, *, cwd=None, env=None, check=False, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=check
    )


def run_main(capsys: Any, *argv: Any) -> tuple[int, str, str]:
    """The command line in this process (``rocm_build_backend.cli.main``): exit code, stdout,
    stderr. For contracts checked over many inputs; ``run`` starts the real program."""
    from rocm_build_backend.cli import main

    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def validate_json(verb: str, text: str) -> dict:
    """A ``--json`` document, once it validates against its shipped schema and starts with
    ``schema_version`` 1."""
    import jsonschema

    from rocm_build_backend import data

    doc = json.loads(text)
    schema = json.loads(data.path(f"schemas/{verb}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert next(iter(doc)) == "schema_version" and doc["schema_version"] == 1
    return doc


def pip_wheel(project: Path, outdir: Path, env: dict, *settings: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", outdir, project]
    for s in settings:
        argv += ["-C", s]
    return run(argv, env=env)


_PIP_OPTION = re.compile(r"^  (-\w, )?(--[\w-]+)( <[^>]*>)?")  # "  -r, --requirement <file>   Install ..."


def pip_options(python: str | Path, command: str) -> dict[str, bool]:
    """Every option ``python -m pip COMMAND --help`` lists, in each spelling (``-r`` and
    ``--requirement``), and whether it takes a value (a ``<metavar>`` follows it). Parsed from
    the help text here, in the tests: pip has no machine-readable list of its options."""
    proc = run([python, "-m", "pip", command, "--help"], env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    found: dict[str, bool] = {}
    for line in proc.stdout.splitlines():
        m = _PIP_OPTION.match(line)
        if m:
            for name in filter(None, (m.group(2), (m.group(1) or "")[:2])):
                found[name] = m.group(3) is not None
    assert "--index-url" in found and found["--index-url"], proc.stdout[:2000]  # the help is still laid out so
    return found


def install_table_gaps(python: str | Path) -> list[str]:
    """Where ``install``'s tables of pip's options (``wheel/install/args.py``) disagree with the
    options ``python``'s pip lists for ``pip install`` and ``pip wheel``: a value-taking option
    the tables lack (its value would be read as a requirement), a flag they say takes a value,
    an option only ``pip install`` has that no table sorts (it would reach ``pip wheel``)."""
    from rocm_build_backend.wheel.install import args

    install, wheel = pip_options(python, "install"), pip_options(python, "wheel")
    gaps = []
    for name, takes in sorted({**install, **wheel}.items()):
        if takes and name not in args.VALUE_OPTIONS:
            gaps.append(f"{name} takes a value; VALUE_OPTIONS lacks it")
        if not takes and name in args.VALUE_OPTIONS:
            gaps.append(f"{name} takes no value; VALUE_OPTIONS has it")
    sorted_out = args.INSTALL_ONLY | args.OTHER_PLATFORM | args.NOT_HERE
    gaps += [
        f"{name}: only pip install has it, and no table sorts it"
        for name in sorted(set(install) - set(wheel))
        if name not in sorted_out
    ]
    return gaps


def only_wheel(folder: Path) -> Path:
    """The one wheel in ``folder``; its stamp, when it has one, valid under the shipped schema."""
    wheels = sorted(folder.glob("*.whl"))
    assert len(wheels) == 1, wheels
    assert_valid_stamp(wheels[0])
    return wheels[0]


def assert_valid_stamp(wheel: Path) -> dict | None:
    """Validate a built wheel's stamp against the shipped stamp.schema.json (jsonschema)."""
    import jsonschema

    from rocm_build_backend import data
    from rocm_build_backend.wheel.stamp import read_stamp

    stamp = read_stamp(wheel)
    if stamp is None:
        return None
    schema = data.path("schemas/stamp.schema.json")
    if not schema.is_file():
        schema = data.path("stamp.schema.json")
    jsonschema.validate(stamp, json.loads(schema.read_text(encoding="utf-8")))
    return stamp


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    text = proc.stdout + proc.stderr
    return [
        line.strip()
        for line in text.splitlines()
        if "rocm-build-backend: error:" in line or "rocm-build-backend: hint:" in line
    ]


# ------------------------------------------------------------------------------------- wheels

SCHEMA = ROOT / "rocm_build_backend" / "data" / "stamp.schema.json"


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def valid_stamp(stamp: dict) -> dict:
    """``stamp``, once it validates against the shipped ``stamp.schema.json`` (jsonschema)."""
    import jsonschema

    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(stamp)
    return stamp


def stamp_for(device: dict[str, list[str] | tuple[list[str], list[str]]], *, check: bool = True) -> dict:
    """A stamp (docs/stamp.md) whose audit found ``device``: member -> targets, or
    member -> (targets, complete). Validated against the shipped schema unless ``check`` is
    False (a hostile stamp made on purpose)."""
    files = {}
    for member, spec in device.items():
        targets, complete = spec if isinstance(spec, tuple) else (spec, spec)
        files[member] = {"targets": list(targets), "complete": list(complete)}
    union = sorted({t for f in files.values() for t in f["targets"]})
    common = set.intersection(*(set(f["complete"]) for f in files.values())) if files else set()
    stamp = {
        "schema_version": 1,
        "generator": {"name": "rocm-build-backend", "version": "0.1.0"},
        "requested": {"targets": union, "source": "settings"},
        "audit": {"targets": union, "complete": sorted(common), "files": files},
        "host": {"gpus": []},
        "toolchain": {"compiler": "hipcc", "version": "5.2.21153", "hip_version": None, "rocm_version": None},
    }
    return valid_stamp(stamp) if check else stamp


def make_wheel(
    folder: Path,
    name: str,
    version: str,
    *,
    device: dict | None = None,
    members: dict[str, bytes] | None = None,
    stamp: dict | bytes | bool | None = True,
    requires_python: str | None = None,
    dist: str | None = None,
    placeholder: bytes = b"placeholder for a library",
) -> Path:
    """A small valid wheel. ``device``: member -> targets for the stamp (members get
    ``placeholder`` bytes unless ``members`` gives them); ``stamp``: True (from ``device``),
    False (none), or the stamp itself (a dict, or raw bytes for a corrupt one)."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = dist or name.replace("-", "_").replace(".", "_")
    dist_info = f"{dist}-{version}.dist-info"
    files: dict[str, bytes] = {f"{dist}/__init__.py": f"VERSION = {version!r}\n".encode()}
    for member in device or {}:
        files[member] = placeholder
    files.update(members or {})
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if requires_python:
        meta += f"Requires-Python: {requires_python}\n"
    files[f"{dist_info}/METADATA"] = (meta + "\nA test package.\n").encode()
    files[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n\n"
    if stamp is True and device is not None:
        stamp = stamp_for(device)
    if isinstance(stamp, dict):
        files[f"{dist_info}/rocm_build.json"] = json.dumps(stamp, indent=2).encode()
    elif isinstance(stamp, bytes):
        files[f"{dist_info}/rocm_build.json"] = stamp
    record = [record_line(n, d) for n, d in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return path


def damage_member(path: Path, member: str, how: str) -> None:
    """Damage one member of a wheel in place, as a hostile or broken wheel would carry it.

    ``how``: ``corrupt`` (its compressed bytes overwritten), ``encrypted`` (the encryption flag
    set), ``method`` (an unknown compression method, 99), ``huge`` is made by ``huge_member``.
    The zip's directory stays readable, so only reading that member fails.
    """
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
        start_dir = zf.start_dir
    local = info.header_offset
    name_len, extra_len = struct.unpack("<HH", data[local + 26 : local + 30])
    body = local + 30 + name_len + extra_len
    central = start_dir
    while data[central : central + 4] == b"PK\x01\x02":
        n, e, c = struct.unpack("<HHH", data[central + 28 : central + 34])
        if data[central + 46 : central + 46 + n].decode() == member:
            break
        central += 46 + n + e + c
    else:
        raise ValueError(f"{member} is not in the central directory")
    if how == "corrupt":
        for i in range(body, body + info.compress_size):
            data[i] = 0xFF
    elif how == "encrypted":
        for at in (local + 6, central + 8):
            struct.pack_into("<H", data, at, struct.unpack_from("<H", data, at)[0] | 0x1)
    elif how == "method":
        for at in (local + 8, central + 10):
            struct.pack_into("<H", data, at, 99)
    else:
        raise ValueError(how)
    path.write_bytes(bytes(data))


def huge_member(path: Path, member: str, size: int, head: bytes = b"") -> None:
    """Replace ``member`` with ``head`` and zeros up to ``size`` bytes (deflate makes it small)."""
    with zipfile.ZipFile(path) as zf:
        members = [(i, zf.read(i)) for i in zf.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, data in members:
            if info.filename == member:
                data = head + bytes(size - len(head))
            zf.writestr(info.filename, data)


# ------------------------------------------------------------------------------ fake machines


def kfd_root(tmp_path: Path, *versions: int) -> Path:
    """A fake sysfs tree: node 0 a CPU, then one GPU node per gfx_target_version."""
    root = tmp_path / "sysroot"
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    for i, version in enumerate((0, *versions)):
        (nodes / str(i)).mkdir(parents=True)
        simd = 0 if version == 0 else 440
        (nodes / str(i) / "properties").write_text(
            f"cpu_cores_count {16 if version == 0 else 0}\nsimd_count {simd}\nvendor_id 4098\n"
            f"gfx_target_version {version}\ndrm_render_minor {128 + i}\n"
        )
        (nodes / str(i) / "gpu_id").write_text("0\n" if version == 0 else f"{1000 + i}\n")
        (nodes / str(i) / "name").write_text("\n" if version == 0 else "ip discovery\n")
    return root


class _Fn:
    def __init__(self, impl):
        self.impl, self.restype = impl, None

    def __call__(self, *args):
        return self.impl(*args)


class FakeNvml:
    """libnvidia-ml.so.1 as ctypes sees it, answering from a list of GPUs."""

    def __init__(self, gpus, fail=None):
        self.gpus, self.fail = gpus, fail or {}
        for name in (
            "nvmlInit_v2",
            "nvmlDeviceGetCount_v2",
            "nvmlDeviceGetHandleByIndex_v2",
            "nvmlDeviceGetName",
            "nvmlDeviceGetUUID",
            "nvmlDeviceGetCudaComputeCapability",
            "nvmlShutdown",
            "nvmlErrorString",
        ):
            setattr(self, name, _Fn(getattr(self, "_" + name)))

    def _ret(self, name):
        return self.fail.get(name, 0)

    def _nvmlInit_v2(self):
        return self._ret("nvmlInit_v2")

    def _nvmlShutdown(self):
        return 0

    def _nvmlErrorString(self, ret):
        return {1: b"Uninitialized", 9: b"Driver Not Loaded"}.get(ret, b"Unknown Error")

    def _nvmlDeviceGetCount_v2(self, ref):
        ref._obj.value = len(self.gpus)
        return self._ret("nvmlDeviceGetCount_v2")

    def _nvmlDeviceGetHandleByIndex_v2(self, index, ref):
        ref._obj.value = index.value + 1  # a handle that is never NULL
        return 0

    def _gpu(self, handle):
        return self.gpus[handle.value - 1]

    def _nvmlDeviceGetName(self, handle, buf, size):
        buf.value = self._gpu(handle)["name"].encode()
        return 0

    def _nvmlDeviceGetUUID(self, handle, buf, size):
        buf.value = self._gpu(handle)["uuid"].encode()
        return 0

    def _nvmlDeviceGetCudaComputeCapability(self, handle, major, minor):
        major._obj.value, minor._obj.value = map(int, self._gpu(handle)["compute_capability"].split("."))
        return 0


def nvml(*caps):
    """An NVML loader answering for GPUs of these compute capabilities."""
    gpus = [{"index": i, "name": "GPU", "uuid": f"GPU-{i}", "compute_capability": c} for i, c in enumerate(caps)]
    return lambda name: FakeNvml(gpus)


def decoy_tools(directory: Path) -> Path:
    """Tools that answer like a machine with an iGPU (gfx1036) listed first, as the real ones would."""
    directory.mkdir(parents=True, exist_ok=True)
    scripts = {
        "rocminfo": "echo 'ROCk module is loaded'\necho '  Name:                    gfx1036'\n"
        "echo '  Device Type:             GPU'\n",
        "rocm_agent_enumerator": "echo gfx000\necho gfx1036\n",
        "amdgpu-arch": "echo gfx1036\n",
        "offload-arch": "echo gfx1036\n",
    }
    for name, body in scripts.items():
        path = directory / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    return directory


def _hip_lang_dir() -> Path | None:
    """Where the HIP runtime's CMake package (hip-lang-config.cmake) is installed."""
    roots = [os.environ.get("ROCM_PATH"), "/opt/rocm", "/usr"]
    for root in filter(None, roots):
        candidate = Path(root) / "lib" / "cmake" / "hip-lang"
        if (candidate / "hip-lang-config.cmake").is_file():
            return candidate
    for candidate in sorted(Path("/usr/lib").glob("*/cmake/hip-lang")):  # Debian's multiarch layout
        if (candidate / "hip-lang-config.cmake").is_file():
            return candidate
    return None


def cmake_hip_env(tmp_path: Path) -> dict[str, str]:
    """Make enable_language(HIP) work with clang-19 and no GPU libraries, on any HIP layout.

    CMake wants ``<ROCm root>/lib/cmake/hip-lang``; a distribution that puts it under
    ``lib/<multiarch>/`` gets a stand-in root whose ``lib/cmake/hip-lang`` links there. The
    stand-in root's ``bin`` holds a decoy rocm_agent_enumerator (an iGPU), which CMake's
    find_program HINTS would prefer to PATH: only CMAKE_PROGRAM_PATH puts the pinned one first.
    """
    hip_lang = _hip_lang_dir()
    assert hip_lang is not None, "no hip-lang CMake package found (install the HIP development files)"
    root = tmp_path / "rocm-root"
    (root / "lib" / "cmake").mkdir(parents=True)
    (root / "lib" / "cmake" / "hip-lang").symlink_to(hip_lang)
    decoy_tools(root / "bin")
    return {
        "HIPCXX": shutil.which("clang++-19") or "clang++-19",
        "HIPFLAGS": "-nogpuinc -nogpulib -DKERNELS_WITHOUT_HIP_HEADERS",
        "CMAKE_PREFIX_PATH": str(hip_lang.parent),
        "SKBUILD_CMAKE_DEFINE": f"CMAKE_HIP_COMPILER_ROCM_ROOT={root}",
    }


# ----------------------------------------------------------------------------------- variants

KERNEL = "__attribute__((global)) void k(int *x) { x[__builtin_amdgcn_workitem_id_x()] += 1; }\n"


def code_object(tmp: Path, target: str) -> bytes:
    """A real code object for ``target``, made by clang-19 (no ROCm needed)."""
    import pytest  # here, not at the top: the benchmarks import this module where pytest may be absent

    clang = shutil.which("clang-19")
    if not clang:
        pytest.skip("clang-19 is not installed")
    src = tmp / "k.hip"
    src.write_text(KERNEL)
    out = tmp / f"{target.replace(':', '_')}.co"
    extra = ["-mcode-object-version=6"] if target.endswith("-generic") else []
    subprocess.run(
        [
            clang,
            "-x",
            "hip",
            "-nogpuinc",
            "-nogpulib",
            f"--offload-arch={target}",
            "--cuda-device-only",
            "-O1",
            "-c",
            *extra,
            str(src),
            "-o",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    return out.read_bytes()


def gpu_wheel(folder: Path, data: bytes, member: str = "demo_gpu/_k.so", name: str = "demo-gpu") -> Path:
    return make_wheel(folder, name, "1.0", members={member: data}, stamp=False)


def picked_variants(variants_json: Path, env: dict[str, str], extra_path: str = "") -> list[str]:
    code = (
        "import json, sys\nfrom variantlib.api import get_variants_by_priority\n"
        "vj = json.load(open(sys.argv[1]))\n"
        "print(json.dumps([v.label for v in get_variants_by_priority(variants_json=vj)]))\n"
    )
    run_env = {**os.environ, **env}
    if extra_path:
        run_env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, run_env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(variants_json)], env=run_env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return [label for label in json.loads(proc.stdout) if label != "null"]


def uv_or_skip() -> str:
    """uv's path; the test is skipped where uv is not installed."""
    import pytest  # here, not at the top: see code_object

    uv = shutil.which("uv")
    if not uv:
        pytest.skip("uv is not installed")
    return uv


# ----------------------------------------------- one subject's inputs, for its unit and integration tests


def write_file(path: Path, text: str = "") -> Path:
    """``text`` at ``path``, its folders made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


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


def pure_project(tmp_path: Path, extra: str = "") -> Path:
    """A pure-Python project that names the shim (verify off), with ``extra`` pyproject lines."""
    proj = tmp_path / "proj"
    (proj / "purepkg").mkdir(parents=True)
    (proj / "purepkg" / "__init__.py").write_text("")
    (proj / "pyproject.toml").write_text(PURE_PYPROJECT + extra)
    return proj


def gpu_less_env(tmp_path: Path) -> dict[str, str]:
    """No GPU and no way to find one: an empty sysfs, no ROCm tools on PATH, no target variables."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ROCM_BUILD_BACKEND_")
        and k not in ("PYTORCH_ROCM_ARCH", "HSA_OVERRIDE_GFX_VERSION", "PIP_CONFIG_FILE")
    }
    (tmp_path / "empty-root").mkdir()
    env.update(
        ROCM_BUILD_BACKEND_SYSFS_ROOT=str(tmp_path / "empty-root"),
        PATH=os.path.dirname(sys.executable),
        PIP_NO_CACHE_DIR="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
    )
    return env


NO_GPU_PATH = "/usr/local/bin:/usr/bin:/bin"  # no rocminfo & co. answer for another machine


def no_gpu_env(build_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """``build_env`` on a machine without a GPU: a KFD tree with only a CPU node, the system's PATH."""
    return {**build_env, "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(kfd_root(tmp_path / "none")), "PATH": NO_GPU_PATH}


def variant_project(tmp: Path) -> Path:
    """A tiny ``variant = true`` project: setuptools with a real gfx942 code object as package
    data, so the audit finds gfx942 without a compiler."""
    proj = tmp / "proj"
    (proj / "demo_v").mkdir(parents=True)
    (proj / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "rocm_build_backend"\n\n'
        '[project]\nname = "demo-v"\nversion = "1.0"\n\n'
        '[tool.setuptools]\npackages = ["demo_v"]\npackage-data = {demo_v = ["*.hsaco"]}\n\n'
        '[tool.rocm-build-backend]\ntargets = "gfx942"\ncompiler-check = false\npinned-tools = false\n'
        "variant = true\n"
    )
    (proj / "demo_v" / "__init__.py").write_text("")
    shutil.copyfile(DATA / "binaries" / "amdgpu_gfx942_cov5.hsaco", proj / "demo_v" / "k.hsaco")
    return proj


def variant_build_env(tmp: Path) -> dict[str, str]:
    """The environment of a frontend building ``variant_project``: no shim settings, no caches."""
    out = {k: v for k, v in os.environ.items() if not k.startswith(("ROCM_BUILD_BACKEND_", "PIP_BUILD"))}
    out.update(
        PYTHONPATH=str(ROOT),
        PIP_NO_CACHE_DIR="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        UV_NO_CACHE="1",
        XDG_CACHE_HOME=str(tmp / "cache"),
    )
    return out


def gpu_demo_project(tmp: Path) -> tuple[Path, Any]:
    """``tests/projects/gpu_demo_backend`` copied with its device code, and its in-tree backend
    loaded: an sdist that builds "for" the GPU named in FAKE_GPU_BUILD (cache tests)."""
    import importlib.util

    proj = tmp / "proj"
    shutil.copytree(PROJECTS / "gpu_demo_backend", proj)
    (proj / "bin").mkdir()
    for b in ("hip_two_tu_cov4.so", "hip_gfx90a_gfx942_cov5.so"):
        shutil.copy(DATA / "index" / b, proj / "bin" / b)
    spec = importlib.util.spec_from_file_location("_test_backend", proj / "_backend.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return proj, mod


def pure_wheel(folder: Path, name: str = "plain", version: str = "1.0") -> Path:
    """A wheel without device code or stamp, stored uncompressed."""
    folder.mkdir(parents=True, exist_ok=True)
    di = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": b"",
        f"{di}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n".encode(),
        f"{di}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n\n",
    }
    files[f"{di}/RECORD"] = (
        "\n".join([record_line(n, d) for n, d in files.items()] + [f"{di}/RECORD,,"]) + "\n"
    ).encode()
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return path


def fat_wheel(folder: Path, **kw: Any) -> Path:
    """pkg 1.0 with HIP code for gfx90a and gfx942 in four formats and a host file (thin, split)."""
    members = {
        "pkg/_hip.so": (DATA / "binaries" / "hip_gfx90a_gfx942_cov5.so").read_bytes(),
        "pkg/_ccob.so": (DATA / "binaries" / "hip_two_tu_ccob_v2_cov5.so").read_bytes(),
        "pkg/kernels/gfx942.hsaco": (DATA / "binaries" / "amdgpu_gfx942_cov5.hsaco").read_bytes(),
        "pkg/kernels/gfx90a.co": (DATA / "binaries" / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes(),
        "pkg/_host.py": b"print('host code')\n",
    }
    members.update(kw.pop("members", {}))
    return make_wheel(folder, "pkg", "1.0", members=members, stamp=kw.pop("stamp", False), dist="pkg", **kw)


def zip_members(path: Path) -> dict[str, bytes]:
    """Every member of a zip (a wheel), by name."""
    with zipfile.ZipFile(path) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist()}


def install_dist(site: Path, name: str, files: dict[str, bytes]) -> None:
    """What an installer leaves: the files, and a .dist-info with METADATA and RECORD."""
    dist = name.replace("-", "_")
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\n")
    rows = []
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
        rows.append(record_line(rel, data))
    rows += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,", "../../bin/demo-tool,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")


GUARD_CPU_NODE = "cpu_cores_count 24\nsimd_count 0\ngfx_target_version 0\nvendor_id 0\n"


def guard_gpu_node(version: int) -> str:
    return f"cpu_cores_count 0\nsimd_count 1216\ngfx_target_version {version}\nvendor_id 4098\ndevice_id 29857\n"


def guard_root(base: Path, *versions: int, unreadable: int = 0) -> Path:
    """A folder holding sys/class/kfd/kfd/topology/nodes/<n>/properties: a CPU node, then GPUs
    (what the import guard reads)."""
    nodes = base / "sys" / "class" / "kfd" / "kfd" / "topology" / "nodes"
    nodes.mkdir(parents=True)
    (nodes / "0").mkdir()
    (nodes / "0" / "properties").write_text(GUARD_CPU_NODE)
    for i, version in enumerate(versions, start=1):
        (nodes / str(i)).mkdir()
        (nodes / str(i) / "properties").write_text(guard_gpu_node(version))
    for j in range(unreadable):  # a node whose properties cannot be read (cgroup EPERM, gone)
        (nodes / str(100 + j)).mkdir()
    return base


INDEX_TARGETS = ["gfx90a", "gfx942", "gfx1100"]


def index_fleet(folder: Path) -> dict[str, set[str]]:
    """The wheel folder the index's client tests serve, and what each target's index must install."""
    make_wheel(folder, "fat-pkg", "1.0", device={"fat_pkg/_k.so": ["gfx90a", "gfx942", "gfx1100"]})
    make_wheel(folder, "fat-pkg", "2.0", device={"fat_pkg/_k.so": ["gfx90a", "gfx942"]})
    for t in INDEX_TARGETS:  # built with local-version = true, side by side
        make_wheel(folder, "single", f"1.0+{t}", device={"single/_k.so": [t]})
    make_wheel(folder, "pure", "1.0")
    make_wheel(folder, "pure", "2.0", requires_python=">=3.8")
    make_wheel(folder, "pure", "3.0", requires_python=">=4")  # never for this Python
    want = {
        "gfx90a": {"fat_pkg-2.0", "single-1.0+gfx90a", "pure-2.0"},
        "gfx942": {"fat_pkg-2.0", "single-1.0+gfx942", "pure-2.0"},
        "gfx1100": {"fat_pkg-1.0", "single-1.0+gfx1100", "pure-2.0"},
    }
    # real device code, no stamp: the audit decides
    so = (DATA / "index" / "hip_gfx90a_gfx942_cov5.so").read_bytes()
    make_wheel(folder, "real-dev", "1.0", members={"real_dev/_k.so": so}, stamp=False)
    want["gfx90a"].add("real_dev-1.0")
    want["gfx942"].add("real_dev-1.0")
    return want


def split_wheels(tmp: Path) -> Path:
    """A wheel folder for ``index --split``: a fat wheel (gfx90a and gfx942), a pure one, a gfx942 one."""
    wd = tmp / "wheels"
    fat = DATA / "binaries" / "hip_gfx90a_gfx942_cov5.so"  # one offload bundle: gfx90a and gfx942
    make_wheel(wd, "demo-gpu", "1.0", members={"demo_gpu/_k.so": fat.read_bytes()}, stamp=False)
    make_wheel(wd, "pure", "2.0", members={"pure/__init__.py": b""}, stamp=False)
    make_wheel(
        wd,
        "one-gpu",
        "1.0",
        members={"one_gpu/k.co": (DATA / "binaries" / "amdgpu_gfx942_cov5.hsaco").read_bytes()},
        stamp=False,
    )
    return wd


def variant_links(tmp_path: Path, blobs: dict[str, bytes]) -> Path:
    """Variant wheels of demo-gpu 1.0, one per blob, and the variants JSON, in one folder."""
    from rocm_build_backend.wheel.variant import properties as V

    links = tmp_path / "links"
    entries = []
    for key, data in blobs.items():
        w = gpu_wheel(tmp_path / "plain" / key, data)
        v = V.make_variant_wheel(w, links)
        entries.append(("demo-gpu", "1.0", V.read_variant(v)[1]))
    for fname, raw in V.index_files(entries).items():
        (links / fname).write_bytes(raw)
    return links


def variant_dir(tmp: Path, blobs: dict[str, bytes], plain: bool = True) -> Path:
    """WHEEL_DIR: a variant wheel of demo-gpu 1.0 per blob, and (``plain``) one plain wheel."""
    from rocm_build_backend.wheel.variant import properties as V

    wd = tmp / "wheels"
    for key, data in blobs.items():
        V.make_variant_wheel(gpu_wheel(tmp / "plain" / key, data), wd)
    if plain:
        shutil.copy(next((tmp / "plain" / next(iter(blobs))).glob("*.whl")), wd)
    return wd


def variants_project_page(out: Path) -> dict:
    return json.loads((out / "variants/simple/demo-gpu/index.json").read_text())


def served_variants_json(out: Path) -> Path:
    """The variants JSON the project page links to, found as an installer finds it."""
    page = out / "variants/simple/demo-gpu"
    (item,) = [f for f in variants_project_page(out)["files"] if f["filename"].endswith("-variants.json")]
    return (page / item["url"]).resolve()


def sample_stamp(**over: Any) -> dict:
    """A valid stamp as ``make_stamp`` writes it, with ``over`` replacing its arguments."""
    from rocm_build_backend.wheel.stamp import make_stamp

    args: dict[str, Any] = dict(
        requested=["gfx942", "gfx90a"],
        source="settings",
        audit_files={"tiny_gpu_pkg/kernels.bin": {"targets": ["gfx942", "gfx90a"], "complete": ["gfx90a", "gfx942"]}},
        host_gpus=["gfx942:sramecc+:xnack-"],
        toolchain={"compiler": "/opt/rocm/bin/hipcc", "version": "5.2.21153", "hip_version": "5.2.21153"},
        version="0.1.0",
    )
    args.update(over)
    return valid_stamp(make_stamp(**args))


def set_member(wheel: Path, name: str, data: bytes) -> None:
    """Put ``data`` at ``name`` without fixing RECORD (a damaged or foreign wheel)."""
    with zipfile.ZipFile(wheel, "a") as zf:
        zf.writestr(name, data)


def handmade_wheel(folder: Path, payload: bytes) -> Path:
    """A wheel with one deflated and one stored member, written by zipfile."""
    dist_info = "hand-1.0.dist-info"
    files = {
        "hand/__init__.py": (b"", zipfile.ZIP_DEFLATED),
        "hand/_k.so": (payload, zipfile.ZIP_DEFLATED),
        "hand/stored.bin": (payload[:5000], zipfile.ZIP_STORED),
        f"{dist_info}/METADATA": (b"Metadata-Version: 2.1\nName: hand\nVersion: 1.0\n", zipfile.ZIP_DEFLATED),
        f"{dist_info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: false\nTag: py3-none-any\n",
            zipfile.ZIP_DEFLATED,
        ),
    }
    rows = []
    path = folder / "hand-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, (data, method) in files.items():
            zf.writestr(name, data, compress_type=method)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{name},sha256={digest},{len(data)}")
        zf.writestr(f"{dist_info}/RECORD", "\n".join(rows + [f"{dist_info}/RECORD,,"]) + "\n")
    return path


# ---------------------------------------------------------------- a third vendor (tests only)

#: the registry entry of ``tests/thirdvendor`` ("acme"), for ``gpu.vendor.registered``
ACME_ENTRY = Entry("acme", "thirdvendor.vendor:ACME", "thirdvendor.build:BUILD")
#: the other vendors' knobs, none of which an ACME build may get
ACME_OTHER_KNOBS = frozenset(
    {
        "PYTORCH_ROCM_ARCH",
        "GPU_TARGETS",
        "HIPCC_COMPILE_FLAGS_APPEND",
        "HIP_ARCHITECTURES",
        "TORCH_CUDA_ARCH_LIST",
        "NVCC_APPEND_FLAGS",
        "CUDAARCHS",
    }
)


# ------------------------------------------------------------------- hostile inputs: the verdict


def one_error(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    """A refusal as the project promises it: exit ``code``, no traceback, and stderr nothing but
    ``error:`` lines then ``hint:`` lines; returns stderr."""
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    lines = proc.stderr.splitlines()
    assert lines and lines[0].startswith("error: ") and all(ln.startswith(("error: ", "hint: ")) for ln in lines), (
        proc.stderr
    )
    return proc.stderr


CAPPED_MEMORY = 1 << 30  # address space of a capped child: far more than any run needs


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAPPED_MEMORY, CAPPED_MEMORY))


def capped_cli(
    *args: object, cwd: Path | None = None, timeout: float = 60, env: dict | None = None
) -> subprocess.CompletedProcess:
    """``python -m rocm_build_backend ARGS`` from this checkout, its address space capped at 1 GiB."""
    return subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=timeout,
        cwd=cwd,
        preexec_fn=_cap_memory,
    )


# ------------------------------------------------------------------- check --env: one site-packages


def check_env_site(tmp_path: Path) -> Path:
    """A site-packages of three distributions: code for gfx90a:xnack+ (``demo-gpu``), for gfx942
    (``demo-ok``), and device code under names that cannot hold any (``pure``: never opened)."""
    binaries = DATA / "binaries"
    gfx90a = (binaries / "amdgpu_gfx90a_xnack+_cov4.co").read_bytes()
    gfx942 = (binaries / "amdgpu_gfx942_cov5.hsaco").read_bytes()
    site = tmp_path / "site-packages"
    install_dist(site, "demo-gpu", {"demo_gpu/__init__.py": b"", "demo_gpu/_k.so": gfx90a})
    install_dist(site, "demo-ok", {"demo_ok/k.hsaco": gfx942, "demo_ok/data.bin": b"\0" * 4096})
    install_dist(site, "pure", {"pure/__init__.py": gfx90a, "pure/notes.txt": gfx90a, "pure/tiny.so": b"\x7fELF"})
    return site


# ----------------------------------------------------------------------------- index pages


class Anchors(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.anchors: list[tuple[dict, str]] = []
        self._attrs = None
        self.meta = {}

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._attrs, self._text = dict(attrs), ""
        if tag == "meta":
            d = dict(attrs)
            self.meta[d.get("name")] = d.get("content")

    def handle_data(self, data):
        if self._attrs is not None:
            self._text += data

    def handle_endtag(self, tag):
        if tag == "a" and self._attrs is not None:
            self.anchors.append((self._attrs, self._text))
            self._attrs = None


def anchors(page: Path) -> Anchors:
    p = Anchors()
    p.feed(page.read_text("utf-8"))
    return p


def inconsistencies(out: Path) -> list[str]:
    """Every project page's link that does not lead to a file with the hash the page gives,
    or whose PEP 658 metadata file is missing or has another hash."""
    bad = []
    for page in out.glob("*/simple/*/index.html"):
        if any(part.startswith(".") for part in page.relative_to(out).parts):
            continue  # a new index being made beside the served ones: no page links it yet
        for attrs, _text in anchors(page).anchors:
            href, _, frag = attrs["href"].partition("#sha256=")
            target = (page.parent / unquote(href)).resolve()
            try:
                if hashlib.sha256(target.read_bytes()).hexdigest() != frag:
                    bad.append(f"{page}: {href} has another hash")
                meta = Path(str(target) + ".metadata").read_bytes()
                if "sha256=" + hashlib.sha256(meta).hexdigest() != attrs["data-core-metadata"]:
                    bad.append(f"{page}: {href}.metadata has another hash")
            except OSError:
                bad.append(f"{page}: {href} is missing")
    return bad
