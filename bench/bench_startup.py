"""What starting the backend costs: fresh interpreters, side by side. Prints a table; asserts nothing.

    python bench/bench_startup.py [--runs N]

Each row is one fresh ``python`` (this interpreter, with ``site``, as a frontend starts it) that
runs one snippet; rows are alternated run by run and the medians compared. ``modules`` counts
the modules the snippet loaded beyond that interpreter's own start (``sys.modules`` before and
after, in the same process), ``ours`` those of this package. The hook rows run in the
pure-Python sample (``sample_projects/pure_python``, setuptools), as pip's in-process hook
runner does: import the backend, call ``get_requires_for_build_wheel``.

    hooks, lazy        the hooks module as shipped: it loads the module of the hook it runs
                       (once more with a target named in the config settings, which loads
                       the GPU target model and the vendors)
    hooks, eager       the same, after importing ``builder.flow`` (every module the hooks can
                       load: what a hooks module that imported its targets at the top costs)
    wrapped alone      setuptools.build_meta's own hook, without the shim
    cli, lazy/eager    building the command line's parser, as shipped (each verb imports what
                       it runs when it runs) and with every verb's module imported
    targets, lazy/eager  naming targets (the vendors are asked), as shipped (a vendor's probes
                       load when detection runs) and with the probes imported
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PURE = ROOT / "sample_projects" / "pure_python"

_MEASURE = (
    "import sys, json\n"
    "_before = set(sys.modules)\n"
    "{body}\n"
    "_new = sorted(set(sys.modules) - _before)\n"
    "print(json.dumps(_new))\n"
)

ROWS = {
    "python -c pass": "pass",
    "import rocm_build_backend": "import rocm_build_backend",
    "import rocm_build_backend.api": "import rocm_build_backend.api",
    "cli, lazy: parser (--help)": "from rocm_build_backend.cli import parser; parser()",
    "cli, eager: parser + every verb's module": "from rocm_build_backend.cli import parser; parser()\n"
    "import rocm_build_backend.builder.configure, rocm_build_backend.builder.project\n"
    "import rocm_build_backend.binary.audit, rocm_build_backend.gpu.detect\n"
    "import rocm_build_backend.wheel.check.environment, rocm_build_backend.wheel.cache.run\n"
    "import rocm_build_backend.wheel.index.run, rocm_build_backend.wheel.install.run\n"
    "import rocm_build_backend.wheel.thin.run, rocm_build_backend.wheel.thin.split",
    "targets, lazy: parse gfx90a and sm_90": "from rocm_build_backend.gpu.targets import parse_targets; parse_targets('gfx90a sm_90')",
    "targets, eager: the same + the vendors' probes": "from rocm_build_backend.gpu.targets import parse_targets; parse_targets('gfx90a sm_90')\n"
    "import rocm_build_backend.gpu.amd.detection, rocm_build_backend.gpu.nvidia.probe",
    "hooks, lazy: get_requires_for_build_wheel": "import rocm_build_backend as b; b.get_requires_for_build_wheel()",
    "hooks, lazy: the same with targets = gfx90a": "import rocm_build_backend as b\n"
    "b.get_requires_for_build_wheel({'rocm-build-backend.targets': 'gfx90a'})",
    "hooks, eager: get_requires_for_build_wheel": "import rocm_build_backend as b, rocm_build_backend.builder.flow\n"
    "b.get_requires_for_build_wheel()",
    "wrapped alone: get_requires_for_build_wheel": "import setuptools.build_meta as b; b.get_requires_for_build_wheel()",
}


WRAPPED = "wrapped alone: get_requires_for_build_wheel"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_BUILD_BACKEND_")}
    env["PYTHONPATH"] = str(ROOT)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode compiled once, then read
    return env


def run_once(body: str, importtime: bool = False) -> tuple[float, list[str], dict[str, int]]:
    """Wall time, the modules loaded beyond the interpreter's start, and (with ``importtime``)
    each module's own import time in microseconds."""
    code = _MEASURE.format(body=body)
    argv = [sys.executable, *(["-X", "importtime"] if importtime else []), "-c", code]
    start = time.perf_counter()
    out = subprocess.run(argv, cwd=PURE, env=_env(), capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - start
    own: dict[str, int] = {}
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            self_us, _, name = line[len("import time:") :].split("|")
            own[name.strip()] = int(self_us)
    return elapsed, json.loads(out.stdout.strip().splitlines()[-1]), own


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in ROWS}
    imports: dict[str, list[float]] = {name: [] for name in ROWS}
    loaded: dict[str, list[str]] = {}
    for name, body in ROWS.items():  # warm: bytecode written, files cached
        loaded[name] = run_once(body)[1]
    wrapped_set = set(loaded[WRAPPED])
    for _ in range(args.runs):
        for name, body in ROWS.items():
            times[name].append(run_once(body)[0])
            # a hook row: the import time of what it loads beyond the wrapped backend alone
            hook = name.startswith(("hooks", "wrapped"))
            counted = set(loaded[name]) - (wrapped_set if hook else set())
            own = run_once(body, importtime=True)[2]
            imports[name].append(sum(us for m, us in own.items() if m in counted) / 1000)
    base = statistics.median(times["python -c pass"])
    wrapped = statistics.median(times[WRAPPED])
    print(
        f"{sys.version.split()[0]}, median of {args.runs} alternated runs each; "
        "'imports' = -X importtime, own time of the modules loaded (hook rows: those the wrapped backend alone does not load)"
    )
    print(f"{'row':44} {'wall ms':>8} {'- python':>9} {'/ wrapped':>9} {'imports ms':>11} {'modules':>8} {'ours':>5}")
    for name in ROWS:
        med = statistics.median(times[name])
        ratio = f"{med / wrapped:.2f}" if name.startswith(("hooks", "wrapped")) else ""
        ours = sum(m.startswith("rocm_build_backend") for m in loaded[name])
        print(
            f"{name:44} {med * 1000:8.1f} {(med - base) * 1000:9.1f} {ratio:>9} "
            f"{statistics.median(imports[name]):11.1f} {len(loaded[name]):8} {ours:5}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
