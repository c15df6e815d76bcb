"""Running the installer for ``install``: the interpreter checked first, every run's output bounded.

``probe_python`` asks the program given with ``--python`` who it is (``-I -S``, nothing of its
environment runs) through ``gpu.programs.run_capped``: 64 KiB of output and 15 s at most, the
process group killed past either, one error naming it otherwise. ``bounded_run`` is the runner
of the pip and uv steps: the program in a session of its own, stdin from /dev/null, its output
read as it comes and kept only in part (the lines ``install`` reads, ``_KEEP``, and the last
1 MiB of each stream), the whole process group killed once it printed more than
``OUTPUT_LIMIT`` or when this process is stopped (Ctrl-C, SIGTERM). A build may take hours: no
time limit there. It parses nothing else.
"""

from __future__ import annotations

import os
import re
import selectors
import subprocess
from typing import Any, Mapping, Sequence

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.gpu.programs import kill_group, reap, run_capped
from rocm_build_backend.wheel.check.interpreter import interpreter_command

PROBE_TIMEOUT = 15.0
PROBE_LIMIT = 64 << 10
OUTPUT_LIMIT = 256 << 20  # what one pip or uv run may print in all (a verbose torch build: tens of MiB)
TAIL = 1 << 20
# the lines install reads wherever they are in a long output: uv's "Built NAME==VERSION" (uv.py), and the
# error lines it quotes (result.last_error) or names a requirement from (dry.no_wheel, run.rebuild)
_KEEP = re.compile(rb"Built |^\s*(error|ERROR|\xc3\x97|cause:)")
_KEEP_LIMIT = 1 << 20
_CHUNK = 64 << 10


def probe_python(python: str) -> str:
    """``python`` as an absolute path, once it answered like a Python interpreter."""

    exe = interpreter_command(python)
    hint = "give the path of a Python interpreter that has pip"
    try:
        ran = run_capped(
            [exe, "-I", "-S", "-c", "import sys; print('python', *sys.version_info[:2])"],
            env=os.environ,
            timeout=PROBE_TIMEOUT,
            limit=PROBE_LIMIT,
        )
    except OSError as exc:
        raise RocmBuildBackendError(f"cannot run {python}: {exc.strerror or exc}", hint=hint) from None
    if ran.too_large or ran.timed_out:
        why = (
            f"printed more than {PROBE_LIMIT:,} bytes"
            if ran.too_large
            else f"did not answer within {PROBE_TIMEOUT:.0f} s"
        )
        raise RocmBuildBackendError(f"--python {python} {why} when asked its version; it was stopped", hint=hint)
    words = ran.stdout.decode("utf-8", "replace").split()
    if ran.returncode != 0 or len(words) != 3 or words[0] != "python" or words[1] != "3":
        raise RocmBuildBackendError(f"--python {python} did not answer like a Python 3 interpreter", hint=hint)
    return exe


class _Stream:
    """One output stream: the lines worth keeping and the last ``TAIL`` bytes."""

    def __init__(self) -> None:
        self.kept: list[bytes] = []
        self.kept_size, self.tail, self.partial = 0, bytearray(), b""

    def feed(self, chunk: bytes) -> None:
        self.tail += chunk
        if len(self.tail) > TAIL:
            del self.tail[: len(self.tail) - TAIL]
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()[-4096:]
        for line in lines:
            if self.kept_size < _KEEP_LIMIT and _KEEP.search(line):
                self.kept.append(line[:4096])
                self.kept_size += len(line)

    def text(self) -> str:
        tail = bytes(self.tail)
        body = b"\n".join(self.kept) + b"\n" + tail if self.kept else tail
        return body.decode("utf-8", "replace")


def bounded_run(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, **_: Any
) -> "subprocess.CompletedProcess[str]":
    """Run ``argv`` (a ``Runner``: ``capture_output``/``text`` are implied); see the module docstring."""

    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=None if env is None else dict(env),
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    fd_out, fd_err = proc.stdout.fileno(), proc.stderr.fileno()
    streams = {fd_out: _Stream(), fd_err: _Stream()}
    total = 0
    try:
        with selectors.DefaultSelector() as sel:
            for fd in streams:
                sel.register(fd, selectors.EVENT_READ)
            while sel.get_map():
                for key, _ev in sel.select():
                    chunk = os.read(key.fd, _CHUNK)
                    if not chunk:
                        sel.unregister(key.fd)
                        continue
                    total += len(chunk)
                    streams[key.fd].feed(chunk)
                    if total > OUTPUT_LIMIT:
                        kill_group(proc)
                        raise RocmBuildBackendError(
                            f"{argv[0]} printed more than {OUTPUT_LIMIT >> 20} MiB; it was stopped",
                            hint="run the same command yourself to see what it prints",
                        )
        code = proc.wait()
    finally:
        reap(proc)  # stopped here (an error, Ctrl-C, SIGTERM): its whole process group goes too
    out, err = streams[fd_out], streams[fd_err]
    return subprocess.CompletedProcess(list(argv), code, out.text(), err.text())
