"""`rocm-build-backend` and `python -m rocm_build_backend`: the only printer.

One module per group of verbs; each has a ``register(add)`` that adds its verbs' parsers:

    gpu       targets, detect          the known GPU targets; this machine's GPUs
    project   plan, build, configure   a project through the shim
    wheels    audit, check, cache,     what wheels hold; will they load here (a wheel, or a whole
              install, index           environment with --env); caches; an inspecting install;
                                       a static index per GPU target
    thin      thin, split              wheels whose device code is only what some GPUs load

Every verb exits with the codes in ``EXIT_CODES``; library errors become one ``error:`` line and
one ``hint:`` line, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rocm-build-backend",
        description="Build GPU Python packages for the right GPU targets, and prove it.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"rocm-build-backend {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, func: Command, help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help, epilog=EXIT_CODES,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        sp.set_defaults(func=func)
        return sp

    for group in _GROUPS:
        group.register(add)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except RocmBuildBackendError as exc:
        from rocm_build_backend.binary.printable import printable

        for line in exc.lines():  # names and values from files and arguments: escaped
            print(printable(line), file=sys.stderr)
        return exc.exit_code
    except MemoryError:
        print("error: out of memory", file=sys.stderr)
        print("hint: an input larger than this machine's memory allows; nothing was written", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
