"""The seed scenario end to end, with real pip and uv: the HIP sample's sdist is built from a
local index for a gfx90a machine and the wheel lands in the frontend's cache; then "the machine
is gfx942" (a fake KFD sysfs root). Each frontend hands the cached gfx90a wheel back there;
this matrix shows what catches it:

| frontend | how it is installed | caught by |
|---|---|---|
| pip | index sdist, pip's wheel cache | import guard, ``check --env``, ``cache list``, ``install`` (builds the sdist through the shim, never the cached wheel; refuses: hipcc cannot emit gfx942) |
| pip | same version already installed, machine gfx940 | ``install``: builds through the shim, pip keeps the old install, read back, installed again |
| uv | index sdist, uv's cache | ``check --env``, ``cache list``, ``install --tool uv`` (rebuilds in uv's copy of the sdist) |
| uv | ``-C rocm-build-backend.targets`` | uv keys it: a new build in its copy of the sdist, the stale tree there cleaned |
| uv | variants index over HTTP | AMD: uv installs the plain fallback; NVIDIA: the variant, or the fallback |

Editable installs are in ``test_check_editable_installs.py``. One gfx90a build primes both caches
(module fixture); each test works on its own copy of them.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocm_build_backend.binary.audit import audit_file
from rocm_build_backend.wheel.variant import properties as V
from helpers import ROOT, SAMPLES, TESTS, gpu_wheel, kfd_root

BIN = TESTS / "data" / "binaries"

_DROP = (
    "PYTORCH_ROCM_ARCH",
    "GPU_TARGETS",
    "AMDGPU_TARGETS",
    "HCC_AMDGPU_TARGET",
    "HIPCC_COMPILE_FLAGS_APPEND",
    "CMAKE_ARGS",
    "MAX_JOBS",
    "TORCH_CUDA_ARCH_LIST",
    "PIP_FIND_LINKS",
    "PIP_NO_CACHE_DIR",
    "PIP_CONFIG_FILE",
    "UV_NO_CACHE",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
)
NAME = "rocm-sample-hip"


@dataclass
class World:
    base: Path
    env: dict[str, str]
    index: str  # file:// URL of a PEP 503 index holding the sdist
    pip_cache: Path
    uv_cache: Path
    roots: dict[str, Path]  # gfx90a, gfx940, gfx942 -> a fake KFD sysfs root
    uv: str

    def on(self, gpu: str, **extra: str) -> dict[str, str]:
        """The environment of a build or run on a machine with this GPU."""
        return {**self.env, "ROCM_BUILD_BACKEND_SYSFS_ROOT": str(self.roots[gpu]), **extra}


def run(argv, env, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True, timeout=timeout)


def cli(*argv, env) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "rocm_build_backend", *argv], env)


def so_targets(site: Path) -> list[str]:
    (so,) = site.glob("rocm_sample_hip/_kernels*.so")
    return audit_file(so).targets


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    uv = shutil.which("uv") or pytest.skip("uv is not installed")
    base = tmp_path_factory.mktemp("trap")
    (base / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in _DROP and not k.startswith("ROCM_BUILD_BACKEND_")}
    env.update(
        PYTHONPATH=str(ROOT),
        TMPDIR=str(base / "tmp"),
        XDG_CACHE_HOME=str(base / "xdg"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
    )
    proj = base / "project"
    shutil.copytree(SAMPLES / "setuptools_hip", proj, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info"))
    files = base / "index" / "files"
    proc = run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", files, proj], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (sdist,) = files.glob("*.tar.gz")
    page = base / "index" / "simple" / NAME
    page.mkdir(parents=True)
    page.joinpath("index.html").write_text(
        f'<!DOCTYPE html><html><body><a href="../../files/{sdist.name}">{sdist.name}</a></body></html>\n'
    )
    roots = {
        gpu: kfd_root(base / gpu, version) for gpu, version in (("gfx90a", 90010), ("gfx940", 90400), ("gfx942", 90402))
    }
    w = World(base, env, (base / "index" / "simple").as_uri(), base / "pip-cache", base / "uv-cache", roots, uv)
    # the gfx90a machine: each frontend builds the sdist through the shim (with the import
    # guard) and keeps the wheel in its cache
    primed = w.on("gfx90a", ROCM_BUILD_BACKEND_GUARD="1")
    proc = run(
        [sys.executable, "-m", "pip", "install", "-v", *pip_args(w, w.pip_cache), "--target", base / "site-pip", NAME],
        primed,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the build log says the wheel goes into a cache whose key does not hold the targets
    assert (
        "warning: pip keeps a wheel built from an index or --find-links sdist in its cache keyed by the "
        "sdist's URL and the Python version, not by this machine's GPUs" in proc.stdout + proc.stderr
    )
    proc = run(
        [
            uv,
            "pip",
            "install",
            "-v",
            "--python",
            sys.executable,
            *uv_args(w, w.uv_cache),
            "--target",
            base / "site-uv",
            NAME,
        ],
        primed,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "warning: uv keeps this wheel in its cache keyed by the sdist and the -C settings, not by this "
        "machine's GPUs" in proc.stderr
    )
    assert so_targets(base / "site-pip") == so_targets(base / "site-uv") == ["gfx90a"]
    return w


def pip_args(w: World, cache: Path) -> list[str]:
    return ["--index-url", w.index, "--cache-dir", str(cache), "--no-build-isolation", "--no-deps"]


def uv_args(w: World, cache: Path) -> list[str]:
    return ["--index-url", w.index, "--cache-dir", str(cache), "--no-build-isolation", "--no-deps"]


def copy_cache(src: Path, tmp: Path) -> Path:
    return Path(shutil.copytree(src, tmp / src.name, symlinks=True))


def venv(tmp: Path, env) -> Path:
    """A venv that sees this interpreter's packages (pip, setuptools, the shim on PYTHONPATH)."""
    proc = run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", tmp / "venv"], env)
    assert proc.returncode == 0, proc.stderr
    return tmp / "venv" / "bin" / "python"


def venv_site(python: Path) -> Path:
    (site,) = python.parent.parent.glob("lib/python3*/site-packages")
    return site


# ------------------------------------------------------------------------------------ pip


def test_pip_hands_back_the_gfx90a_wheel_and_each_check_catches_it(world, tmp_path):
    cache = copy_cache(world.pip_cache, tmp_path)
    python = venv(tmp_path, world.env)
    gfx942 = world.on("gfx942")
    proc = run([python, "-m", "pip", "install", *pip_args(world, cache), NAME], gfx942)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert so_targets(venv_site(python)) == ["gfx90a"]  # the trap: no build ran, pip reused its cache

    # the import guard refuses to load it on this GPU, naming both
    imp = run([python, "-c", "import rocm_sample_hip"], gfx942)
    assert imp.returncode != 0 and "ImportError" in imp.stderr, imp.stderr
    assert "gfx942" in imp.stderr and "gfx90a" in imp.stderr

    # check --env reads the installed files
    env_check = cli("check", "--env", python, "--no-cache", env=gfx942)
    assert env_check.returncode == 1, env_check.stdout + env_check.stderr
    assert re.search(r"rocm-sample-hip 0\.1\.0\s+1\s+gfx90a\s+no", env_check.stdout), env_check.stdout

    # cache list finds the cached wheel for another GPU, and says how to remove it
    listed = cli("cache", "list", "--tool", "pip", "--cache-dir", cache, env=gfx942)
    assert listed.returncode == 1, listed.stdout + listed.stderr
    assert "rocm_sample_hip-0.1.0-cp" in listed.stdout and "(gfx90a)" in listed.stdout
    assert listed.stdout.rstrip().endswith(f"cache purge --tool pip --cache-dir {cache} --yes")

    # install never takes pip's cached build: it builds the sdist through the shim for gfx942,
    # which fails with the shim's own words (this hipcc cannot emit gfx942); nothing is installed
    done = cli("install", "--python", python, "--", *pip_args(world, cache), NAME, env=gfx942)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "devices: gfx942"
    assert any(line.startswith("  error: ") and "hipcc" in line and "gfx942" in line for line in lines), done.stdout
    assert any(line.startswith("  hint: gfx942 needs LLVM 17") for line in lines), done.stdout
    assert lines[-1] == "nothing installed: a wheel was refused"


def test_pip_same_version_reinstall_is_read_back(world, tmp_path):
    cache = copy_cache(world.pip_cache, tmp_path)
    python = venv(tmp_path, world.env)
    gfx940 = world.on("gfx940")
    assert run([python, "-m", "pip", "install", *pip_args(world, cache), NAME], gfx940).returncode == 0
    assert so_targets(venv_site(python)) == ["gfx90a"]
    done = cli("install", "--python", python, "--", *pip_args(world, cache), NAME, env=gfx940)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "note: rocm-sample-hip 0.1.0 built from its sdist through rocm-build-backend" in out, out
    assert re.search(r"rocm-sample-hip 0\.1\.0\s+built\s+gfx940\s+yes", out), out
    # pip skipped the wheel (same version installed): install read that back and installed again
    assert "rocm-sample-hip: pip kept the installed 0.1.0 (gfx90a), which does not load here; installed again" in out
    assert "  rocm-sample-hip 0.1.0 (gfx940)" in out and out.rstrip().endswith("what is installed loads here")
    assert so_targets(venv_site(python)) == ["gfx940"]
    assert cli("check", "--env", python, "--no-cache", env=gfx940).returncode == 0
    # the build through the shim bypassed pip's cache: it still holds the one gfx90a wheel
    assert len(list(cache.glob("wheels/**/*.whl"))) == 1


def test_pip_keys_its_cache_by_url_only(world, tmp_path):
    """README: neither -C nor the environment reaches pip's wheel cache key."""
    cache = copy_cache(world.pip_cache, tmp_path)
    for extra, env in (
        (["-C", "rocm-build-backend.targets=gfx940"], world.on("gfx940")),
        ([], world.on("gfx940", ROCM_BUILD_BACKEND_TARGETS="gfx940")),
    ):
        site = tmp_path / f"site-{len(extra)}"
        proc = run(
            [sys.executable, "-m", "pip", "install", *pip_args(world, cache), *extra, "--target", site, NAME], env
        )
        assert proc.returncode == 0, proc.stderr
        assert so_targets(site) == ["gfx90a"]
    # --no-cache-dir: pip builds the sdist on this machine
    proc = run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            *pip_args(world, cache),
            "--no-cache-dir",
            "--target",
            tmp_path / "fresh",
            NAME,
        ],
        world.on("gfx940"),
    )
    assert proc.returncode == 0, proc.stderr
    assert so_targets(tmp_path / "fresh") == ["gfx940"]


# ------------------------------------------------------------------------------------- uv


def test_uv_hands_back_its_cached_build_and_install_rebuilds_it(world, tmp_path):
    cache = copy_cache(world.uv_cache, tmp_path)
    python = venv(tmp_path, world.env)
    gfx942, gfx940 = world.on("gfx942"), world.on("gfx940")
    proc = run([world.uv, "pip", "install", "--python", python, *uv_args(world, cache), NAME], gfx942)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert so_targets(venv_site(python)) == ["gfx90a"]  # uv's cache does not key this machine
    imp = run([python, "-c", "import rocm_sample_hip"], gfx942)
    assert imp.returncode != 0 and "ImportError" in imp.stderr and "gfx90a" in imp.stderr, imp.stderr

    env_check = cli("check", "--env", python, "--no-cache", env=gfx942)
    assert env_check.returncode == 1 and "gfx90a" in env_check.stdout, env_check.stdout
    listed = cli("cache", "list", "--tool", "uv", "--cache-dir", cache, env=gfx942)
    assert listed.returncode == 1 and "(gfx90a)" in listed.stdout, listed.stdout + listed.stderr

    # on a gfx940 machine install rebuilds it inside uv's copy of the sdist (where the gfx90a
    # build tree is cleaned, not refused) and reinstalls over the same version uv kept
    done = cli("install", "--tool", "uv", "--python", python, "--", *uv_args(world, cache), NAME, env=gfx940)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "held gfx90a; rebuilt from its sdist" in done.stdout
    assert "  rocm-sample-hip 0.1.0 (gfx940)" in done.stdout, done.stdout
    assert so_targets(venv_site(python)) == ["gfx940"]
    assert cli("check", "--env", python, "--no-cache", env=gfx940).returncode == 0


def test_uv_keys_config_settings_not_the_environment(world, tmp_path):
    """README: uv keys -C (a new build, in its cached copy of the sdist: the gfx90a tree there
    is cleaned) but not the environment (its gfx90a build is handed back)."""
    cache = copy_cache(world.uv_cache, tmp_path)
    by_env = run(
        [
            world.uv,
            "pip",
            "install",
            "--python",
            sys.executable,
            *uv_args(world, cache),
            "--target",
            tmp_path / "env",
            NAME,
        ],
        world.on("gfx940", ROCM_BUILD_BACKEND_TARGETS="gfx940"),
    )
    assert by_env.returncode == 0 and so_targets(tmp_path / "env") == ["gfx90a"], by_env.stderr
    by_c = run(
        [
            world.uv,
            "pip",
            "install",
            "-v",
            "--python",
            sys.executable,
            *uv_args(world, cache),
            "-C",
            "rocm-build-backend.targets=gfx940",
            "--target",
            tmp_path / "c",
            NAME,
        ],
        world.on("gfx940"),
    )
    assert by_c.returncode == 0, by_c.stdout + by_c.stderr
    assert so_targets(tmp_path / "c") == ["gfx940"]
    removed = [line for line in by_c.stderr.splitlines() if "rocm-build-backend: removed stale build tree" in line]
    assert removed and "sdists-v" in removed[0] and "(the copy of the sources uv unpacked)" in removed[0], removed


# ------------------------------------------------------------------------ variants over HTTP


class Served:
    """``python -m http.server`` on 127.0.0.1 and a free port, in a subprocess, for one test."""

    def __init__(self, folder: Path, env):
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(folder)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        ready, _, _ = select.select([self.proc.stdout], [], [], 20)
        line = self.proc.stdout.readline() if ready else ""
        m = re.search(r"port (\d+)", line)
        if not m:
            self.stop()
            pytest.fail(f"http.server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{m.group(1)}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def test_variant_installs_with_uv_from_the_variants_index(world, tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    # the seed's gfx90a wheel (from pip's cache) and its variant; NVIDIA sm_80 and sm_90
    # variants of a small project with its plain wheel
    (plain,) = world.pip_cache.glob("wheels/**/*.whl")
    shutil.copy(plain, wheels)
    V.make_variant_wheel(plain, wheels)
    for key, blob in (("sm_80", "cubin_abi8_sm80_cuda13.0.cubin"), ("sm_90", "cubin_abi7_sm90a_cuda12.4.cubin")):
        V.make_variant_wheel(gpu_wheel(tmp_path / key, (BIN / blob).read_bytes()), wheels)
    shutil.copy(next((tmp_path / "sm_80").glob("*.whl")), wheels)
    proc = cli("index", wheels, "-o", tmp_path / "out", "--variants", env=world.env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    server = Served(tmp_path / "out", world.env)
    try:
        url = f"{server.url}/variants/simple/"

        def uv_install(what: str, site: str, *extra: str, **env: str):
            return run(
                [
                    world.uv,
                    "pip",
                    "install",
                    "--python",
                    sys.executable,
                    "--index-url",
                    url,
                    "--no-cache",
                    "--target",
                    tmp_path / site,
                    *extra,
                    what,
                ],
                {**world.env, **env},
                timeout=300,
            )

        def label(site: str) -> str:
            (info,) = (tmp_path / site).glob("*.dist-info")
            vj = info / "variant.json"
            return next(iter(json.loads(vj.read_text())["variants"])) if vj.exists() else "plain"

        preview = ("--preview-features", "wheel-variants")
        force = {"NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": "13.0"}
        for sm, want in (("9.0", "90_real"), ("8.6", "80_real"), ("7.5", "plain")):
            got = uv_install("demo-gpu", f"nv-{sm}", *preview, NV_VARIANT_PROVIDER_FORCE_SM_ARCH=sm, **force)
            assert got.returncode == 0, got.stderr
            assert label(f"nv-{sm}") == want, sm  # 7.5: no variant fits, the plain fallback on the same page
        plain_nv = uv_install("demo-gpu", "nv-plain")  # no variant support asked: the plain wheel
        assert plain_nv.returncode == 0 and label("nv-plain") == "plain", plain_nv.stderr
        # AMD: uv runs no AMD provider, so it installs the plain fallback; check --env still
        # tells a gfx942 machine that it holds gfx90a code
        amd = uv_install(NAME, "amd", *preview)
        assert amd.returncode == 0, amd.stderr
        assert label("amd") == "plain" and so_targets(tmp_path / "amd") == ["gfx90a"]
    finally:
        server.stop()
    assert server.proc.returncode is not None
