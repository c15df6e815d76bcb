"""Proof on a real NVIDIA GPU: detection, the loader's rules, and the CUDA samples.

Run from the repository root on a machine with an NVIDIA GPU, nvcc, and (for the extension
sample) a CUDA build of PyTorch::

    PYTHONPATH=$PWD python3 bench/h200/run_h200.py OUTDIR [--skip-torch]

It writes, under OUTDIR:

- ``fixtures/``: the real outputs of ``nvidia-smi --query-gpu=index,name,compute_cap,uuid
  --format=csv,noheader``, ``nvidia-smi -L``, plain ``nvidia-smi`` and NVML's answers (copy them
  to ``tests/data/nvidia/``);
- ``results.json``: every step with its command, exit status and numbers; ``summary.md``: the
  tables (loader matrix with our prediction next to the real launch, extension builds);
- ``log.txt``: every command's output.

Steps that need a tool the machine lacks are recorded as skipped, never faked. Builds here go
through the plain toolchain with the knobs that ``gpu.nvidia.knobs.cuda_knobs`` computes
(``run_h200_shim.sh`` builds the same samples through the shim).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from h200_summary import summary  # noqa: E402

from rocm_build_backend.gpu.nvidia import loader  # noqa: E402
from rocm_build_backend.gpu.nvidia.knobs import cuda_knobs  # noqa: E402
from rocm_build_backend.gpu.nvidia.targets import parse_torch_arch_list  # noqa: E402

KERNEL = r"""
#include <cuda_runtime.h>
extern "C" __global__ void inc(int *x) { x[threadIdx.x] += 1; }
// 0 and *sum == 32 when the kernel ran; else the CUDA error number.
extern "C" int launch(int *sum) {
  int *d = 0, h[32];
  cudaError_t e = cudaMalloc(&d, sizeof h);
  if (e) return e;
  cudaMemset(d, 0, sizeof h);
  inc<<<1, 32>>>(d);
  e = cudaGetLastError();
  if (!e) e = cudaDeviceSynchronize();
  if (!e) e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  cudaFree(d);
  *sum = 0;
  for (int i = 0; i < 32; ++i) *sum += h[i];
  return e;
}
"""

# label -> nvcc code-target arguments
MATRIX: list[tuple[str, list[str]]] = [
    *[
        (f"SASS {a}", [f"-gencode=arch=compute_{a[3:]},code={a}"])
        for a in ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100f", "sm_120")
    ],
    *[
        (f"PTX {a}", [f"-gencode=arch={a},code={a}"])
        for a in ("compute_75", "compute_80", "compute_90", "compute_90a", "compute_100", "compute_100f")
    ],
    ("SASS sm_80 + PTX compute_80", ["-gencode=arch=compute_80,code=[sm_80,compute_80]"]),
    ("SASS sm_80 + sm_90", ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90"]),
    (
        "SASS sm_80 + sm_100 + PTX compute_100",
        ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_100,code=[sm_100,compute_100]"],
    ),
    (
        "SASS sm_100 + PTX compute_90",
        ["-gencode=arch=compute_100,code=sm_100", "-gencode=arch=compute_90,code=compute_90"],
    ),
    (
        "SASS sm_90a + PTX compute_80",
        ["-gencode=arch=compute_90a,code=sm_90a", "-gencode=arch=compute_80,code=compute_80"],
    ),
    (
        "SASS sm_90, fatbin compressed (-Xfatbin=-compress-all)",
        ["-gencode=arch=compute_90,code=sm_90", "-Xfatbin=-compress-all"],
    ),
    (
        "SASS sm_80 + PTX compute_80, --compress-mode=size",
        ["-gencode=arch=compute_80,code=[sm_80,compute_80]", "--compress-mode=size"],
    ),
    ("nvcc default (no target named)", []),
]
TORCH_SPELLINGS = [
    "8.0;9.0+PTX",
    "9.0a",
    "8.6 9.0",
    "Hopper",
    "Ampere;Hopper",
    "Blackwell",
    "7.5;8.0;8.6;9.0;10.0;12.0",
    "12.0a+PTX",
    "10.0f",
    "9.0 ;8.0",
    "sm_90",
    "9.1",
]
TORCH_OWN = "7.5;8.0;8.6;9.0;10.0;12.0"  # torch 2.11+cu130's own arch list


class Bench:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.fixtures = out / "fixtures"
        self.fixtures.mkdir(parents=True, exist_ok=True)
        self.work = Path(os.environ.get("BENCH_WORK", "/tmp/rbb-h200"))
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.results: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self.log = open(out / "log.txt", "w", encoding="utf-8")

    def sh(
        self, argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 900
    ) -> tuple[int, str, float]:
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
            rc, text = p.returncode, p.stdout + p.stderr
        except (OSError, subprocess.TimeoutExpired) as exc:
            rc, text = 127, str(exc)
        dt = time.monotonic() - t0
        self.log.write(f"\n$ {' '.join(argv)}  (cwd={cwd}, rc={rc}, {dt:.1f} s)\n{text[-20000:]}\n")
        self.log.flush()
        return rc, text, dt

    def step(self, name: str, fn: Any) -> None:
        print(f"== {name}", flush=True)
        try:
            self.results[name] = fn()
        except Exception as exc:  # noqa: BLE001 - a failed step is recorded, the rest runs
            import traceback

            self.results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            self.log.write(traceback.format_exc())
            print(f"   failed: {exc}", flush=True)


def record(b: Bench) -> dict[str, Any]:
    from rocm_build_backend.gpu.nvidia.detect import detect_nvidia
    from rocm_build_backend.gpu.nvidia.nvml import NvmlUnavailable, nvml_gpus

    out: dict[str, Any] = {}
    queries = {
        "nvidia-smi-query.csv": ["nvidia-smi", "--query-gpu=index,name,compute_cap,uuid", "--format=csv,noheader"],
        "nvidia-smi-query-header.csv": ["nvidia-smi", "--query-gpu=index,name,compute_cap,uuid", "--format=csv"],
        "nvidia-smi-query-driver.csv": ["nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv"],
        "nvidia-smi-L.txt": ["nvidia-smi", "-L"],
        "nvidia-smi.txt": ["nvidia-smi"],
        "nvidia-smi-bad-field.txt": ["nvidia-smi", "--query-gpu=no_such_field", "--format=csv"],
    }
    for fname, argv in queries.items():
        rc, text, _ = b.sh(argv)
        (b.fixtures / fname).write_text(text, encoding="utf-8")
        out[fname] = {"argv": argv, "rc": rc}
    try:
        out["nvml"] = [g.to_json() for g in nvml_gpus()]
    except NvmlUnavailable as exc:
        out["nvml"] = {"error": str(exc)}
    (b.fixtures / "nvml.json").write_text(json.dumps(out["nvml"], indent=2) + "\n")
    gpus = out["nvml"] if isinstance(out["nvml"], list) else []
    uuid = gpus[0]["uuid"] if gpus else "GPU-unknown"
    cases = {
        "unset": None,
        "0": "0",
        "uuid": uuid,
        "uuid prefix": uuid[:12],
        "1": "1",
        "empty": "",
        "0,-1,1": "0,-1,1",
        "bogus": "banana",
    }
    detect: dict[str, Any] = {}
    for label, value in cases.items():
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        if value is not None:
            env["CUDA_VISIBLE_DEVICES"] = value
        try:
            detect[label] = {"value": value, "ok": detect_nvidia(env).to_json()}
        except Exception as exc:  # noqa: BLE001 - the error line is the result
            detect[label] = {"value": value, "error": f"{type(exc).__name__}: {exc}"}
    out["detect"] = detect
    rc, text, _ = b.sh(["nvcc", "--version"])
    out["nvcc"] = text.strip().splitlines()[-2:] if rc == 0 else f"rc={rc}"
    for flag in ("--list-gpu-code", "--list-gpu-arch"):
        rc, text, _ = b.sh(["nvcc", flag])
        out[flag] = text.split()
    return out


def tools(b: Bench, device: str) -> dict[str, Any]:
    """The pinned nvidia-smi against the real one, the nvcc check with the real nvcc, and
    detection through the vendor-neutral layer with gpu.nvidia.vendor in the registry."""
    from rocm_build_backend.errors import ToolchainError
    from rocm_build_backend.gpu import vendor as registry
    from rocm_build_backend.gpu.nvidia.pinned import write_nvidia_smi
    from rocm_build_backend.gpu.nvidia.toolchain import check_nvcc

    out: dict[str, Any] = {}
    pinned = b.work / "pinned"
    write_nvidia_smi(pinned, ["sm_80"])
    env = dict(os.environ, PATH=f"{pinned}{os.pathsep}{os.environ.get('PATH', '')}")
    for label, args in (
        ("query", ["--query-gpu=index,name,compute_cap", "--format=csv,noheader"]),
        ("memory (passed on)", ["--query-gpu=name,memory.total", "--format=csv,noheader"]),
        ("-L (passed on)", ["-L"]),
    ):
        rc, text, _ = b.sh([str(pinned / "nvidia-smi"), *args], env=env)
        out[f"pinned sm_80, {label}"] = {"rc": rc, "out": text.strip()}
    env = dict(os.environ, XDG_CACHE_HOME=str(b.work / "xdg"))
    for targets in (["sm_90", "sm_90a", "sm_100f", "sm_120", "compute_90"], ["sm_70", "sm_101"]):
        try:
            out["nvcc " + " ".join(targets)] = check_nvcc(targets, env).to_json()
        except ToolchainError as exc:
            out["nvcc " + " ".join(targets)] = {"refused": exc.message}
    registry._REGISTRY = ("rocm_build_backend.gpu.amd.vendor:AMD", "rocm_build_backend.gpu.nvidia.vendor:NVIDIA")
    registry.vendors.cache_clear()
    registry.claimant.cache_clear()
    from rocm_build_backend.cli import render
    from rocm_build_backend.gpu.detect import detect

    found = detect()
    out["gpu.detect (AMD + NVIDIA vendors)"] = {"json": found.to_json(), "text": render.detection(found)}
    return out


def torch_spellings(b: Bench) -> dict[str, Any]:
    rc, text, _ = b.sh([sys.executable, "-c", _TORCH_PROBE, json.dumps(TORCH_SPELLINGS)])
    if rc != 0:
        return {"skipped": f"torch probe failed (rc={rc}): {text[-300:]}"}
    probe = json.loads(text.strip().splitlines()[-1])
    rows = []
    for spelling, torch_says in probe["flags"].items():
        try:
            ours: Any = sorted(t.gencode() for t in parse_torch_arch_list(spelling))
        except Exception as exc:  # noqa: BLE001
            ours = f"rejected: {exc}"
        same = (isinstance(ours, list) and ours == torch_says) or (
            isinstance(ours, str) and isinstance(torch_says, str)
        )
        rows.append({"spelling": spelling, "torch": torch_says, "ours": ours, "agree": same})
    (b.fixtures / "torch_get_cuda_arch_flags.py.txt").write_text(probe.pop("source"), encoding="utf-8")
    probe["rows"] = rows
    del probe["flags"]
    return probe


_TORCH_PROBE = r"""
import inspect, json, os, sys
import torch
from torch.utils import cpp_extension as ce
lines, start = inspect.getsourcelines(ce._get_cuda_arch_flags)
flags = {}
for s in json.loads(sys.argv[1]):
    os.environ["TORCH_CUDA_ARCH_LIST"] = s
    try:
        flags[s] = sorted(ce._get_cuda_arch_flags())
    except Exception as e:
        flags[s] = "rejected: %s" % e
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                  "arch_list": torch.cuda.get_arch_list(), "file": ce.__file__,
                  "first_line": start, "source": "".join(lines), "flags": flags}))
"""


def _audit_targets(path: Path) -> tuple[list[str], list[str]]:
    from rocm_build_backend.binary.audit import audit_paths

    r = audit_paths([str(path)]).to_json()
    problems = list(r["problems"]) + [p for f in r["files"] for p in f["problems"]]
    return list(r["targets"]), problems


def _wheel_of(so: Path, folder: Path, name: str) -> Path:
    from helpers import make_wheel

    return make_wheel(
        folder, name, "0.1", members={f"{name.replace('-', '_')}/kernel.so": so.read_bytes()}, stamp=False
    )


def matrix(b: Bench, device: str) -> list[dict[str, Any]]:
    src = b.work / "k.cu"
    src.write_text(KERNEL)

    def build(i: int) -> tuple[int, str, float]:
        label, args = MATRIX[i]
        so = b.work / f"m{i:02d}.so"
        return b.sh(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", *args, str(src), "-o", str(so)])

    with ThreadPoolExecutor(8) as pool:
        built = list(pool.map(build, range(len(MATRIX))))
    rows = []
    for i, ((label, args), (rc, text, _)) in enumerate(zip(MATRIX, built)):
        so = b.work / f"m{i:02d}.so"
        row: dict[str, Any] = {"code": label, "nvcc_args": args, "build_rc": rc}
        if rc != 0:
            row["build_error"] = text.strip()[-300:]
            rows.append(row)
            continue
        targets, problems = _audit_targets(so)
        row.update(audit=targets, audit_problems=problems)
        row["predicted"] = "runs" if loader.runs(targets, device) else "error 209"
        wheel = _wheel_of(so, b.work / f"w{i:02d}", f"matrix-{i:02d}")
        crc, ctext, _ = b.sh([sys.executable, "-m", "rocm_build_backend", "check", "--targets", device, str(wheel)])
        row["check_exit"], row["check_says"] = crc, ctext.strip()[-400:]
        lrc, ltext, _ = b.sh([sys.executable, "-c", _LAUNCH, str(so)])
        row["launch"] = ltext.strip().splitlines()[-1] if ltext.strip() else f"rc={lrc}"
        orc, otext, _ = b.sh(["cuobjdump", "--list-elf", "--list-ptx", str(so)])
        row["cuobjdump"] = otext.strip().splitlines()[-8:] if orc == 0 else f"rc={orc}"
        err = row["launch"].split()[0]
        row["real"] = "runs" if row["launch"] == "0 32" else (f"error {err}" if err.isdigit() else row["launch"])
        row["prediction_right"] = row["predicted"] == row["real"]
        rows.append(row)
    return rows


_LAUNCH = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
s = ctypes.c_int(-1)
print(lib.launch(ctypes.byref(s)), s.value)
"""


def _sample_copy(b: Bench, name: str, label: str, backend: str) -> Path:
    dst = b.work / f"{name}-{label}"
    shutil.copytree(ROOT / "sample_projects" / name, dst)
    py = dst / "pyproject.toml"
    text = py.read_text().replace('build-backend = "rocm_build_backend"', f'build-backend = "{backend}"')
    py.write_text(text.replace('"rocm-build-backend", ', ""))
    return dst


def _so_in(wheel: Path) -> tuple[str, int]:
    with zipfile.ZipFile(wheel) as zf:
        sos = [i for i in zf.infolist() if i.filename.endswith(".so")]
        return sos[0].filename, sos[0].file_size


def build_sample(
    b: Bench, name: str, label: str, backend: str, env_extra: dict[str, str], module: str, device: str
) -> dict[str, Any]:
    src = _sample_copy(b, name, label, backend)
    env = dict(os.environ)
    for var in ("CMAKE_ARGS", "TORCH_CUDA_ARCH_LIST", "CUDAARCHS", "NVCC_APPEND_FLAGS"):
        env.pop(var, None)
    env.update(env_extra, MAX_JOBS=str(os.cpu_count() or 8))
    rc, text, dt = b.sh(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(src / "dist"), str(src)],
        env=env,
        cwd=src,
    )
    row: dict[str, Any] = {
        "sample": name,
        "build": label,
        "env": env_extra,
        "build_rc": rc,
        "build_seconds": round(dt, 1),
    }
    if rc != 0:
        row["build_error"] = text.strip()[-600:]
        return row
    wheel = next((src / "dist").glob("*.whl"))
    row["so"], row["so_bytes"] = _so_in(wheel)
    row["audit"], row["audit_problems"] = _audit_targets(wheel)
    row["predicted"] = "runs" if loader.runs(row["audit"], device) else "error 209"
    crc, ctext, _ = b.sh([sys.executable, "-m", "rocm_build_backend", "check", "--targets", device, str(wheel)])
    row["check_exit"], row["check_says"] = crc, ctext.strip()[-400:]
    site = src / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    call = (
        "m.add_one(__import__('torch').arange(1, 5, dtype=__import__('torch').float32, device='cuda')).tolist()"
        if "torch" in name
        else "m.add_one([1.0, 2.0, 3.0, 4.0])"
    )
    code = f"import sys; sys.path.insert(0, {str(site)!r}); import {module} as m; print('result', {call})"
    lrc, ltext, _ = b.sh([sys.executable, "-c", code])
    last = ltext.strip().splitlines()[-1] if ltext.strip() else f"rc={lrc}"
    row["launch_rc"], row["launch"] = lrc, last[-300:]
    row["correct"] = lrc == 0 and last == "result [2.0, 3.0, 4.0, 5.0]"
    row["real"] = (
        "runs" if row["correct"] else ("error 209" if "no kernel image" in ltext or "209" in ltext else last[-120:])
    )
    return row


def samples(b: Bench, device_targets: list[str], skip_torch: bool) -> list[dict[str, Any]]:
    device = device_targets[0]
    rows = []
    auto = cuda_knobs(device_targets, "none")
    sm80 = cuda_knobs(["sm_80"], "none")

    def every_knob(knobs: Any) -> dict[str, str]:
        """All the generic knobs at once, as the shim injects them."""
        return dict(knobs.env, CMAKE_ARGS=f"-DCMAKE_CUDA_ARCHITECTURES={knobs.cmake['CMAKE_CUDA_ARCHITECTURES']}")

    for label, knobs in (("auto", auto), ("sm_80", sm80)):
        rows.append(
            build_sample(
                b,
                "skbuild_cuda",
                label,
                "scikit_build_core.build",
                every_knob(knobs),
                "rocm_sample_skbuild_cuda",
                device,
            )
        )
    if skip_torch:
        return rows
    torch_builds = [
        ("auto", every_knob(auto)),
        ("sm_80", every_knob(sm80)),
        ("torch-2.11-list", {"TORCH_CUDA_ARCH_LIST": TORCH_OWN}),
    ]
    for label, env in torch_builds:
        rows.append(
            build_sample(b, "torch_cuda_ext", label, "setuptools.build_meta", env, "rocm_sample_torch_cuda", device)
        )
    return rows


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path("h200-out")
    bench = Bench(out)

    def save() -> str:
        (out / "results.json").write_text(json.dumps(bench.results, indent=2) + "\n")
        text = summary(bench.results)
        (out / "summary.md").write_text(text)
        return text

    bench.step("record", lambda: record(bench))
    gpus = bench.results.get("record", {}).get("nvml", [])
    device = gpus[0]["target"] if isinstance(gpus, list) and gpus else "sm_90"
    bench.results["device"] = device
    save()
    bench.step("tools", lambda: tools(bench, device))
    bench.step("torch_spellings", lambda: torch_spellings(bench))
    bench.step("matrix", lambda: matrix(bench, device))
    save()
    bench.step("samples", lambda: samples(bench, [device], "--skip-torch" in argv))
    bench.results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(save())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
