"""Run one build command with a time limit and add its wall time and CPU time to a state file.

    python3 bench/h200/timed.py --state STATE.json --limit SECONDS -- COMMAND...

The command runs in a session of its own; at the limit its whole process group gets SIGTERM (the
shim stamps the build tree it leaves, so the next call resumes it), then SIGKILL 30 s later. The
state file sums every call for the same build: ``wall`` and ``cpu`` (user + system of the
command and all its children) in seconds, ``calls``, and ``done`` once the command finished with
status 0. Exit status: the command's, or 124 when it was cut off at the limit.
Standard library only; no network.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", required=True)
    parser.add_argument("--limit", type=float, default=560)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    state_path = Path(args.state)
    state = json.loads(state_path.read_text()) if state_path.is_file() else {"wall": 0.0, "cpu": 0.0, "calls": 0}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.Popen(command, start_new_session=True)
    cut = False
    try:
        rc = proc.wait(timeout=args.limit)
    except subprocess.TimeoutExpired:
        cut = True
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        rc = 124
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    state["wall"] += wall
    state["cpu"] += cpu
    state["calls"] += 1
    state["cores"] = len(os.sched_getaffinity(0))
    state["done"] = rc == 0
    state["rc"] = rc
    state_path.write_text(json.dumps(state, indent=1) + "\n")
    print(
        f"timed: {'cut off at the limit' if cut else f'exit {rc}'} after {wall:.1f} s this call; "
        f"in all {state['wall']:.1f} s wall, {state['cpu']:.1f} s CPU over {state['calls']} call(s)",
        file=sys.stderr,
    )
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
