"""Running AMD's detection programs (rocminfo, rocm_agent_enumerator, amdgpu-arch) under a
time limit, found on PATH, under ``ROCM_PATH``/``HIP_PATH`` or ``<root>/opt/rocm``.

``subprocess`` is imported only when a program really runs. Must not parse: the probe's parser
turns the output into a ProbeResult.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping

from rocm_build_backend.gpu.amd.output import first_line
from rocm_build_backend.gpu.device import ProbeResult, Runner


PROGRAMS = {
    "rocminfo": ("rocminfo",),
    "rocm_agent_enumerator": ("rocm_agent_enumerator",),
    "amdgpu-arch": ("amdgpu-arch", "offload-arch"),
}


def _search_path(env: Mapping[str, str], root: Path) -> str:
    dirs = [d for d in env.get("PATH", "").split(os.pathsep) if d]
    rocm = env.get("ROCM_PATH") or env.get("HIP_PATH")
    if rocm:
        dirs += [os.path.join(rocm, "bin"), os.path.join(rocm, "llvm", "bin")]
    dirs += [str(root / "opt" / "rocm" / "bin"), str(root / "opt" / "rocm" / "llvm" / "bin")]
    return os.pathsep.join(dirs)


def run_probe(probe: str, parse: Callable[[str], ProbeResult], *, run: Runner | None, env: Mapping[str, str],
              root: Path, timeout: float) -> ProbeResult:
    """Run ``probe``'s program with what is left of the time limit and parse what it printed."""
    import shutil
    import subprocess

    path = _search_path(env, root)
    exe = next((found for name in PROGRAMS[probe] if (found := shutil.which(name, path=path))), None)
    if exe is None:
        return ProbeResult(probe, [], "not installed (not on PATH)", "not_found")
    if timeout <= 0:
        return ProbeResult(probe, [], "not run: the detection time limit was spent", "timeout")
    runner = subprocess.run if run is None else run
    try:
        proc = runner([exe], capture_output=True, stdin=subprocess.DEVNULL, env=dict(env),
                      timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return ProbeResult(probe, [], f"no answer within {timeout:.3g} s; stopped", "timeout")
    except OSError as exc:
        return ProbeResult(probe, [], f"cannot run: {exc.strerror or exc}", "tool_failed")
    out = _decode(proc.stdout)
    err = _decode(proc.stderr)
    result = parse(out + ("\n" + err if err else ""))
    rc = proc.returncode
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


def _decode(data: object) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return str(data)
