"""The wheel stamp: the record, local version labels, and rewriting real wheels safely.

Wheels here are built from a tiny setuptools project with pip, then checked by the strict
tools (installer's RECORD validation, ``wheel unpack``, check-wheel-contents) and installed
with pip and uv into temporary folders.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.errors import WheelError
from rocm_build_backend.wheel.label import local_version
from rocm_build_backend.wheel.stamp import STAMP_NAME, read_stamp, rewrite_metadata_dir, rewrite_wheel
from helpers import handmade_wheel, ROOT, sample_stamp, set_member


PROJECT = {
    "pyproject.toml": """\
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "tiny-gpu-pkg"
        version = "1.0"
        description = "A tiny package"

        [project.scripts]
        tiny-gpu = "tiny_gpu_pkg:main"

        [tool.setuptools]
        packages = ["tiny_gpu_pkg"]

        [tool.setuptools.package-data]
        tiny_gpu_pkg = ["*.sh", "*.bin"]
        """,
    "setup.py": """\
        from setuptools import setup
        setup(data_files=[("share/tiny-gpu-pkg", ["share/notes.txt"])])
        """,
    "tiny_gpu_pkg/__init__.py": '''\
        """Tiny package."""
        from __future__ import annotations

        VALUE = 42


        def main():
            print(VALUE)
        ''',
    "tiny_gpu_pkg/kernels.bin": "not really device code\n" * 50,
    "tiny_gpu_pkg/run.sh": "#!/bin/sh\necho hi\n",
    "share/notes.txt": "notes\n",
}


def write_project(root: Path) -> Path:
    for rel, text in PROJECT.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (root / "tiny_gpu_pkg" / "run.sh").chmod(0o755)
    return root


def run(*cmd, check=True, **kw):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("tiny")
    project = write_project(base / "project")
    out = base / "dist"
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-build-isolation",
        "--no-deps",
        "--no-cache-dir",
        "-q",
        "-w",
        out,
        project,
    )
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture
def wheel(built_wheel, tmp_path) -> Path:
    folder = tmp_path / "wheels"
    folder.mkdir()
    return Path(shutil.copy2(built_wheel, folder / built_wheel.name))


def validate_with_tools(wheel: Path, tmp: Path) -> None:
    """installer (hashes), wheel unpack (hashes), check-wheel-contents (names)."""
    run(
        sys.executable,
        "-m",
        "installer",
        "--validate-record",
        "all",
        "--no-compile-bytecode",
        "--destdir",
        tmp / "installer-root",
        wheel,
    )
    run(sys.executable, "-m", "wheel", "unpack", "--dest", tmp / "unpacked", wheel)
    proc = run("check-wheel-contents", wheel, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def pip_install(wheel: Path, target: Path) -> Path:
    run(
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-index",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "-q",
        "--target",
        target,
        wheel,
    )
    return target


def uv_install(wheel: Path, tmp: Path) -> Path:
    venv = tmp / "uv-venv"
    env = {**os.environ, "UV_CACHE_DIR": str(tmp / "uv-cache"), "UV_NO_CONFIG": "1"}
    run("uv", "venv", "-q", "--python", sys.executable, venv, env=env)
    python = venv / "bin" / "python"
    run("uv", "pip", "install", "-q", "--offline", "--no-deps", "--python", python, wheel, env=env)
    return python


def record_rows(zf: zipfile.ZipFile) -> dict[str, tuple[str, str]]:
    (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/RECORD")]
    rows = csv.reader(io.StringIO(zf.read(name).decode()))
    return {r[0]: (r[1], r[2]) for r in rows}


def test_stamped_wheel_passes_strict_tools_and_installs(wheel, tmp_path):
    before = zipfile.ZipFile(wheel).infolist()
    stamp = sample_stamp()
    out = rewrite_wheel(wheel, stamp=stamp)
    assert out == wheel
    assert read_stamp(out) == stamp
    validate_with_tools(out, tmp_path)

    with zipfile.ZipFile(out) as zf:
        after = zf.infolist()
        names = [i.filename for i in after]
        # Same members in the same order, the stamp just before RECORD, RECORD last.
        old = [i.filename for i in before if not i.filename.endswith("RECORD")]
        assert names[: len(old)] == old
        assert names[len(old) :] == ["tiny_gpu_pkg-1.0.dist-info/" + STAMP_NAME, "tiny_gpu_pkg-1.0.dist-info/RECORD"]
        # Compression and file modes are kept.
        for a, b in zip([i for i in before if not i.filename.endswith("RECORD")], after):
            assert (a.filename, a.compress_type, a.external_attr, a.date_time) == (
                b.filename,
                b.compress_type,
                b.external_attr,
                b.date_time,
            )
        assert (zf.getinfo("tiny_gpu_pkg/run.sh").external_attr >> 16) & 0o777 == 0o755
        # RECORD: every file, sha256 urlsafe b64 without padding, sizes; RECORD itself empty.
        rows = record_rows(zf)
        assert set(rows) == {n for n in names if not n.endswith("/")}
        for name, (digest, size) in rows.items():
            if name.endswith("/RECORD"):
                assert (digest, size) == ("", "")
                continue
            data = zf.read(name)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == "sha256=" + want and int(size) == len(data)
            assert "=" not in digest[len("sha256=") :]

    target = pip_install(out, tmp_path / "pip-target")
    assert json.loads((target / "tiny_gpu_pkg-1.0.dist-info" / STAMP_NAME).read_text()) == stamp
    python = uv_install(out, tmp_path)
    code = "import importlib.metadata as m, json; print(m.distribution('tiny-gpu-pkg').read_text('rocm_build.json'))"
    assert json.loads(run(python, "-c", code).stdout) == stamp


def test_local_version_rename_is_consistent(wheel, tmp_path):
    new_version = local_version("1.0", ["gfx942", "gfx90a:xnack-"])
    out = rewrite_wheel(wheel, stamp=sample_stamp(), new_version=new_version)
    assert out.name == f"tiny_gpu_pkg-{new_version}-py3-none-any.whl"
    assert out.parent == wheel.parent and not wheel.exists()
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]  # no temp files left
    with zipfile.ZipFile(out) as zf:
        tops = {n.split("/", 1)[0] for n in zf.namelist()}
        assert tops == {"tiny_gpu_pkg", f"tiny_gpu_pkg-{new_version}.dist-info", f"tiny_gpu_pkg-{new_version}.data"}
        metadata = zf.read(f"tiny_gpu_pkg-{new_version}.dist-info/METADATA").decode()
        assert f"\nVersion: {new_version}\n" in metadata
        assert metadata.count("Version:") == 1 + metadata.count("Metadata-Version:")
    validate_with_tools(out, tmp_path)
    assert read_stamp(out)["requested"]["targets"] == ["gfx90a", "gfx942"]
    target = pip_install(out, tmp_path / "pip-target")
    assert (target / f"tiny_gpu_pkg-{new_version}.dist-info" / STAMP_NAME).is_file()
    python = uv_install(out, tmp_path)  # uv checks the file name against METADATA
    code = "import importlib.metadata as m; print(m.version('tiny-gpu-pkg'))"
    assert run(python, "-c", code).stdout.strip() == new_version
    assert (python.parent.parent / "share" / "tiny-gpu-pkg" / "notes.txt").is_file()  # .data kept


def test_rewrite_twice_replaces_the_stamp(wheel, tmp_path):
    out = rewrite_wheel(wheel, stamp=sample_stamp(requested=["gfx90a"]))
    out = rewrite_wheel(out, stamp=sample_stamp(requested=["gfx942"]), new_version="1.0+gfx942")
    out = rewrite_wheel(out, stamp=None, new_version="1.0+gfx942")  # None keeps the stamp
    with zipfile.ZipFile(out) as zf:
        assert sum(n.endswith("/" + STAMP_NAME) for n in zf.namelist()) == 1
    assert read_stamp(out)["requested"]["targets"] == ["gfx942"]
    validate_with_tools(out, tmp_path)


def test_extra_and_patched_files(wheel, tmp_path):
    def patch(old: bytes) -> bytes:
        return old.replace(b"VALUE = 42", b"VALUE = 43")

    out = rewrite_wheel(
        wheel,
        stamp=None,
        extra_files={"tiny_gpu_pkg/_extra.py": b"EXTRA = 1\n", "tiny_gpu_pkg/kernels.bin": b"new\n"},
        patch_files={"tiny_gpu_pkg/__init__.py": patch},
    )
    with zipfile.ZipFile(out) as zf:
        names = zf.namelist()
        assert zf.read("tiny_gpu_pkg/kernels.bin") == b"new\n"
        assert b"VALUE = 43" in zf.read("tiny_gpu_pkg/__init__.py")
        # A new package file goes before the .data and .dist-info members.
        first_meta = min(i for i, n in enumerate(names) if n.split("/")[0].endswith((".data", ".dist-info")))
        assert names.index("tiny_gpu_pkg/_extra.py") < first_meta
        assert (zf.getinfo("tiny_gpu_pkg/_extra.py").external_attr >> 16) == 0o100644
    assert read_stamp(out) is None
    validate_with_tools(out, tmp_path)
    target = pip_install(out, tmp_path / "t")
    assert (
        run(
            sys.executable,
            "-c",
            "import tiny_gpu_pkg._extra, tiny_gpu_pkg as t; print(t.VALUE)",
            env={**os.environ, "PYTHONPATH": str(target)},
        ).stdout.strip()
        == "43"
    )


@pytest.mark.parametrize(
    "kwargs,words",
    [
        ({"extra_files": {"../evil.py": b""}}, "not a valid path"),
        ({"extra_files": {"/abs.py": b""}}, "not a valid path"),
        ({"extra_files": {"other-1.0.dist-info/x": b""}}, "not in the wheel's"),
        ({"extra_files": {"tiny_gpu_pkg-1.0.dist-info/RECORD": b""}}, "would replace"),
        ({"patch_files": {"tiny_gpu_pkg/missing.py": lambda b: b}}, "not in"),
        ({"patch_files": {"tiny_gpu_pkg/__init__.py": lambda b: "text"}}, "not bytes"),
        ({"new_version": "not-a-version!"}, "not a valid PEP 440"),
    ],
)
def test_bad_arguments_leave_the_wheel_alone(wheel, kwargs, words):
    original = wheel.read_bytes()
    with pytest.raises(WheelError) as exc:
        rewrite_wheel(wheel, stamp=sample_stamp(), **kwargs)
    assert words in exc.value.message
    assert wheel.read_bytes() == original
    assert sorted(p.name for p in wheel.parent.iterdir()) == [wheel.name]


def test_a_failure_mid_write_leaves_the_original_and_no_temp_file(wheel):
    original = wheel.read_bytes()

    def boom(old: bytes) -> bytes:
        raise OSError(28, "No space left on device")

    with pytest.raises(WheelError) as exc:
        rewrite_wheel(
            wheel, stamp=sample_stamp(), new_version="1.0+gfx942", patch_files={"tiny_gpu_pkg/__init__.py": boom}
        )
    assert "No space left" in exc.value.message and "unchanged" in exc.value.hint
    assert wheel.read_bytes() == original
    assert sorted(p.name for p in wheel.parent.iterdir()) == [wheel.name]


KILL_SCRIPT = """\
import sys, time
from pathlib import Path
import rocm_build_backend.wheel.stamp as stamp
import rocm_build_backend.wheel.zipcopy as zipcopy

wheel, marker = Path(sys.argv[1]), Path(sys.argv[2])
real = zipcopy._emit
calls = []

def slow_emit(dst, chunk):
    real(dst, chunk)
    calls.append(1)
    if len(calls) == 3:  # a few members are in the temporary file
        dst.flush()
        marker.write_text("writing")
        time.sleep(60)

zipcopy._emit = slow_emit
stamp.rewrite_wheel(wheel, stamp={"schema_version": 1}, new_version="1.0+gfx942")
"""


def test_sigkill_mid_write_leaves_the_original_intact(wheel, tmp_path):
    original = wheel.read_bytes()
    marker = tmp_path / "marker"
    script = tmp_path / "kill_me.py"
    script.write_text(KILL_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(wheel), str(marker)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the rewrite never reached its write loop"
            time.sleep(0.05)
        temps = [p for p in wheel.parent.iterdir() if p != wheel]
        assert len(temps) == 1 and temps[0].name.startswith(".") and temps[0].suffix == ".tmp"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    # The original is byte-identical and still where it was; the new name does not exist.
    assert wheel.read_bytes() == original
    assert not (wheel.parent / "tiny_gpu_pkg-1.0+gfx942-py3-none-any.whl").exists()
    leftovers = [p for p in wheel.parent.iterdir() if p != wheel]
    assert len(leftovers) == 1  # the killed process could not clean up ...
    out = rewrite_wheel(wheel, stamp=sample_stamp())  # ... the next rewrite does
    assert sorted(p.name for p in wheel.parent.iterdir()) == [out.name]
    assert read_stamp(out) == sample_stamp()


def test_temp_files_of_live_processes_are_kept(wheel):
    live = wheel.parent / f".{wheel.name}.{os.getpid()}.abc123.rocm-build-backend.tmp"
    live.write_bytes(b"partial")
    rewrite_wheel(wheel, stamp=sample_stamp())
    assert live.exists()


def test_prepared_metadata_agrees_with_the_renamed_wheel(wheel, tmp_path):
    project = write_project(tmp_path / "project")
    meta = tmp_path / "meta"
    meta.mkdir()
    code = "import sys, setuptools.build_meta as b; print(b.prepare_metadata_for_build_wheel(sys.argv[1]))"
    name = run(sys.executable, "-c", code, meta, cwd=project).stdout.strip().splitlines()[-1]
    assert name == "tiny_gpu_pkg-1.0.dist-info"
    new_version = local_version("1.0", ["gfx942"])
    new_name = rewrite_metadata_dir(meta, new_version, extra_files={"rocm_build_targets.txt": b"gfx942\n"})
    out = rewrite_wheel(wheel, stamp=sample_stamp(), new_version=new_version)
    with zipfile.ZipFile(out) as zf:
        (dist_info,) = {n.split("/")[0] for n in zf.namelist() if ".dist-info/" in n}
        wheel_metadata = zf.read(f"{dist_info}/METADATA")
    assert new_name == dist_info == "tiny_gpu_pkg-1.0+gfx942.dist-info"
    assert sorted(p.name for p in meta.glob("*.dist-info")) == [new_name]
    prepared = (meta / new_name / "METADATA").read_bytes()
    assert prepared == wheel_metadata  # byte for byte: no frontend sees a mismatch
    assert (meta / new_name / "rocm_build_targets.txt").read_text() == "gfx942\n"
    # The .dist-info folder itself works too, and the same version is a no-op rename.
    assert rewrite_metadata_dir(meta / new_name, new_version) == new_name


def test_unstamped_foreign_wheel_reads_as_none(wheel):
    assert read_stamp(wheel) is None


@pytest.mark.parametrize(
    "payload,words",
    [
        (b"{not json", "is not valid JSON"),
        (b"\xff\xfe", "is not valid JSON"),
        (b"[1, 2]", "not an object"),
        (b'{"schema_version": "1"}', "no integer 'schema_version'"),
        (b'{"schema_version": 2}', "schema version 2"),
        (b'{"schema_version": 1, "generator": {}}', "'requested' is missing"),
    ],
)
def test_corrupt_stamps_give_clear_errors(wheel, payload, words):
    set_member(wheel, "tiny_gpu_pkg-1.0.dist-info/" + STAMP_NAME, payload)
    with pytest.raises(WheelError) as exc:
        read_stamp(wheel)
    assert words in exc.value.message
    assert exc.value.hint
    assert "Traceback" not in str(exc.value)


def test_newer_schema_asks_for_an_upgrade(wheel):
    set_member(wheel, "tiny_gpu_pkg-1.0.dist-info/" + STAMP_NAME, json.dumps({"schema_version": 7}).encode())
    with pytest.raises(WheelError) as exc:
        read_stamp(wheel)
    assert exc.value.hint == "upgrade rocm-build-backend"


def test_oversized_stamp_is_refused_without_reading_it(wheel):
    set_member(wheel, "tiny_gpu_pkg-1.0.dist-info/" + STAMP_NAME, b" " * ((1 << 20) + 1))
    with pytest.raises(WheelError, match="more than"):
        read_stamp(wheel)


def test_wheel_without_record_is_refused(wheel, tmp_path):
    stripped = tmp_path / "strip" / wheel.name
    stripped.parent.mkdir()
    with zipfile.ZipFile(wheel) as zin, zipfile.ZipFile(stripped, "w") as zout:
        for info in zin.infolist():
            if not info.filename.endswith("/RECORD"):
                zout.writestr(info, zin.read(info))
    original = stripped.read_bytes()
    with pytest.raises(WheelError, match="lacks .*RECORD"):
        rewrite_wheel(stripped, stamp=sample_stamp())
    assert stripped.read_bytes() == original


def test_signatures_are_dropped(wheel, tmp_path):
    set_member(wheel, "tiny_gpu_pkg-1.0.dist-info/RECORD.jws", b"{}")
    out = rewrite_wheel(wheel, stamp=sample_stamp())
    with zipfile.ZipFile(out) as zf:
        assert not any(n.endswith("RECORD.jws") for n in zf.namelist())
    validate_with_tools(out, tmp_path)


PAYLOAD = bytes(range(256)) * 4000 + os.urandom(300_000)


def test_unchanged_members_are_copied_compressed(tmp_path):
    wheel = handmade_wheel(tmp_path, PAYLOAD)
    with zipfile.ZipFile(wheel) as zf:
        before = {i.filename: (i.compress_type, i.compress_size, i.CRC) for i in zf.infolist()}
    out = rewrite_wheel(wheel, stamp=sample_stamp(), new_version="1.0+gfx942")
    with zipfile.ZipFile(out) as zf:
        for name in ("hand/_k.so", "hand/stored.bin", "hand/__init__.py"):
            info = zf.getinfo(name)
            assert (info.compress_type, info.compress_size, info.CRC) == before[name]
        assert zf.read("hand/_k.so") == PAYLOAD
        assert zf.testzip() is None
    validate_with_tools(out, tmp_path)


def test_rewriting_is_reproducible(built_wheel, tmp_path):
    outs = []
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        copy = Path(shutil.copy2(built_wheel, tmp_path / folder / built_wheel.name))
        outs.append(
            rewrite_wheel(
                copy, stamp=sample_stamp(), new_version="1.0+gfx942", extra_files={"tiny_gpu_pkg/_new.py": b"X = 1\n"}
            )
        )
    assert outs[0].read_bytes() == outs[1].read_bytes()
