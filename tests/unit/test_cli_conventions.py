"""The command line's conventions: help on every argument, -v and -q, NO_COLOR and FORCE_COLOR,
"did you mean" for a mistyped command, a product name or compute capability answered with the
target to type, and errors that name the option the user typed."""

from __future__ import annotations

import argparse
import io
import sys
from collections import deque

import pytest

from helpers import copy_sample, install_dist, make_wheel, run_main
from rocm_build_backend import progress
from rocm_build_backend.builder.project import _tee_runner
from rocm_build_backend.cli import Progress, color, painted, parser
from rocm_build_backend.wheel.check.environment import check_environment
from rocm_build_backend.wheel.index.run import build_index
from rocm_build_backend.errors import UnknownTargetError
from rocm_build_backend.gpu.products import names, product_targets
from rocm_build_backend.gpu.targets import meant, parse_targets


def _arguments(p: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _arguments(sub, (*path, name))
        else:
            yield path, action


def test_every_argument_has_help():
    found = list(_arguments(parser()))
    assert len(found) > 90
    missing = [(" ".join(path), action.option_strings or action.dest) for path, action in found if not action.help]
    assert missing == []


@pytest.mark.parametrize("typed, near", [("buidl", "build"), ("chekc", "check"), ("indx", "index"), ("plna", "plan")])
def test_a_mistyped_command_gets_the_near_one(capsys, typed, near):
    code, out, err = run_main(capsys, typed, ".")
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"error: unknown command '{typed}'",
        f"hint: did you mean '{near}'? rocm-build-backend --help says what each does",
    ]


def test_an_unknown_word_lists_the_commands(capsys):
    code, _, err = run_main(capsys, "-q", "frobnicate")
    assert code == 2 and "hint: the commands: targets, detect, plan, build" in err


@pytest.mark.parametrize(
    "typed, target",
    [
        ("9.0", "sm_90"),
        ("H100", "sm_90"),
        ("MI300X", "gfx942"),
        ("Radeon RX 7900 XTX", "gfx1100"),
        ("12.0", "sm_120"),
        ("sm90", "sm_90"),
        ("AMD Instinct MI250X", "gfx90a"),
        ("RTX 4090", "sm_89"),
    ],
)
def test_a_product_or_capability_is_answered_with_the_target(tmp_path, capsys, typed, target):
    """Suggested, never accepted: the user types the target."""
    with pytest.raises(UnknownTargetError):
        parse_targets(typed)
    project = copy_sample("setuptools_hip", tmp_path)
    code, out, err = run_main(capsys, "plan", project, "--targets", typed)
    error, hint = err.splitlines()
    assert code == 2 and out == ""
    assert error.startswith(f"error: unknown GPU target '{typed.lower()}' in --targets")
    assert hint.startswith(f"hint: '{typed}' is not a target name but {target} is: give that"), hint
    assert "rocm-build-backend plan" not in hint


def test_a_plain_typo_keeps_its_near_names(capsys, tmp_path):
    code, _, err = run_main(capsys, "plan", tmp_path, "--targets", "gfx924")
    assert code == 2
    assert err.splitlines() == [
        "error: unknown GPU target 'gfx924' in --targets (did you mean 'gfx942' or 'gfx904' or 'gfx704'?)",
        "hint: see the known targets: rocm-build-backend targets",
    ]


def test_product_names_of_the_table():
    assert names("RX 7900 XTX/XT/GRE, Radeon PRO W7900/W7800") == [
        "RX 7900 XTX",
        "RX 7900 XT",
        "RX 7900 GRE",
        "Radeon PRO W7900",
        "Radeon PRO W7800",
    ]
    assert names("RX 6800/6800 XT/6900 XT") == ["RX 6800", "RX 6800 XT", "RX 6900 XT"]
    assert product_targets("7900 XTX") == ["gfx1100"] and product_targets("TBA") == []
    assert meant("gfx942") == [] and meant("9.0a") == ["sm_90a"] and meant("99.0") == []


def test_a_bad_setting_in_plan_is_not_told_to_run_plan(capsys, tmp_path):
    project = copy_sample("setuptools_hip", tmp_path)
    code, _, err = run_main(capsys, "plan", project, "-C", "rocm-build-backend.targts=gfx942")
    assert code == 2
    assert err.splitlines() == [
        "error: unknown setting -C rocm-build-backend.targts (did you mean 'targets'?)",
        "hint: the settings are listed in docs/reference/settings.md",
    ]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    "env, tty, on",
    [
        ({}, True, True),
        ({}, False, False),
        ({"NO_COLOR": "1"}, True, False),
        ({"FORCE_COLOR": "1"}, False, True),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, False, False),
        ({"NO_COLOR": ""}, True, True),
        ({"TERM": "dumb"}, True, False),
        ({"TERM": "dumb", "FORCE_COLOR": "1"}, False, True),
    ],
)
def test_colour_follows_no_color_and_force_color(env, tty, on):
    assert color(_Tty() if tty else io.StringIO(), env) is on


def test_the_error_words_are_coloured_when_forced(capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    _, _, err = run_main(capsys, "plan", ".", "--targets", "h100")
    assert err.startswith("\033[1;31merror:\033[0m unknown GPU target") and "\033[1;36mhint:\033[0m" in err
    monkeypatch.setenv("NO_COLOR", "1")
    _, _, err = run_main(capsys, "plan", ".", "--targets", "h100")
    assert "\033" not in err
    assert painted("note: x", True) == "note: x"


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_adds_the_traceback(capsys, where):
    argv = ["plan", ".", "--targets", "h100"]
    code, _, err = run_main(capsys, *(["-v", *argv] if where == "before" else [*argv, "-v"]))
    assert code == 2 and err.startswith("error: unknown GPU target 'h100'") and "Traceback" in err
    code, _, err = run_main(capsys, *argv)
    assert code == 2 and "Traceback" not in err


@pytest.mark.parametrize("fails", [False, True])
def test_quiet_shows_a_builds_output_only_when_it_fails(capfd, fails):
    script = "print('compiling'); import sys; sys.exit(%d)" % fails
    tail: deque[str] = deque(maxlen=10)
    runner = _tee_runner(tail, [], echo=False)
    if fails:
        with pytest.raises(Exception):
            runner([sys.executable, "-c", script])
    else:
        runner([sys.executable, "-c", script])
    assert ("compiling" in capfd.readouterr().err) is fails
    runner = _tee_runner(deque(maxlen=10), [])
    runner([sys.executable, "-c", "print('compiling')"])
    assert "compiling" in capfd.readouterr().err


def test_the_progress_line_is_rewritten_in_place_and_wiped_when_done():
    now = [0.0]
    tty = _Tty()
    line = Progress(tty, clock=lambda: now[0])
    line("reading wheels", 1, 3)
    now[0] = 0.05
    line("reading wheels", 2, 3)  # within a tenth of a second: not drawn again
    now[0] = 0.5
    line("reading wheels", 2, 3)
    line("reading wheels", 3, 3)  # done: wiped before the command's own output
    assert tty.getvalue() == ("\r\033[Kreading wheels: 1/3 \r\033[Kreading wheels: 2/3 \r\033[K")
    line.close()
    assert tty.getvalue().endswith("\r\033[K") and tty.getvalue().count("\r\033[K") == 3


@pytest.fixture
def steps():
    seen: list[tuple[str, int, int]] = []
    progress.set_reporter(lambda what, done, total: seen.append((what, done, total)))
    yield seen
    progress.set_reporter(None)


def test_index_and_check_env_report_their_progress(tmp_path, steps):
    for i in range(9):
        make_wheel(tmp_path / "wheels", f"demo{i}", "1.0", device={f"demo{i}/_k.so": ["gfx942"]})
    assert build_index(tmp_path / "wheels", tmp_path / "out").exit_code == 0
    reads = [s for s in steps if s[0] == "reading wheels"]
    assert sorted(done for _, done, _ in reads) == list(range(1, 10)) and {t for *_, t in reads} == {9}
    steps.clear()
    for name in ("one", "two"):
        install_dist(tmp_path / "site", name, {f"{name}/__init__.py": b""})
    check_environment("python", ["gfx942"], locations=[tmp_path / "site"])
    assert steps == [
        ("checking distributions", 1, 0),
        ("checking distributions", 2, 0),
        ("checking distributions", 2, 2),
    ]


@pytest.mark.parametrize("tty, quiet, shown", [(True, False, True), (False, False, False), (True, True, False)])
def test_progress_is_shown_only_on_a_terminal_without_quiet(capsys, monkeypatch, tty, quiet, shown):
    reporters = []
    monkeypatch.setattr(progress, "set_reporter", reporters.append)
    if tty:
        monkeypatch.setattr(sys, "stderr", _Tty())
    run_main(capsys, *(["-q"] if quiet else []), "targets")
    assert isinstance(reporters[0], Progress) is shown and reporters[-1] is None
