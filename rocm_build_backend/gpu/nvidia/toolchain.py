"""Can this nvcc emit code for the targets? Asked of nvcc itself, before the build starts.

``nvcc --version`` gives the CUDA release, ``--list-gpu-code`` the SASS targets and
``--list-gpu-arch`` the PTX targets it can emit (plain ones only; ``a`` and ``f`` variants are
not listed). A target is accepted when its plain form is listed and, for ``a`` and ``f``, the
release is new enough (``a`` from CUDA 12.0, ``f`` from 12.9). A refusal is one line naming
the target and nvcc's release: ``sm_120 needs CUDA 12.8; nvcc (/usr/local/cuda/bin/nvcc) is CUDA
12.4``. The answers are cached per nvcc (real path, size, mtime) under
``$XDG_CACHE_HOME/rocm-build-backend/``; a cache that cannot be written only costs time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from rocm_build_backend.errors import ToolchainError
from rocm_build_backend.gpu.nvidia.smi import CAP
from rocm_build_backend.gpu.nvidia.targets import CudaTarget, parse_cuda_target
from rocm_build_backend.gpu.programs import run_text

_CACHE = "nvcc-v1.json"
_RELEASE = r"release (\d+)\.(\d+), (V[\d.]+)"  # compiled on first use
# First CUDA release that emits each SM (NVIDIA's CUDA toolkit release notes).
FIRST_CUDA: dict[int, tuple[int, int]] = {
    50: (6, 0),
    52: (6, 5),
    53: (7, 0),
    60: (8, 0),
    61: (8, 0),
    62: (8, 0),
    70: (9, 0),
    72: (10, 0),
    75: (10, 0),
    80: (11, 0),
    86: (11, 1),
    87: (11, 4),
    89: (11, 8),
    90: (11, 8),
    100: (12, 8),
    101: (12, 8),
    103: (12, 9),
    110: (13, 0),
    120: (12, 8),
    121: (12, 9),
}
# Last release: CUDA 13.0 dropped Maxwell, Pascal and Volta and renamed sm_101 to sm_110.
DROPPED_IN: dict[int, tuple[int, int]] = {n: (13, 0) for n in (50, 52, 53, 60, 61, 62, 70, 72, 101)}
SUFFIX_FROM = {"a": (12, 0), "f": (12, 9)}
DEFAULT_PATHS = ("/usr/local/cuda/bin/nvcc",)


class Nvcc(NamedTuple):
    path: str
    version: str  # "13.0"
    release: str  # "V13.0.88"
    codes: tuple[str, ...]  # sm_75 sm_80 ...
    archs: tuple[str, ...]  # compute_75 compute_80 ...

    @property
    def version_tuple(self) -> tuple[int, int]:
        major, minor = self.version.split(".")
        return int(major), int(minor)

    def describe(self) -> str:
        return f"nvcc ({self.path}) is CUDA {self.version}"

    def to_json(self) -> dict[str, Any]:
        return {
            "compiler": "nvcc",
            "path": self.path,
            "version": self.version,
            "release": self.release,
            "codes": list(self.codes),
            "archs": list(self.archs),
        }


def find_nvcc(env: Mapping[str, str]) -> str | None:
    """``$NVCC`` (a path), ``$CUDA_HOME/bin/nvcc``, ``$CUDA_PATH/bin/nvcc``, ``nvcc`` on PATH,
    ``/usr/local/cuda/bin/nvcc``: the order PyTorch's ``_find_cuda_home`` and CMake use."""
    candidates = [env.get("NVCC", "")]
    candidates += [os.path.join(env[v], "bin", "nvcc") for v in ("CUDA_HOME", "CUDA_PATH") if env.get(v)]
    found = shutil.which("nvcc", path=env.get("PATH", os.defpath))
    candidates += [found or "", *DEFAULT_PATHS]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def parse_version(text: str) -> tuple[str, str]:
    """``("13.0", "V13.0.88")`` from ``nvcc --version``; ToolchainError when absent."""
    m = re.search(_RELEASE, text)
    if not m:
        first = text.strip().splitlines()[-1][:200] if text.strip() else "no output"
        raise ToolchainError(
            f"nvcc --version printed no CUDA release ({first})", hint="check that nvcc is NVIDIA's CUDA compiler"
        )
    return f"{m.group(1)}.{m.group(2)}", m.group(3)


def _key(path: str) -> str:
    st = os.stat(path)
    return f"{os.path.realpath(path)}|{st.st_size}|{st.st_mtime_ns}"


def _cache_file(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rocm-build-backend" / _CACHE


def _load(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save(file: Path, data: dict[str, Any]) -> None:
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=".nvcc-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, file)
    except OSError:
        pass


def _ask(path: str, run: Callable[[Sequence[str]], tuple[int, str]]) -> Nvcc:
    out = {}
    for flag in ("--version", "--list-gpu-code", "--list-gpu-arch"):
        status, text = run([path, flag])
        if status != 0:
            raise ToolchainError(
                f"{path} {flag} failed (exit status {status}): {text.strip()[:200]}",
                hint="check the CUDA installation, or set CUDA_HOME",
            )
        out[flag] = text
    version, release = parse_version(out["--version"])
    return Nvcc(
        path=path,
        version=version,
        release=release,
        codes=tuple(w for w in out["--list-gpu-code"].split() if w.startswith("sm_")),
        archs=tuple(w for w in out["--list-gpu-arch"].split() if w.startswith("compute_")),
    )


def probe_nvcc(
    path: str, env: Mapping[str, str], run: Callable[[Sequence[str]], tuple[int, str]] | None = None
) -> Nvcc:
    """nvcc's release and lists, from the cache when this very nvcc was asked before."""
    file, key = _cache_file(env), _key(path)
    data = _load(file)
    hit = data.get(key)
    if isinstance(hit, dict):
        try:
            return Nvcc(**{**hit, "codes": tuple(hit["codes"]), "archs": tuple(hit["archs"])})
        except (TypeError, KeyError):
            pass
    runner = run or (lambda argv: run_text(argv, timeout=60, limit=CAP))
    try:
        found = _ask(path, runner)
    except (OSError, TimeoutError) as exc:
        raise ToolchainError(f"{path} cannot be run: {exc}", hint="check the CUDA installation") from None
    data[key] = found._asdict()
    _save(file, data)
    return found


def problem(target: CudaTarget, nvcc: Nvcc) -> str | None:
    """One line when ``nvcc`` cannot emit ``target``; None when it can."""
    have = nvcc.version_tuple
    base = f"{'compute' if target.ptx else 'sm'}_{target.number}"
    listed = base in (nvcc.archs if target.ptx else nvcc.codes)
    first = FIRST_CUDA.get(target.number)
    if target.suffix:
        first = max(first or (0, 0), SUFFIX_FROM[target.suffix])
    if first and have < first:
        return f"{target} needs CUDA {first[0]}.{first[1]}; {nvcc.describe()}"
    dropped = DROPPED_IN.get(target.number)
    if not listed and dropped and have >= dropped:
        return f"{target} is not built by CUDA {dropped[0]}.{dropped[1]} or newer; {nvcc.describe()}"
    if not listed:
        return f"{target} is not among the targets {nvcc.describe()} lists"
    return None


def check_nvcc(
    targets: Sequence[CudaTarget | str],
    env: Mapping[str, str],
    *,
    run: Callable[[Sequence[str]], tuple[int, str]] | None = None,
    nvcc: str | None = None,
) -> Nvcc:
    """The nvcc the build will use, after checking it can emit every target. ToolchainError if not."""
    path = nvcc or find_nvcc(env)
    if path is None:
        raise ToolchainError(
            "no nvcc found (looked at $NVCC, $CUDA_HOME/bin, $CUDA_PATH/bin, PATH, /usr/local/cuda/bin)",
            hint="install the CUDA toolkit, or set CUDA_HOME to it",
        )
    found = probe_nvcc(path, env, run)
    code = [t if isinstance(t, CudaTarget) else parse_cuda_target(t) for t in targets]
    problems = [p for p in (problem(t, found) for t in code) if p]
    if problems:
        raise ToolchainError(
            "; ".join(problems), hint="use a CUDA toolkit that has these targets (set CUDA_HOME), or other targets"
        )
    return found
