"""The user's pip arguments for ``install``, sorted by where they go: ``pip wheel`` options,
options only the final ``pip install`` knows, requirement specifiers.

Pure: it runs nothing and reads no file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from rocm_build_backend.errors import RocmBuildBackendError

# pip options that take a value (``--opt VALUE`` or ``--opt=VALUE``), for splitting arguments
_VALUE_OPTS = {
    "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-r", "--requirement",
    "-c", "--constraint", "-e", "--editable", "--cache-dir", "-C", "--config-settings",
    "--config-setting", "--global-option", "--build-option", "--no-binary", "--only-binary",
    "--platform", "--python-version", "--implementation", "--abi", "--progress-bar", "--proxy",
    "--retries", "--timeout", "--exists-action", "--trusted-host", "--cert", "--client-cert",
    "--log", "--keyring-provider", "--src", "--upgrade-strategy", "--target", "-t", "--prefix",
    "--root", "--python", "--group", "--use-feature", "--use-deprecated", "--resume-retries",
}
# options that only ``pip install`` knows: they go to the final install, not to ``pip wheel``
_INSTALL_ONLY = {
    "-t", "--target", "--prefix", "--root", "--user", "-U", "--upgrade", "--upgrade-strategy",
    "--force-reinstall", "-I", "--ignore-installed", "--no-warn-script-location",
    "--no-warn-conflicts", "--break-system-packages", "--no-compile", "--compile",
    "--require-virtualenv", "--python",
}
# options install cannot take: it collects into a folder of its own
_REFUSED = {"-w": "--wheel-dir", "--wheel-dir": "--wheel-dir"}
# options the single-project rebuild does not repeat (they name other projects or caches)
_NOT_FOR_REBUILD = {"-r", "--requirement", "-e", "--editable", "--cache-dir", "--no-binary", "--only-binary",
                    "--no-deps"}  # the rebuild says --no-deps itself (uv refuses it twice)


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
                skip = "=" not in arg and name in _VALUE_OPTS
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
        if name in _REFUSED or arg[:2] in _REFUSED:
            raise RocmBuildBackendError(f"pip's {_REFUSED.get(name, _REFUSED.get(arg[:2]))} is not taken here: "
                                        "install collects the wheels into a folder of its own",
                                        hint="leave it out (pip wheel -w DIR keeps wheels in a folder)")
        if len(arg) > 2 and arg[0] == "-" and arg[1] != "-" and arg[:2] in _VALUE_OPTS:
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
        takes = name in _VALUE_OPTS and "=" not in arg
        if takes and i + 1 >= len(args):
            raise RocmBuildBackendError(f"pip option {arg} needs a value", hint="see pip install --help")
        chunk = args[i:i + 2] if takes else [arg]
        if not arg.startswith("-"):
            out.requirements.append(arg)
        elif name in _INSTALL_ONLY:
            out.install.extend(chunk)
        else:
            out.options.extend(chunk)
        i += len(chunk)
    if name_conflict := [a for a in out.options if a in ("--dry-run", "--report")]:
        raise RocmBuildBackendError(f"{name_conflict[0]} is not a pip option here",
                                    hint="use rocm-build-backend install --dry-run to see the table")
    return out
