"""A pinned ``nvidia-smi``: answers the compute-capability queries with the chosen targets.

Build scripts pick CUDA targets from the build machine: ``nvidia-smi --query-gpu=compute_cap
--format=csv,noheader`` (CUDA Programming Guide 5.1.1; llama.cpp-style and vLLM-style scripts),
often with ``index`` and ``name``. On a machine without a GPU, or with another GPU than the one
the wheel is for, they build the wrong code. The script written here answers ``--query-gpu``
queries whose fields are all among ``index``, ``name``/``gpu_name``, ``compute_cap``,
``uuid``/``gpu_uuid`` and ``count`` (``--format=csv`` with ``noheader``/``nounits``, ``-i N``)
with one line per chosen compute capability, and hands every other command line, unchanged, to
the real ``nvidia-smi`` found further along ``PATH`` (skipping its own folder). Without a real
one it says so and exits 127, as a shell does for a missing command.

Pure: ``render_nvidia_smi`` returns the text; ``write_nvidia_smi`` writes it atomically.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Sequence

from rocm_build_backend.gpu.nvidia.targets import CudaTarget, parse_cuda_target, sort_cuda

FIELDS = ("index", "name", "gpu_name", "compute_cap", "uuid", "gpu_uuid", "count")


def pinned_gpus(targets: Sequence[CudaTarget | str]) -> list[tuple[int, int]]:
    """The (major, minor) each pinned GPU reports: one per SASS compute capability (PTX-only
    targets stand for their own compute capability when there is no SASS target)."""
    code = sort_cuda(t if isinstance(t, CudaTarget) else parse_cuda_target(t) for t in targets)
    chosen = [t for t in code if not t.ptx] or code
    out: list[tuple[int, int]] = []
    for t in chosen:
        if (t.major, t.minor) not in out:
            out.append((t.major, t.minor))
    return out


def _value_cases(gpus: list[tuple[int, int]]) -> str:
    lines = []
    for i, (major, minor) in enumerate(gpus):
        name = f"NVIDIA GPU {major}.{minor} (pinned by rocm-build-backend)"
        lines += [
            f"    index:{i}) echo {i} ;;",
            f"    name:{i}|gpu_name:{i}) echo '{name}' ;;",
            f"    compute_cap:{i}) echo {major}.{minor} ;;",
            f"    uuid:{i}|gpu_uuid:{i}) echo GPU-00000000-0000-0000-0000-{i:012d} ;;",
        ]
    lines.append(f"    count:*) echo {len(gpus)} ;;")
    return "\n".join(lines)


_SCRIPT = """#!/bin/sh
# nvidia-smi written by rocm-build-backend for one build: --query-gpu=index,name,compute_cap
# answers for the targets chosen for that build (@CHOSEN@); every other
# command line goes to the real nvidia-smi further along PATH.
set -f
self_dir=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)

value() {
  case "$1:$2" in
@VALUES@
  esac
}

answer() {  # 0 after answering; 3 when the real nvidia-smi must answer
  query= fmt= ids=
  [ $# -gt 0 ] || return 3
  while [ $# -gt 0 ]; do
    case "$1" in
      --query-gpu=*) query=${1#*=} ;;
      --format=*) fmt=${1#*=} ;;
      --id=*|-i=*) ids=${1#*=} ;;
      --query-gpu|--format|-i|--id)
        [ $# -ge 2 ] || return 3
        case "$1" in --query-gpu) query=$2 ;; --format) fmt=$2 ;; *) ids=$2 ;; esac
        shift ;;
      *) return 3 ;;
    esac
    shift
  done
  [ -n "$query" ] || return 3
  case ",$fmt," in *,csv,*) ;; *) return 3 ;; esac
  case "$ids" in *[!0-9,]*) return 3 ;; esac
  old_ifs=$IFS
  IFS=,
  for f in $query; do
    case "$f" in @FIELDS@) ;; *) IFS=$old_ifs; return 3 ;; esac
  done
  IFS=$old_ifs
  case ",$fmt," in *,noheader,*) ;; *) echo "$query" | sed 's/,/, /g' ;; esac
  for i in @INDICES@; do
    if [ -n "$ids" ]; then
      case ",$ids," in *,"$i",*) ;; *) continue ;; esac
    fi
    line=
    IFS=,
    for f in $query; do
      line="${line:+$line, }$(value "$f" "$i")"
    done
    IFS=$old_ifs
    echo "$line"
  done
  return 0
}

answer "$@"
status=$?
[ "$status" -eq 3 ] || exit "$status"
old_ifs=$IFS
IFS=:
for d in $PATH; do
  [ -n "$d" ] && [ -x "$d/nvidia-smi" ] || continue
  [ "$(CDPATH= cd -- "$d" 2>/dev/null && pwd)" = "$self_dir" ] && continue
  IFS=$old_ifs
  exec "$d/nvidia-smi" "$@"
done
echo "nvidia-smi: no real nvidia-smi on PATH; this pinned one answers only --query-gpu=index,name,compute_cap,uuid" >&2
exit 127
"""


def render_nvidia_smi(targets: Sequence[CudaTarget | str]) -> str:
    """The script text (POSIX sh)."""
    gpus = pinned_gpus(targets)
    chosen = (
        " ".join(str(t) for t in sort_cuda(t if isinstance(t, CudaTarget) else parse_cuda_target(t) for t in targets))
        or "(none)"
    )
    return (
        _SCRIPT.replace("@CHOSEN@", chosen)
        .replace("@VALUES@", _value_cases(gpus))
        .replace("@INDICES@", " ".join(str(i) for i in range(len(gpus))))
        .replace("@FIELDS@", "|".join(FIELDS))
    )


def write_nvidia_smi(directory: Path, targets: Sequence[CudaTarget | str]) -> Path:
    """Write the executable ``nvidia-smi`` into ``directory`` (created if needed), atomically."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "nvidia-smi"
    tmp = directory / ".nvidia-smi.tmp"
    tmp.write_text(render_nvidia_smi(targets), encoding="utf-8")
    tmp.chmod(tmp.stat().st_mode | stat.S_IRUSR | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.replace(tmp, path)
    return path
