"""``install --dry-run`` builds nothing: which requirements would have to be built from source.

A dry run collects wheels only (``--only-binary :all:``); a requirement that is a folder, an
sdist, a URL of either, or an editable one (given on the command line or in a requirements file,
read as a small regular file, nested ``-r`` files followed a few levels) would be built by pip
whatever that option says, so a dry run that meets one stops and says so (exit 3: it cannot tell
what that build would hold). Pure but for reading requirement files; it runs nothing.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from rocm_build_backend.errors import CANNOT_TELL, RocmBuildBackendError
from rocm_build_backend.files import read_regular
from rocm_build_backend.wheel.install.args import SplitArgs

ONLY_BINARY = ["--only-binary", ":all:"]
DRY_REBUILD = "an install would build it again from its sdist (a dry run builds nothing)"
_MAX_FILE = 1 << 20
_MAX_DEPTH = 8
_FILE_OPTS = ("-r", "--requirement")
_EDITABLE = ("-e", "--editable")


class DryRunCannotTell(RocmBuildBackendError):
    """A dry run would have to build something to tell."""

    exit_code = CANNOT_TELL


def would_build(requirement: str) -> bool:
    """Whether pip builds ``requirement`` even with ``--only-binary :all:`` (a path or a URL
    that is not a wheel; a plain name with a version specifier is not)."""

    text = requirement.strip()
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return not text.split("#", 1)[0].rstrip().endswith(".whl")
    if req.url is not None:
        return not req.url.split("#", 1)[0].endswith(".whl")
    return os.sep in text or text.startswith(".")


def _option_values(args: list[str], names: tuple[str, ...]) -> list[str]:
    """The values of ``names`` in ``args`` (``-r FILE``, ``--requirement=FILE``)."""
    out = []
    for i, arg in enumerate(args):
        if arg in names and i + 1 < len(args):
            out.append(args[i + 1])
        elif arg.startswith(tuple(n + "=" for n in names if n.startswith("--"))):
            out.append(arg.split("=", 1)[1])
    return out


def _from_file(path: Path, depth: int) -> list[str]:
    """What a requirements file (and the files it names) would build."""

    if depth > _MAX_DEPTH:
        raise DryRunCannotTell(
            f"{path}: requirement files nest more than {_MAX_DEPTH} levels",
            hint="a dry run reads requirement files to see what pip would build",
        )
    try:
        text = read_regular(path, _MAX_FILE).decode("utf-8", "replace")
    except OSError as exc:
        raise RocmBuildBackendError(
            f"cannot read the requirements file {path}: {exc.strerror or exc}",
            hint="give a requirements file (a small text file)",
        ) from None
    out: list[str] = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        if words[0].startswith(_EDITABLE):
            out.append(line)
        elif words[0].startswith(_FILE_OPTS):
            for name in _option_values(words, _FILE_OPTS) or [words[0][2:]]:
                out += _from_file(path.parent / name, depth + 1)
        elif not words[0].startswith("-") and would_build(line):
            out.append(line)
    return out


def source_requirements(split: SplitArgs) -> list[str]:
    """The requirements a dry run cannot collect without building them."""
    out = [r for r in split.requirements if would_build(r)]
    out += [f"-e {v}" for v in _option_values(split.options, _EDITABLE)]
    for name in _option_values(split.options, _FILE_OPTS):
        out += _from_file(Path(name), 0)
    return out


def refuse_sources(split: SplitArgs) -> None:
    """DryRunCannotTell naming the first requirement a dry run would have to build."""
    found = source_requirements(split)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise DryRunCannotTell(
            f"a dry run builds nothing, and {found[0]}{more} would be built from source",
            hint="run without --dry-run to build and check it, or name a wheel of it",
        )


def no_wheel(output: str) -> str | None:
    """The requirement pip found no wheel for in a dry run's collect (``--only-binary``).

    pip's error text ("No matching distribution found for NAME", pip 23.0 and 26.3), read
    because a failed resolve has no machine-readable form (``--report`` is written only when
    pip resolves, and a report without ``--only-binary`` would build metadata from source). It
    only names the requirement in the message; pip's exit status decides."""

    found = re.findall(r"No matching distribution found for (\S+)", output)
    return found[-1] if found else None
