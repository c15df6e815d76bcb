"""prepare_metadata of a project that declares no GPU code (verify = "off", no local-version) is the
wrapped backend's own: no plan, no plan file, nothing of the build's steps imported (the shim's
own cost on a pure project, bench/bench_shim.py). Any other project gets the plan's."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import ROOT, pure_project

PROBE = """
import json, sys, tempfile
import rocm_build_backend as b
out = tempfile.mkdtemp()
name = b.prepare_metadata_for_build_wheel(out, {"rocm-build-backend.targets": "gfx90a"})
import os
print(json.dumps({"name": name, "flow": "rocm_build_backend.builder.flow" in sys.modules,
                  "files": sorted(os.listdir(out))}))
"""


def metadata(project):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=project,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_no_gpu_code_gets_the_wrapped_backends_metadata(tmp_path):
    got = metadata(pure_project(tmp_path))
    assert got["name"].endswith(".dist-info") and not got["flow"]
    assert "rocm-build-backend-plan.json" not in got["files"]


def test_a_target_label_still_gets_the_plan(tmp_path):
    got = metadata(pure_project(tmp_path, "local-version = true\n"))
    assert got["flow"] and "rocm-build-backend-plan.json" in got["files"]
    assert "+gfx90a" in got["name"]
