"""The scale-out example (``examples/scale-out/``, ``docs/scale-out.md``), checked by the tools
that will read it: the GitHub Actions workflow against the workflow schema (``check-jsonschema``'s
vendored copy), cibuildwheel's configuration by cibuildwheel itself, for every job of the
matrix. The repair command runs on a real wheel in ``tests/integration/test_sbom.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT, inconsistencies, run
from rocm_build_backend._version import __version__
from rocm_build_backend.gpu.targets import parse_targets, vendor_name
from rocm_build_backend.gpu.amd.families import FAMILIES
from rocm_build_backend.wheel.index.publish import publish
from rocm_build_backend.wheel.index.run import build_index
from rocm_build_backend.wheel.label import local_version

EXAMPLE = ROOT / "examples" / "scale-out"
WORKFLOW = EXAMPLE / "wheels.yml"
CONFIG = EXAMPLE / "cibuildwheel.toml"
PACKAGE = ROOT / "sample_projects" / "setuptools_hip"  # any project: the configuration is the example's
IDENTIFIERS = ["cp311-manylinux_x86_64", "cp312-manylinux_x86_64", "cp313-manylinux_x86_64"]
MERGE = "rocm-build-backend index --add dist/wheels-* -o site"


def _tool(name: str) -> str:
    path = shutil.which(name) or str(Path(sys.executable).with_name(name))
    if not Path(path).exists():
        pytest.skip(f"{name} is not installed (the test extra has it)")
    return path


def _workflow() -> dict:
    yaml = pytest.importorskip("ruamel.yaml")  # check-jsonschema's own YAML reader
    return yaml.YAML(typ="safe").load(WORKFLOW.read_text())


def _jobs() -> list[tuple[dict, dict[str, str]]]:
    """(matrix entry, the build step's environment with the entry's values filled in)."""
    build = _workflow()["jobs"]["build"]
    (step,) = [s for s in build["steps"] if "cibuildwheel" in s.get("run", "") and "env" in s]
    out = []
    for entry in build["strategy"]["matrix"]["include"]:
        env = {
            k: re.sub(r"\$\{\{\s*matrix\.(\w+)\s*\}\}", lambda m: str(entry[m.group(1)]), v)
            for k, v in step["env"].items()
        }
        out.append((entry, env))
    return out


def test_the_workflow_validates_against_the_github_workflow_schema(tmp_path):
    checker = _tool("check-jsonschema")
    proc = run([checker, "--builtin-schema", "vendor.github-workflows", WORKFLOW])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    broken = tmp_path / "broken.yml"  # the check bites: a job without runs-on is refused
    broken.write_text(WORKFLOW.read_text().replace("    runs-on: ubuntu-latest\n", "", 1))
    proc = run([checker, "--builtin-schema", "vendor.github-workflows", broken])
    assert proc.returncode == 1 and "runs-on" in proc.stdout + proc.stderr


def test_the_merge_step_adds_every_jobs_wheels_to_the_index():
    publish = _workflow()["jobs"]["publish"]
    assert publish["needs"] == ["build", "smoke"] and publish["concurrency"]["cancel-in-progress"] is False
    runs = "\n".join(s.get("run", "") for s in publish["steps"])
    assert MERGE + " --json > changes.json" in runs
    assert MERGE in (ROOT / "docs" / "scale-out.md").read_text()
    # incremental: no sync of the bucket, only the files the run wrote go up, and the state
    # (SQLite) lives apart from the served tree
    assert "sync" not in runs and "files_written" in runs and "pages_written" in runs
    assert '"$STATE/.rocm-build-backend-index.sqlite3"' in runs and publish["env"]["STATE"] != publish["env"]["INDEX"]


def test_the_shim_is_got_with_hashes_and_the_actions_are_current():
    workflow = _workflow()
    runs = [s.get("run", "") for job in workflow["jobs"].values() for s in job["steps"]]
    installs = [r for r in runs if "ci/tools-requirements.txt" in r]
    assert installs and all("--require-hashes" in r for r in installs)
    for name in ("tools-requirements.in", "build-constraints.in"):
        pins = [
            line for line in (EXAMPLE / "ci" / name).read_text().splitlines() if line.startswith("rocm-build-backend")
        ]
        assert pins == [f"rocm-build-backend=={__version__}"], name
    uses = {
        s["uses"].split("@")[0]: s["uses"].split("@")[1]
        for job in workflow["jobs"].values()
        for s in job["steps"]
        if "uses" in s
    }
    assert uses == {
        "actions/checkout": "v5",
        "actions/setup-python": "v6",
        "actions/upload-artifact": "v6",
        "actions/download-artifact": "v7",
        "aws-actions/configure-aws-credentials": "v6",
        "mozilla-actions/sccache-action": "v0.0.11",
    }  # v0.0.10 and later run on Node 24


def test_each_image_has_its_dockerfile_and_a_gpu_runs_the_wheels():
    workflow = _workflow()
    images = "\n".join(s.get("run", "") for s in workflow["jobs"]["images"]["steps"])
    for vendor in ("rocm", "cuda"):
        dockerfile = EXAMPLE / "docker" / f"{vendor}.Dockerfile"
        assert f"ci/docker/{vendor}.Dockerfile" in images and dockerfile.is_file()
        assert ("hipcc --version" if vendor == "rocm" else "nvcc --version") in dockerfile.read_text()
    images_used = {entry["image"] for entry, _ in _jobs()}
    assert images_used == {"${{ needs.images.outputs.rocm }}", "${{ needs.images.outputs.cuda }}"}
    smoke = workflow["jobs"]["smoke"]
    assert smoke["needs"] == "build" and "self-hosted" in smoke["runs-on"]
    families = {entry["family"]: entry["vendor"] for entry, _ in _jobs()}
    assert {families[f] for f in smoke["strategy"]["matrix"]["family"]} == {"amd", "nvidia"}
    runs = "\n".join(s.get("run", "") for s in smoke["steps"])
    assert "rocm-build-backend check dist/*.whl" in runs and "check --env" in runs


def test_cibuildwheel_prints_the_configured_wheels_for_every_job():
    cibuildwheel = _tool("cibuildwheel")
    for entry, env in _jobs():
        proc = run(
            [cibuildwheel, "--print-build-identifiers", "--platform", "linux", "--config-file", CONFIG, PACKAGE],
            env={"PATH": "/usr/bin:/bin", **env},
        )
        assert proc.returncode == 0, (entry["family"], proc.stdout + proc.stderr)
        assert proc.stdout.split() == IDENTIFIERS, entry["family"]


def test_cibuildwheel_reads_each_jobs_settings_for_the_shim():
    """cibuildwheel's own options, per job: the shim's settings it will pass into the container,
    the image, the frontend and the repair command."""
    pytest.importorskip("cibuildwheel")
    from cibuildwheel.options import CommandLineArguments, compute_options

    args = dataclasses.replace(
        CommandLineArguments.defaults(), config_file=str(CONFIG), package_dir=PACKAGE, platform="linux"
    )
    families = set()
    for entry, env in _jobs():
        options = compute_options("linux", args, env).build_options("cp312-manylinux_x86_64")
        settings = options.environment.as_dictionary({})
        targets = parse_targets(settings["ROCM_BUILD_BACKEND_TARGETS"])
        assert [str(t) for t in targets] == entry["targets"].split(";")
        assert {vendor_name(t) for t in targets} == {entry["vendor"]} == {settings["ROCM_BUILD_BACKEND_VENDOR"]}
        if entry["vendor"] == "amd":  # a family job builds exactly the members of index --family's family
            assert tuple(entry["targets"].split(";")) == FAMILIES[entry["family"]]
        else:
            assert entry["targets"] == entry["family"]
        assert settings["ROCM_BUILD_BACKEND_LOCAL_VERSION"] == "true"
        assert settings["PIP_FIND_LINKS"] == "/project/ci/wheels"
        assert settings["PIP_CONSTRAINT"] == "/project/ci/build-constraints.txt"
        assert options.manylinux_images["x86_64"] == entry["image"]
        assert options.build_frontend.name == "build"
        for library in ("libamdhip64.so*", "libhsa-runtime64.so*", "libcudart.so*", "libcuda.so*"):
            assert f"--exclude '{library}'" in options.repair_command
        families.add(entry["vendor"])
    assert families == {"amd", "nvidia"}

    # without a job's environment, the configuration's own default
    options = compute_options("linux", args, {}).build_options("cp312-manylinux_x86_64")
    assert options.environment.as_dictionary({})["ROCM_BUILD_BACKEND_TARGETS"] == "gfx942"


# One job of the matrix, as a process: its wheels (two versions of the project, labelled with the
# job's targets as ROCM_BUILD_BACKEND_LOCAL_VERSION labels them, and a pure helper package), written
# into its own dist folder, then the workflow's merge command run against the shared output.
JOB = """\
import shlex, subprocess, sys
sys.path[:0] = [sys.argv[1]]
from pathlib import Path
from helpers import make_wheel
from rocm_build_backend.wheel.label import local_version
family, targets, work, out, merge = sys.argv[2], sys.argv[3].split(";"), Path(sys.argv[4]), sys.argv[5], sys.argv[6]
dist = work / "dist" / f"wheels-{family}"
for version in ("1.0", "1.1"):
    make_wheel(dist, "your-project", local_version(version, targets), dist="your_project",
               device={"your_project/_k.so": targets})
make_wheel(dist, f"helper-{family.lower().replace('_', '-')}", "1.0")
argv = [a.replace("site", out) if a == "site" else a for a in shlex.split(merge)]
argv = [str(p) for a in argv for p in (sorted(work.glob(a)) if "*" in a else [a])]
proc = subprocess.run([sys.executable, "-m", "rocm_build_backend", *argv[1:]], capture_output=True, text=True)
sys.exit(0 if proc.returncode == 0 else proc.stdout + proc.stderr)
"""


def _pages(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.glob("*/simple/**/index.*"))}


def test_the_matrix_run_as_parallel_jobs_merged_at_once_gives_the_pages_of_one_run(tmp_path):
    """Every job of the workflow's matrix as a process of its own, each writing its own dist
    folder and running the merge step into one output at the same time as the others, while a
    client reads the pages: no page ever links a missing file, and the pages at the end are
    the bytes of one run over every job's wheels, by name or from one folder."""
    script = tmp_path / "job.py"
    script.write_text(JOB)
    out = tmp_path / "site"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    entries = [entry for entry, _env in _jobs()]
    jobs = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                str(ROOT / "tests"),
                e["family"],
                e["targets"],
                str(tmp_path / e["family"]),
                str(out),
                MERGE,
            ],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for e in entries
    ]
    seen, looks = [], 0
    while any(j.poll() is None for j in jobs):  # a client reading the pages while the jobs publish
        if out.is_dir():
            seen += inconsistencies(out)
            looks += 1
        time.sleep(0.05)
    errors = [j.communicate()[1] for j in jobs]
    assert all(j.returncode == 0 for j in jobs), errors
    assert seen == [] and looks > 0

    every = tmp_path / "every"
    every.mkdir()
    for e in entries:
        for whl in (tmp_path / e["family"] / "dist" / f"wheels-{e['family']}").glob("*.whl"):
            os.link(whl, every / whl.name)
    assert len(list(every.iterdir())) == 3 * len(entries)
    one = tmp_path / "one"
    assert publish(one, add=[every]).exit_code == 0
    mirror = tmp_path / "mirror"
    assert build_index(every, mirror).exit_code == 0
    assert _pages(out) == _pages(one) == _pages(mirror)
    assert (out / "index.html").read_bytes() == (one / "index.html").read_bytes()
    # every target of every job has its index, listing that job's two versions of the project
    for e in entries:
        for target in e["targets"].split(";"):
            page = _pages(out)[f"{target}/simple/your-project/index.html"].decode()
            for version in ("1.0", "1.1"):
                assert local_version(version, e["targets"].split(";")) in page, (target, version)
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


def _published_run(tmp_path: Path, bucket: Path, state: Path, dist: Path, run_no: int) -> None:
    """One run of the publish job, with folders for the buckets: the state fetched into an empty
    site/, the workflow's merge command, then only the files and pages it wrote uploaded, and
    the state saved apart from the served tree."""
    site = tmp_path / f"site-{run_no}"
    site.mkdir()
    if (state / ".rocm-build-backend-index.sqlite3").exists():
        shutil.copy(state / ".rocm-build-backend-index.sqlite3", site)
    proc = run(
        [
            sys.executable,
            "-m",
            "rocm_build_backend",
            "index",
            "--add",
            *sorted(dist.glob("wheels-*")),
            "-o",
            site,
            "--json",
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    changes = json.loads(proc.stdout)
    for path in changes["files_written"] + changes["pages_written"]:
        (bucket / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(site / path, bucket / path)
    state.mkdir(exist_ok=True)
    shutil.copy(site / ".rocm-build-backend-index.sqlite3", state)


def test_the_incremental_publish_serves_what_one_run_over_every_wheel_serves(tmp_path):
    """Two workflow runs (two tags), each publishing only what it wrote on top of the bucket, with
    only the state carried between them: the bucket then serves the pages of one run over every
    wheel, and holds no state, lock or staging file."""
    from helpers import make_wheel

    bucket, state, every = tmp_path / "bucket", tmp_path / "state", tmp_path / "every"
    for run_no, (version, families) in enumerate([("1.0", ("gfx94X-dcgpu", "sm_90")), ("1.1", ("gfx94X-dcgpu",))]):
        dist = tmp_path / f"dist-{run_no}"
        for family in families:
            targets = ["gfx942"] if family.startswith("gfx") else ["sm_90"]
            for folder in (dist / f"wheels-{family}", every):
                make_wheel(
                    folder,
                    "your-project",
                    local_version(version, targets),
                    dist="your_project",
                    device={"your_project/_k.so": targets},
                )
        _published_run(tmp_path, bucket, state, dist, run_no)
    one = tmp_path / "one"
    assert publish(one, add=[every]).exit_code == 0
    assert _pages(bucket) == _pages(one) and (bucket / "index.html").read_bytes() == (one / "index.html").read_bytes()
    served = {p.relative_to(bucket).as_posix() for p in bucket.rglob("*") if p.is_file()}
    assert not [p for p in served if p.startswith(".") or "/." in p], served
    assert inconsistencies(bucket) == []
