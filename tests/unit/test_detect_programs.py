"""Detection through real programs: fake rocminfo / rocm_agent_enumerator / amdgpu-arch on PATH.

Each fake is a small shell script in tmp_path; ``env`` is always handed in explicitly, so the
host's own PATH (and any real ROCm tools on it) never takes part.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from rocm_build_backend.gpu import detect as D
from rocm_build_backend.errors import NoGpuDetectedError
from rocm_build_backend.gpu.amd.rocminfo import parse_rocminfo
from helpers import ROOT, run_main, TESTS

DATA = TESTS / "data" / "detect"
pytestmark = pytest.mark.skipif(not Path("/bin/sh").exists(), reason="needs a POSIX shell")


def program(bindir: Path, name: str, body: str, *, marker: Path | None = None) -> Path:
    """A shell script ``name`` in ``bindir``; with ``marker``, it first touches that file."""
    bindir.mkdir(parents=True, exist_ok=True)
    path = bindir / name
    touch = f'echo run >> "{marker}"\n' if marker else ""
    # the script's own helpers (cat, sleep) come from the test's PATH, not the one detect passes
    path.write_text(f"#!/bin/sh\nPATH={os.environ.get('PATH', '/usr/bin:/bin')!r}\n{touch}{body}\n")
    path.chmod(0o755)
    return path


def prints(fixture: str) -> str:
    return f'cat "{DATA / fixture}"'


def empty_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "sys").mkdir(parents=True)
    return root


def run_detect(tmp_path: Path, **kw) -> D.Detection:
    kw.setdefault("env", {"PATH": str(tmp_path / "bin")})
    return D.detect(root=empty_root(tmp_path), **kw)


def test_live_rocminfo_eight_gpus(tmp_path):
    program(tmp_path / "bin", "rocminfo", prints("mi300x_8gpu_xeon.rocminfo.txt"))
    got = run_detect(tmp_path)
    assert got.source == "rocminfo"
    assert [str(t) for t in got.targets] == ["gfx942"]
    assert len(got.devices) == 8 and got.seen["kfd"].startswith("no KFD topology")
    assert got.seen["rocminfo"] == "8 GPU agents (gfx942:sramecc+:xnack- x8), 2 CPU agents"


def test_rocminfo_that_hangs_is_stopped(tmp_path):
    marker = tmp_path / "enumerator-ran"
    program(tmp_path / "bin", "rocminfo", "exec sleep 30")
    program(tmp_path / "bin", "rocm_agent_enumerator", "echo gfx942", marker=marker)
    got = run_detect(tmp_path, timeout=0.5)
    assert got.targets == [] and got.source is None
    # it gets what is left of the 0.5 s (the KFD probe ran first)
    stopped = re.fullmatch(r"no answer within (0\.\d+) s; stopped", got.seen["rocminfo"])
    assert stopped and 0 < float(stopped.group(1)) <= 0.5, got.seen["rocminfo"]
    # one time limit for all programs: the next one is not started
    assert got.seen["rocm_agent_enumerator"].startswith("not run")
    assert not marker.exists()
    assert "timeout" in got.causes


def test_rocminfo_that_crashes(tmp_path):
    program(tmp_path / "bin", "rocminfo", 'echo "ROCk module is loaded"\nkill -SEGV $$')
    got = run_detect(tmp_path)
    assert got.targets == []
    assert got.seen["rocminfo"].startswith("killed by signal 11")


def test_rocminfo_exit_0_with_driver_not_loaded(tmp_path):
    program(tmp_path / "bin", "rocminfo", prints("err_rock_not_loaded_secureboot.rocminfo.txt"))
    got = run_detect(tmp_path)
    assert got.targets == [] and got.source is None
    assert got.seen["rocminfo"] == "'ROCk module is NOT loaded, possibly no GPU devices'"
    assert got.seen["rocm_agent_enumerator"] == "not installed (not on PATH)"
    with pytest.raises(NoGpuDetectedError) as info:
        D.require_targets(got)
    assert info.value.message == (
        "no GPU found (KFD: no KFD topology (amdgpu driver not loaded); "
        "rocminfo: 'ROCk module is NOT loaded, possibly no GPU devices'; "
        "rocm_agent_enumerator: not installed (not on PATH); amd-smi: not installed (not on PATH); "
        "amdgpu-arch: not installed (not on PATH))"
    )
    assert "amdgpu kernel driver is not loaded" in info.value.hint
    assert info.value.hint.endswith(
        "ROCM_BUILD_BACKEND_TARGETS=gfx942 or ROCM_BUILD_BACKEND_TARGETS=sm_90 (or TORCH_CUDA_ARCH_LIST=9.0)"
    )


def test_nonzero_exit_with_error_text(tmp_path):
    text = DATA / "err_kfd_permission_denied_render_group.rocminfo.txt"
    program(tmp_path / "bin", "rocminfo", f'cat "{text}" >&2\nexit 1')
    got = run_detect(tmp_path)
    assert got.seen["rocminfo"].startswith("exit status 1: 'Unable to open /dev/kfd read-write: Permission denied'")
    assert got.causes[0] == "kfd_permission_denied"


def test_falls_through_to_the_enumerator(tmp_path):
    program(tmp_path / "bin", "rocminfo", prints("err_rock_not_loaded_wsl2.rocminfo.txt"))
    program(tmp_path / "bin", "rocm_agent_enumerator", 'printf "gfx000\\ngfx1100\\ngfx1036\\n"')
    got = run_detect(tmp_path)
    assert got.source == "rocm_agent_enumerator"
    assert [str(t) for t in got.targets] == ["gfx1100"]


def test_amdgpu_arch_gets_the_override_applied(tmp_path):
    program(tmp_path / "bin", "offload-arch", "echo gfx1032")
    got = run_detect(tmp_path, env={"PATH": str(tmp_path / "bin"), "HSA_OVERRIDE_GFX_VERSION": "10.3.0"})
    assert got.source == "amdgpu-arch"
    (dev,) = got.devices
    assert (str(dev.target), str(dev.physical)) == ("gfx1030", "gfx1032")


def test_amdgpu_arch_failure(tmp_path):
    program(tmp_path / "bin", "amdgpu-arch", prints("err_dlopen_hsa.amdgpu-arch.txt") + "\nexit 1")
    got = run_detect(tmp_path)
    assert got.seen["amdgpu-arch"] == "exit status 1: \"Failed to 'dlopen' libhsa-runtime64.so\""
    assert "tool_failed" in got.causes


def test_programs_found_under_rocm_path(tmp_path):
    program(tmp_path / "rocm" / "bin", "rocminfo", prints("rx6900xt_gfx1030.rocminfo.txt"))
    got = run_detect(tmp_path, env={"PATH": "", "ROCM_PATH": str(tmp_path / "rocm")})
    assert [str(t) for t in got.targets] == ["gfx1030"]


def test_programs_found_under_root_opt_rocm(tmp_path):
    root = empty_root(tmp_path)
    program(root / "opt" / "rocm" / "bin", "rocminfo", prints("rx6900xt_gfx1030.rocminfo.txt"))
    got = D.detect(root=root, env={"PATH": ""})
    assert got.source == "rocminfo"


def test_no_program_when_kfd_answers(tmp_path):
    marker = tmp_path / "ran"
    program(tmp_path / "bin", "rocminfo", prints("rx6900xt_gfx1030.rocminfo.txt"), marker=marker)
    root = empty_root(tmp_path)
    node = root / "sys/class/kfd/kfd/topology/nodes/1"
    node.mkdir(parents=True)
    (node / "properties").write_text((DATA / "radeon_vii_gfx906.kfd-properties.txt").read_text())
    got = D.detect(root=root, env={"PATH": str(tmp_path / "bin")})
    assert got.source == "kfd" and not marker.exists()
    assert set(got.seen) == {"kfd", "nvidia"} and got.seen["nvidia"].startswith("not installed")


def test_no_program_when_output_is_recorded(tmp_path):
    marker = tmp_path / "ran"
    program(tmp_path / "bin", "rocminfo", prints("rx6900xt_gfx1030.rocminfo.txt"), marker=marker)
    got = D.detect(env={"PATH": str(tmp_path / "bin")}, recorded={"amdgpu-arch": "gfx90a\n"})
    assert [str(t) for t in got.targets] == ["gfx90a"] and not marker.exists()


def test_program_gets_env_and_a_timeout(tmp_path):
    program(tmp_path / "bin", "rocminfo", "true")
    calls = []

    def fake_run(argv, **kwargs):
        calls.append((argv, kwargs))
        text = (DATA / "mi250x_1gcd_lumi.rocminfo.txt").read_bytes()
        return subprocess.CompletedProcess(argv, 0, text, b"")

    env = {"PATH": str(tmp_path / "bin"), "HSA_XNACK": "1"}
    got = run_detect(tmp_path, env=env, run=fake_run, timeout=7)
    assert [str(t) for t in got.targets] == ["gfx90a"]
    ((argv, kwargs),) = calls
    assert argv == [str(tmp_path / "bin" / "rocminfo")]
    assert kwargs["env"] == env and 0 < kwargs["timeout"] <= 7 and kwargs["check"] is False


def test_undecodable_output_is_not_a_crash(tmp_path):
    program(tmp_path / "bin", "rocminfo", "printf '\\377\\376\\n  Name: gfx1030\\n'")
    got = run_detect(tmp_path)
    assert [str(t) for t in got.targets] == ["gfx1030"]


def test_program_that_cannot_start(tmp_path):
    path = program(tmp_path / "bin", "rocminfo", "")
    path.write_text("#!/nonexistent/interpreter\n")
    got = run_detect(tmp_path)
    assert got.seen["rocminfo"].startswith("cannot run")


# --------------------------------------------------------------------------- hostile programs


def test_output_beyond_the_cap_is_not_read(tmp_path):
    # 5 MB of one line, then a GPU: the whole output must not be read, parsed or believed
    program(
        tmp_path / "bin",
        "rocminfo",
        "head -c 5000000 /dev/zero | tr '\\000' x\nprintf '\\n  Name: gfx90a\\n  Device Type: GPU\\n'",
    )
    got = run_detect(tmp_path)
    assert got.targets == [] and got.source is None
    assert got.seen["rocminfo"].startswith("printed more than 4 MiB; stopped")
    assert "tool_failed" in got.causes


def test_endless_output_is_stopped_at_the_cap(tmp_path):
    program(tmp_path / "bin", "rocminfo", "yes '  Name: gfx90a'")
    got = run_detect(tmp_path, timeout=60)
    assert got.targets == []
    assert got.seen["rocminfo"].startswith("printed more than 4 MiB; stopped")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has exited: it only waits for its parent to reap it
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def test_a_hung_programs_children_are_killed(tmp_path):
    import time

    pidfile = tmp_path / "child.pid"
    program(tmp_path / "bin", "rocminfo", f'sleep 20 &\necho $! > "{pidfile}"\nwait')
    got = run_detect(tmp_path, timeout=1)
    assert got.seen["rocminfo"].startswith("no answer within ")
    pid = int(pidfile.read_text())
    try:
        for _ in range(50):  # the kill is sent before detect returns; the exit may lag a little
            if not _alive(pid):
                break
            time.sleep(0.1)
        assert not _alive(pid), "the program's child was left running"
    finally:
        if _alive(pid):
            os.kill(pid, 9)


def test_the_time_limit_covers_parsing(tmp_path, monkeypatch):
    import time

    from rocm_build_backend.gpu.amd import detection

    def slow(text):
        time.sleep(1.5)
        return parse_rocminfo(text)

    monkeypatch.setitem(detection.PARSERS, "rocminfo", slow)
    program(tmp_path / "bin", "rocminfo", prints("rx6900xt_gfx1030.rocminfo.txt"))
    got = run_detect(tmp_path, timeout=1)
    assert got.targets == []
    assert got.seen["rocminfo"] == "answered, but reading its output went past the detection time limit; ignored"
    assert "timeout" in got.causes


# --------------------------------------------------------------------------- recorded files


def cli(*args, timeout=60):
    import sys

    repo = ROOT
    env = {**os.environ, "PYTHONPATH": str(repo)}
    return subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", *map(str, args)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "large"])
def test_recorded_output_that_is_no_regular_file_or_too_large(tmp_path, kind):
    path = tmp_path / "rocminfo.txt"
    if kind == "fifo":
        os.mkfifo(path)  # reading it would wait for a writer forever
        want = "not a regular file"
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
        want = "not a regular file"
    else:
        path.write_bytes(b"  Name: gfx90a\n" + b"x" * (5 * 2**20))
        want = "larger than 4194304 bytes"
    proc = cli("detect", "--rocminfo-output", path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == f"error: cannot read --rocminfo-output {path}: {want}"
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- amd-smi


def test_amd_smi_runs_after_the_enumerator_and_before_amdgpu_arch(tmp_path):
    args = tmp_path / "amd-smi-args"
    marker = tmp_path / "amdgpu-arch-ran"
    program(tmp_path / "bin", "rocm_agent_enumerator", "echo gfx000")
    program(tmp_path / "bin", "amd-smi", f'echo "$@" > "{args}"\n' + prints("mi210_gfx90a.amd-smi-static.json"))
    program(tmp_path / "bin", "amdgpu-arch", "echo gfx1030", marker=marker)
    got = run_detect(tmp_path)
    assert got.source == "amd-smi" and [str(t) for t in got.targets] == ["gfx90a"]
    assert args.read_text().split() == ["static", "--asic", "--json"]
    assert list(got.seen) == ["kfd", "rocminfo", "rocm_agent_enumerator", "amd-smi", "nvidia"]
    assert not marker.exists()
    (dev,) = got.devices
    assert dev.name == "AMD Instinct MI210" and dev.reason == "discrete GPU"


def test_amd_smi_gets_the_global_override_applied(tmp_path):
    program(tmp_path / "bin", "amd-smi", prints("w7500_gfx1102.amd-smi-static-asic.txt"))
    got = run_detect(tmp_path, env={"PATH": str(tmp_path / "bin"), "HSA_OVERRIDE_GFX_VERSION": "11.0.0"})
    (dev,) = got.devices
    assert (str(dev.target), str(dev.physical)) == ("gfx1100", "gfx1102")


@pytest.mark.parametrize(
    "fixture, want",
    [
        ("mi350x_gfx950.amd-smi-static.txt", ["gfx950"]),
        ("mi210_gfx90a.amd-smi-static.json", ["gfx90a"]),
    ],
)
def test_detect_cli_reads_recorded_amd_smi_output(fixture, want):
    import json

    proc = cli("detect", "--json", "--amd-smi-output", DATA / fixture)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["targets"] == want and out["source"] == "amd-smi"


def test_detect_cli_with_amd_smi_list_says_what_is_missing():
    proc = cli("detect", "--amd-smi-output", DATA / "mi210_plus_nic.amd-smi-list.txt")
    assert proc.returncode == 3
    assert "amd-smi: lists 1 GPU but not their targets" in proc.stdout
    assert "amd-smi static --asic" in proc.stderr


# --------------------------------------------------------------------------- the --json contract


OPTION = {
    "rocminfo": "--rocminfo-output",
    "rocm_agent_enumerator": "--enumerator-output",
    "aomp offload-arch -v": "--amdgpu-arch-output",
    "amdgpu-arch": "--amdgpu-arch-output",
    "amd-smi static": "--amd-smi-output",
    "amd-smi static --json": "--amd-smi-output",
    "amd-smi list": "--amd-smi-output",
    "rocm-smi --showproductname --json": "--rocm-smi-output",
    "rocm-smi --showproductname --csv": "--rocm-smi-output",
}


def _schema(name):
    import json

    from rocm_build_backend.data import path

    schema = json.loads(path(f"schemas/{name}.schema.json").read_text())
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _key():
    import json

    return json.loads((DATA / "detect-expected.json").read_text())["fixtures"]


@pytest.mark.parametrize("name", sorted(n for n, k in _key().items() if k["tool"] in OPTION))
def test_detect_json_of_every_recorded_fixture_meets_the_schema(name, capsys):
    import json

    validator = _schema("detect")
    want = _key()[name]
    for extra in ([], ["--features"]) if want["tool"] == "rocminfo" else ([],):
        code, out, _err = run_main(capsys, "detect", "--json", *extra, OPTION[want["tool"]], DATA / name)
        data = json.loads(out)
        assert list(data)[0] == "schema_version"
        validator.validate(data)
        assert code == (0 if want["build_targets"] else 3)
        if not extra:
            assert sorted(data["targets"]) == sorted(want["build_targets"])


def test_detect_json_of_a_kfd_tree_and_of_an_empty_root_meet_the_schema(tmp_path):
    import json

    validator = _schema("detect")
    nodes = tmp_path / "root" / "sys/class/kfd/kfd/topology/nodes"
    for node, fixture in enumerate(["cpu_node0", "mi300x_gfx942", "radeon_pro_w7500_gfx1102"]):
        (nodes / str(node)).mkdir(parents=True)
        (nodes / str(node) / "properties").write_text((DATA / f"{fixture}.kfd-properties.txt").read_text())
    proc = cli("detect", "--json", "--root", tmp_path / "root")
    data = json.loads(proc.stdout)
    validator.validate(data)
    assert data["source"] == "kfd" and data["targets"] == ["gfx942", "gfx1102"] and proc.returncode == 0
    proc = cli("detect", "--json", "--root", empty_root(tmp_path / "empty"))
    data = json.loads(proc.stdout)
    validator.validate(data)
    assert data["targets"] == [] and data["causes"] == ["no_topology"] and proc.returncode == 3
