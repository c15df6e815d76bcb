"""Running AMD's detection programs (rocminfo, rocm_agent_enumerator, amdgpu-arch) under a
time limit, found on PATH, under ``ROCM_PATH``/``HIP_PATH`` or ``<root>/opt/rocm``.

The run itself (process group, output cap) is ``gpu/programs.py``. Must not parse: the
probe's parser turns the output into a ProbeResult.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Mapping

from rocm_build_backend.gpu.amd.output import first_line
from rocm_build_backend.gpu.device import ProbeResult, Runner
from rocm_build_backend.gpu.programs import OUTPUT_LIMIT, Ran, run_capped

#: The probes that run programs, in order: the executable names tried for each.
PROGRAMS = {
    "rocminfo": ("rocminfo",),
    "rocm_agent_enumerator": ("rocm_agent_enumerator",),
    "amd-smi": ("amd-smi",),
    "amdgpu-arch": ("amdgpu-arch", "offload-arch"),
}
#: The arguments each program is run with (none for the others).
_ARGS = {"amd-smi": ("static", "--asic", "--json")}


def _search_path(env: Mapping[str, str], root: Path) -> str:
    dirs = [d for d in env.get("PATH", "").split(os.pathsep) if d]
    rocm = env.get("ROCM_PATH") or env.get("HIP_PATH")
    if rocm:
        dirs += [os.path.join(rocm, "bin"), os.path.join(rocm, "llvm", "bin")]
    dirs += [str(root / "opt" / "rocm" / "bin"), str(root / "opt" / "rocm" / "llvm" / "bin")]
    return os.pathsep.join(dirs)


def _execute(exe: str, args: tuple[str, ...], run: Runner | None, env: Mapping[str, str], timeout: float) -> Ran:
    """Run ``exe``: by the capped runner, or by a ``subprocess.run``-compatible ``run``."""
    if run is None:
        return run_capped([exe, *args], env=env, timeout=timeout)

    try:
        proc = run(
            [exe, *args], capture_output=True, stdin=subprocess.DEVNULL, env=dict(env), timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return Ran(b"", b"", None, timed_out=True)
    out, err = _encode(proc.stdout), _encode(proc.stderr)
    if len(out) + len(err) > OUTPUT_LIMIT:
        return Ran(out[:OUTPUT_LIMIT], b"", None, too_large=True)
    return Ran(out, err, proc.returncode)


def run_probe(
    probe: str,
    parse: Callable[[str], ProbeResult],
    *,
    run: Runner | None,
    env: Mapping[str, str],
    root: Path,
    timeout: float,
) -> ProbeResult:
    """Run ``probe``'s program with what is left of the time limit and parse what it printed;
    the limit covers the parsing too, and output beyond ``OUTPUT_LIMIT`` is not believed."""
    path = _search_path(env, root)
    exe = next((found for name in PROGRAMS[probe] if (found := shutil.which(name, path=path))), None)
    if exe is None:
        return ProbeResult(probe, [], "not installed (not on PATH)", "not_found")
    if timeout <= 0:
        return ProbeResult(probe, [], "not run: the detection time limit was spent", "timeout")
    deadline = time.monotonic() + timeout
    try:
        ran = _execute(exe, _ARGS.get(probe, ()), run, env, timeout)
    except OSError as exc:
        return ProbeResult(probe, [], f"cannot run: {exc.strerror or exc}", "tool_failed")
    if ran.timed_out:
        return ProbeResult(probe, [], f"no answer within {timeout:.3g} s; stopped", "timeout")
    if ran.too_large:
        return ProbeResult(
            probe, [], f"printed more than {OUTPUT_LIMIT // 2**20} MiB; stopped, output ignored", "tool_failed"
        )
    result = _judge(probe, parse, ran)
    if time.monotonic() > deadline:
        return ProbeResult(
            probe, [], "answered, but reading its output went past the detection time limit; ignored", "timeout"
        )
    return result


def _judge(probe: str, parse: Callable[[str], ProbeResult], ran: Ran) -> ProbeResult:
    """The parsed output, with the exit status weighed in."""
    out = _decode(ran.stdout)
    err = _decode(ran.stderr)
    result = parse(out + ("\n" + err if err else ""))
    rc = ran.returncode or 0
    if rc == 0:
        return result
    how = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
    if result.devices:
        return replace(result, warnings=[*result.warnings, f"{probe} ended with {how}; its list may be incomplete"])
    if result.error not in (None, "tool_failed"):
        said = result.summary  # a known failure, already quoted
    else:
        text = out + "\n" + err
        if "Traceback (most recent call last)" in text:  # a crashed Python tool: its last line says why
            lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
            said = repr(lines[-1]) if lines else ""
        else:
            said = repr(first_line(text)) if text.strip() else ""
    return replace(result, summary=f"{how}: {said}" if said else how, error=result.error or "tool_failed")


def _encode(data: object) -> bytes:
    if data is None:
        return b""
    if isinstance(data, bytes):
        return data
    return str(data).encode("utf-8", errors="replace")


def _decode(data: object) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return str(data)
