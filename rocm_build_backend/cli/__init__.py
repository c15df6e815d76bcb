"""`rocm-build-backend` and `python -m rocm_build_backend`: the only printer.

One module per group of verbs; each has a ``register(add)`` that adds its verbs' parsers:

    gpu       targets, detect          the known GPU targets; this machine's GPUs
    project   plan, build, configure   a project through the shim
    wheels    audit, check, cache,     what wheels hold; will they load here (a wheel, or a whole
              install, index           environment with --env); caches; an inspecting install;
                                       a static index per GPU target
    thin      thin, split              wheels whose device code is only what some GPUs load

Every verb exits with the codes in ``EXIT_CODES``; library errors become one ``error:`` line and
one ``hint:`` line, never a traceback (``-v`` adds it, for a bug report). ``-q`` keeps a build's
own output off the terminal unless it fails; long work (``index``, ``check --env``) shows its
progress on stderr when that is a terminal, unless ``-q``. The ``error:``, ``warning:`` and ``hint:`` words are
coloured on a terminal, never with ``NO_COLOR`` set, always with ``FORCE_COLOR`` set.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import time
import traceback
from typing import Callable, Mapping, Sequence, TextIO

from rocm_build_backend import progress
from rocm_build_backend._version import __version__
from rocm_build_backend.cli import gpu, project, thin, wheels
from rocm_build_backend.cli.common import Command
from rocm_build_backend.errors import RocmBuildBackendError

EXIT_CODES = """exit codes, the same for every command:
  0  success, or yes (every wheel loads here, targets found, ...)
  1  a definite no: does not load, build refused or failed, a problem found
  2  a usage or input error (bad option, unknown target, missing file)
  3  cannot tell: no GPU found, a file that cannot be read"""

_GROUPS = (gpu, project, wheels, thin)  # the order of the verbs in --help


def _verbosity(p: argparse.ArgumentParser, default: object) -> None:
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default,
        help="say more: an error also prints its Python traceback (for a bug report)",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="count",
        default=default,
        help="say less: a build's own output is shown only when it fails",
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rocm-build-backend",
        description="Build GPU Python packages for the right GPU targets, and prove it.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--version", action="version", version=f"rocm-build-backend {__version__}", help="print the version and exit"
    )
    _verbosity(p, 0)
    after = argparse.ArgumentParser(add_help=False)  # -v and -q after the verb too
    _verbosity(after, argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, func: Command, help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(
            name,
            help=help,
            description=help,
            epilog=EXIT_CODES,
            parents=[after],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sp.set_defaults(func=func)
        return sp

    for group in _GROUPS:
        group.register(add)
    return p


def color(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """Colour for ``stream``: never with NO_COLOR, always with FORCE_COLOR (each when set and not
    empty, NO_COLOR first), never on TERM=dumb, else when it is a terminal."""
    env = os.environ if env is None else env
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    return env.get("TERM") != "dumb" and stream.isatty()


_PAINT = {"error:": "\033[1;31m", "warning:": "\033[1;33m", "hint:": "\033[1;36m"}


def painted(line: str, on: bool) -> str:
    """``line`` with its leading ``error:``, ``warning:`` or ``hint:`` coloured when ``on``."""
    word = line.split(" ", 1)[0]
    if not on or word not in _PAINT:
        return line
    return f"{_PAINT[word]}{word}\033[0m{line[len(word) :]}"


class Progress:
    """A progress line on a terminal: ``what: done/total``, rewritten in place at most ten times
    a second, wiped when the work is done (``done == total``) and when the command ends."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream, self.clock, self.last, self.shown = stream, clock, float("-inf"), False

    def __call__(self, what: str, done: int, total: int) -> None:
        if total and done >= total:  # finished: the command's own output comes next
            self.close()
            return
        now = self.clock()
        if now - self.last < 0.1:
            return
        self.last = now
        self.stream.write(f"\r\033[K{what}: {done}" + (f"/{total}" if total else "") + " ")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


def _unknown_verb(p: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """The first word when it is no verb: argparse's own message lists them all, with no guess."""
    verb = next((a for a in argv if not a.startswith("-")), None)
    verbs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)][0].choices
    if verb is None or verb in verbs or any(a in ("-h", "--help", "--version") for a in argv[: argv.index(verb)]):
        return None
    return verb


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    on = color(sys.stderr)
    verb = _unknown_verb(p, argv)
    if verb is not None:
        verbs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)][0].choices
        near = difflib.get_close_matches(verb, list(verbs), n=1, cutoff=0.6)
        print(painted(f"error: unknown command '{verb}'", on), file=sys.stderr)
        hint = f"did you mean '{near[0]}'? " if near else "the commands: " + ", ".join(verbs) + "; "
        print(painted(f"hint: {hint}rocm-build-backend --help says what each does", on), file=sys.stderr)
        return 2
    args = p.parse_args(argv)
    shown = Progress(sys.stderr) if sys.stderr.isatty() and not args.quiet else None
    progress.set_reporter(shown)
    try:
        code: int = args.func(args)
        return code
    except RocmBuildBackendError as exc:
        from rocm_build_backend.binary.printable import printable

        if shown is not None:
            shown.close()
        for line in exc.lines():  # names and values from files and arguments: escaped
            print(painted(printable(line), on), file=sys.stderr)
        if args.verbose:
            traceback.print_exc()
        return exc.exit_code
    except MemoryError:
        print(painted("error: out of memory", on), file=sys.stderr)
        print(
            painted("hint: an input larger than this machine's memory allows; nothing was written", on), file=sys.stderr
        )
        return 3
    except KeyboardInterrupt:
        print(painted("error: interrupted", on), file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    finally:
        progress.set_reporter(None)
        if shown is not None:
            shown.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
