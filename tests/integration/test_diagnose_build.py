"""A failed build whose cause we know ends with a line saying what it is and what to do instead:
the ``build`` command on a project whose compiler is killed by signal 9.
"""

from __future__ import annotations

import subprocess
import sys


def test_the_build_command_ends_with_the_cause(tmp_path):
    """A compiler killed by signal 9 ended in "see the lines above"."""
    import os

    proj = tmp_path / "proj"
    (proj / "pkg").mkdir(parents=True)
    (proj / "pkg" / "__init__.py").write_text("")
    (proj / "setup.py").write_text(
        "import subprocess\nfrom setuptools import setup\nfrom setuptools.command.build_py import build_py\n"
        "class B(build_py):\n    def run(self):\n        self.spawn(['sh', '-c', 'kill -9 $$'])\n"
        "setup(name='pkg', version='1.0', packages=['pkg'], cmdclass={'build_py': B})\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_BUILD_BACKEND_")}
    proc = subprocess.run([sys.executable, "-m", "rocm_build_backend", "build", proj, "-o", tmp_path / "out",
                           "--targets", "gfx90a", "-C", "rocm-build-backend.verify=off"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr.splitlines()[-1]
    last = proc.stderr.strip().splitlines()[-2:]
    assert last[0].startswith("error: building proj failed: a compiler was killed (signal 9)"), proc.stderr
    assert last[1].startswith("hint: build with fewer parallel jobs: -C rocm-build-backend.max-jobs=")
    assert "rocm-build-backend: error: the build failed: a compiler was killed" in proc.stderr  # the hook's log
    assert proc.stdout == ""
