"""``rocm-build-backend build`` after a failed or stopped build (``builder/project.py``): what the
build left in the output folder goes (a new wheel, a wheel it replaced, setuptools' ``.tmp-*``
folder, a temporary file), what was there before stays; and the signal forwarding of
``builder/interrupt.py`` to a real child's process group. The whole command under a signal is in
tests/integration/test_pool_results.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from rocm_build_backend.builder.interrupt import end_group, forwarded
from rocm_build_backend.builder.project import _entries, _remove_new


def test_a_failed_build_leaves_nothing_new_in_the_output_folder(tmp_path):
    (tmp_path / "old-1.0-py3-none-any.whl").write_bytes(b"old wheel")
    (tmp_path / "replaced-1.0-py3-none-any.whl").write_bytes(b"the wheel before")
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "mine").mkdir()
    before = _entries(tmp_path)
    (tmp_path / "new-1.0-py3-none-any.whl").write_bytes(b"a wheel the failed build left")
    os.replace(tmp_path / "new-1.0-py3-none-any.whl", tmp_path / "replaced-1.0-py3-none-any.whl")
    (tmp_path / "late-1.0-py3-none-any.whl").write_bytes(b"appeared after the failure")
    (tmp_path / ".tmp-abc").mkdir()
    (tmp_path / ".tmp-abc" / "part.whl").write_bytes(b"half")
    (tmp_path / "mine" / "inside.txt").write_text("the user's folder changed: kept")
    assert _remove_new(tmp_path, before) == [".tmp-abc", "late-1.0-py3-none-any.whl", "replaced-1.0-py3-none-any.whl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "notes.txt", "old-1.0-py3-none-any.whl"]


def test_a_signal_goes_on_to_the_childs_process_group_and_a_second_one_kills_it(tmp_path):
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    received: list[int] = []
    try:
        with forwarded(child.pid, received):
            assert child.stdout is not None and child.stdout.readline() == "ready\n"
            os.kill(os.getpid(), signal.SIGTERM)  # to us: not our end, the child's (which ignores it)
            assert child.poll() is None
            os.kill(os.getpid(), signal.SIGINT)  # a second one: SIGKILL to the group
            assert child.wait(30) == -signal.SIGKILL
        assert received == [signal.SIGTERM, signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        end_group(child.pid)
        child.wait()
        if child.stdout:
            child.stdout.close()
