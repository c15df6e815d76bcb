"""The user's pip arguments for ``install``, sorted by where they go: ``pip wheel`` options,
options only the final ``pip install`` knows, requirement specifiers.

pip has no machine-readable list of its options, so the tables below are ours: which options
take a value (to tell an option's value from a requirement), which only ``pip install`` knows,
and which ``install`` refuses. ``tests/unit/test_install_args.py`` checks them against
``pip install --help`` and ``pip wheel --help`` of the installed pip, and
``tests/integration/test_version_matrix.py`` against the oldest and newest pip of the version
matrix (pip 23.0 and 26.3 when written): an option pip grows or renames that the tables lack
fails those tests, rather than splitting a user's arguments wrongly.

Pure: it runs nothing and reads no file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from rocm_build_backend.errors import RocmBuildBackendError

#: pip options that take a value (``--opt VALUE`` or ``--opt=VALUE``), for splitting arguments
VALUE_OPTIONS = frozenset(
    {
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "--build-constraint",
        "--requirements-from-script",
        "-e",
        "--editable",
        "--cache-dir",
        "-C",
        "--config-settings",
        "--config-setting",
        "--global-option",
        "--build-option",
        "--install-option",
        "--no-binary",
        "--only-binary",
        "--all-releases",
        "--only-final",
        "--platform",
        "--python-version",
        "--implementation",
        "--abi",
        "--progress-bar",
        "--proxy",
        "--retries",
        "--timeout",
        "--exists-action",
        "--trusted-host",
        "--cert",
        "--client-cert",
        "--log",
        "--keyring-provider",
        "--src",
        "--upgrade-strategy",
        "--target",
        "-t",
        "--prefix",
        "--root",
        "--root-user-action",
        "--python",
        "--group",
        "--use-feature",
        "--use-deprecated",
        "--resume-retries",
        "--refresh-package",
        "--uploaded-prior-to",
        "--report",
        "-w",
        "--wheel-dir",
    }
)
#: options that only ``pip install`` knows: they go to the final install, not to ``pip wheel``
INSTALL_ONLY = frozenset(
    {
        "-t",
        "--target",
        "--prefix",
        "--root",
        "--user",
        "-U",
        "--upgrade",
        "--upgrade-strategy",
        "--force-reinstall",
        "-I",
        "--ignore-installed",
        "--no-warn-script-location",
        "--no-warn-conflicts",
        "--break-system-packages",
        "--no-compile",
        "--compile",
        "--require-virtualenv",
        "--python",
        "--root-user-action",
        "--install-option",
    }
)
#: ``pip install``'s options for another platform's wheels, which ``pip wheel`` lacks: they stay
#: with the collect (``pip wheel`` says it has no such option; with ``--tool uv``, uv takes its own)
OTHER_PLATFORM = frozenset({"--platform", "--python-version", "--implementation", "--abi"})
#: ``pip install`` options ``install`` has its own spelling of (``install --dry-run``, ``--json``)
NOT_HERE = frozenset({"--dry-run", "--report"})
#: options install cannot take: it collects into a folder of its own
REFUSED = {"-w": "--wheel-dir", "--wheel-dir": "--wheel-dir"}
# options the single-project rebuild does not repeat (they name other projects or caches)
_NOT_FOR_REBUILD = {
    "-r",
    "--requirement",
    "--requirements-from-script",
    "--group",
    "-e",
    "--editable",
    "--cache-dir",
    "--no-binary",
    "--only-binary",
    "--no-deps",
}  # the rebuild says --no-deps itself (uv refuses it twice)


@dataclass
class SplitArgs:
    """The user's pip arguments, sorted by where they go."""

    options: list[str] = field(default_factory=list)  # for pip wheel (index, build options)
    install: list[str] = field(default_factory=list)  # for the final pip install only
    requirements: list[str] = field(default_factory=list)  # positional requirement specifiers

    def for_rebuild(self) -> list[str]:
        out, skip = [], False
        for i, arg in enumerate(self.options):
            if skip:
                skip = False
                continue
            name = arg.split("=", 1)[0]
            if name in _NOT_FOR_REBUILD:
                skip = "=" not in arg and name in VALUE_OPTIONS
                continue
            out.append(arg)
        return out


def _normal(args: Sequence[str]) -> list[str]:
    """The arguments as pip reads them: the one leading ``--`` dropped (a second one refused),
    a short option with its value attached (``-rFILE``) split in two, options install cannot
    take refused."""
    args = list(args)
    if args[:1] == ["--"]:
        args = args[1:]
    out = []
    for arg in args:
        if arg == "--":
            raise RocmBuildBackendError("-- is given twice", hint="put -- once, before pip's arguments")
        name = arg.split("=", 1)[0]
        if name in REFUSED or arg[:2] in REFUSED:
            raise RocmBuildBackendError(
                f"pip's {REFUSED.get(name, REFUSED.get(arg[:2]))} is not taken here: "
                "install collects the wheels into a folder of its own",
                hint="leave it out (pip wheel -w DIR keeps wheels in a folder)",
            )
        if len(arg) > 2 and arg[0] == "-" and arg[1] != "-" and arg[:2] in VALUE_OPTIONS:
            out += [arg[:2], arg[2:]]
        else:
            out.append(arg)
    return out


def split_args(args: Sequence[str]) -> SplitArgs:
    """Sort pip arguments: wheel options, install-only options, requirement specifiers."""
    out = SplitArgs()
    args = _normal(args)
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0] if arg.startswith("--") else arg
        if name in NOT_HERE:
            raise RocmBuildBackendError(
                f"{name} is not a pip option here", hint="use rocm-build-backend install --dry-run to see the table"
            )
        takes = name in VALUE_OPTIONS and "=" not in arg
        if takes and i + 1 >= len(args):
            raise RocmBuildBackendError(f"pip option {arg} needs a value", hint="see pip install --help")
        chunk = args[i : i + 2] if takes else [arg]
        if not arg.startswith("-"):
            out.requirements.append(arg)
        elif name in INSTALL_ONLY:
            out.install.extend(chunk)
        else:
            out.options.extend(chunk)
        i += len(chunk)
    return out
