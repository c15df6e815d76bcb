"""pip installs a wheel ``split`` wrote and checks its RECORD; the data files and the stamp come
along, the other targets' code objects do not.
"""

from __future__ import annotations

from helpers import fat_wheel, run_main, TESTS, zip_members

DATA = TESTS / "data" / "binaries"


def test_pip_installs_a_split_wheel_and_checks_its_record(tmp_path, capsys):
    import subprocess
    import sys

    src = fat_wheel(tmp_path / "in", members={"pkg-1.0.data/data/share/pkg/notes.txt": b"data file\n"})
    assert run_main(capsys, "split", src, "--outdir", tmp_path / "out")[0] == 0
    wheel = tmp_path / "out" / "pkg-1.0+gfx942-py3-none-any.whl"
    assert "pkg-1.0+gfx942.data/data/share/pkg/notes.txt" in zip_members(wheel)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--no-compile",
            "--target",
            str(tmp_path / "site"),
            str(wheel),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    site = tmp_path / "site"
    assert (site / "pkg-1.0+gfx942.dist-info" / "rocm_build.json").is_file()
    assert not (site / "pkg" / "kernels" / "gfx90a.co").exists()
    assert (site / "pkg" / "kernels" / "gfx942.hsaco").read_bytes() == (DATA / "amdgpu_gfx942_cov5.hsaco").read_bytes()
