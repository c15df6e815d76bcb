"""``install``'s tables of pip's options against the pip that runs here: pip has no
machine-readable list of its options, so ``wheel/install/args.py`` keeps its own, and this test
fails when pip grows or renames an option the tables lack (the version matrix checks the oldest
and newest pip the same way, tests/integration/test_version_matrix.py)."""

from __future__ import annotations

import sys

import pytest

from rocm_build_backend.errors import RocmBuildBackendError
from rocm_build_backend.wheel.install.args import split_args
from helpers import install_table_gaps, pip_options


def test_the_option_tables_know_every_option_of_this_pip():
    assert install_table_gaps(sys.executable) == []


def test_the_help_is_read_as_pip_lays_it_out():
    found = pip_options(sys.executable, "install")
    assert found["-r"] and found["--requirement"] and found["--target"] and found["-C"]
    assert not found["--no-deps"] and not found["-U"] and not found["--upgrade"]


def test_new_value_options_keep_their_values_and_the_install_only_ones_go_to_the_install():
    s = split_args(
        [
            "--build-constraint",
            "bc.txt",
            "--uploaded-prior-to",
            "2025-01-01",
            "--root-user-action",
            "ignore",
            "--group",
            "dev",
            "demo",
        ]
    )
    assert s.requirements == ["demo"]
    assert s.options == ["--build-constraint", "bc.txt", "--uploaded-prior-to", "2025-01-01", "--group", "dev"]
    assert s.install == ["--root-user-action", "ignore"]
    assert s.for_rebuild() == ["--build-constraint", "bc.txt", "--uploaded-prior-to", "2025-01-01"]


@pytest.mark.parametrize("args", [["--report", "r.json", "demo"], ["--report=r.json", "demo"], ["--dry-run", "demo"]])
def test_install_spells_dry_run_and_report_itself(args):
    with pytest.raises(RocmBuildBackendError, match="is not a pip option here"):
        split_args(args)
