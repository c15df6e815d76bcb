"""Running a detection program with a time limit and a cap on what it prints.

The program runs in a session of its own, so that on a timeout or on too much output the
whole process group (the program and every child it started) is killed, not just the
program; nothing it started outlives the call. Output beyond ``OUTPUT_LIMIT`` bytes is not
read. Vendor-neutral: any vendor's probe may use it. Must not parse: the caller does.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from typing import Any, Mapping, NamedTuple, Sequence

from rocm_build_backend.errors import FormatError

#: What a detection program may print (stdout and stderr together): real rocminfo output for
#: eight GPUs is about 60 KB, so this is generous, and it bounds memory and parsing time.
OUTPUT_LIMIT = 4 * 1024 * 1024
_CHUNK = 64 * 1024


class Ran(NamedTuple):
    """What one program run gave: its output, how it ended, and whether it was stopped."""

    stdout: bytes
    stderr: bytes
    returncode: int | None  # None when it was stopped
    timed_out: bool = False
    too_large: bool = False


def run_capped(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout: float,
    limit: int = OUTPUT_LIMIT,
    cwd: str | os.PathLike[str] | None = None,
) -> Ran:
    """Run ``argv`` (in ``cwd``, default this process's folder) with stdin from /dev/null; stop
    it after ``timeout`` s or ``limit`` bytes.

    Raises OSError when the program cannot start.
    """
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        start_new_session=True,
        cwd=cwd,
    )
    try:
        out, err, timed_out, too_large = _collect(proc, time.monotonic() + timeout, limit)
        if timed_out or too_large:
            kill_group(proc)
        code = _wait(proc, time.monotonic() + timeout)
        if code is None:
            kill_group(proc)
            timed_out = True
    finally:
        reap(proc)
    if timed_out or too_large:
        return Ran(out, err, None, timed_out=timed_out and not too_large, too_large=too_large)
    return Ran(out, err, code)


def run_text(
    argv: Sequence[str], *, timeout: float, limit: int = OUTPUT_LIMIT, env: Mapping[str, str] | None = None
) -> tuple[int, str]:
    """``run_capped`` for callers that want (exit status, stdout then stderr as text) or an error.

    Raises OSError when the program cannot start, TimeoutError past ``timeout`` seconds and
    FormatError when it prints more than ``limit`` bytes; the process group is gone either way.
    """
    ran = run_capped(argv, env=os.environ if env is None else env, timeout=timeout, limit=limit)
    if ran.too_large:
        raise FormatError(f"{argv[0]} printed more than {limit} bytes")
    if ran.timed_out or ran.returncode is None:
        raise TimeoutError(f"{argv[0]} did not answer within {timeout:.0f} s")
    return ran.returncode, (ran.stdout + ran.stderr).decode("utf-8", "replace")


def _collect(proc: Any, deadline: float, limit: int) -> tuple[bytes, bytes, bool, bool]:
    """Read stdout and stderr until both end, the deadline passes or ``limit`` bytes came."""
    bufs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    with selectors.DefaultSelector() as sel:
        for fd in bufs:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(bufs[proc.stdout.fileno()]), bytes(bufs[proc.stderr.fileno()]), True, False
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                bufs[key.fd] += chunk
                if sum(len(b) for b in bufs.values()) > limit:
                    return bytes(bufs[proc.stdout.fileno()]), bytes(bufs[proc.stderr.fileno()]), False, True
    return bytes(bufs[proc.stdout.fileno()]), bytes(bufs[proc.stderr.fileno()]), False, False


def _wait(proc: Any, deadline: float) -> int | None:
    try:
        code: int = proc.wait(timeout=max(deadline - time.monotonic(), 0.001))
        return code
    except subprocess.TimeoutExpired:
        return None


def kill_group(proc: Any) -> None:
    """SIGKILL the program's process group (the program is its leader and not yet reaped,
    so the group id cannot belong to anyone else)."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - no process groups
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


def reap(proc: Any) -> None:
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    if proc.poll() is None:
        kill_group(proc)
        proc.wait()
