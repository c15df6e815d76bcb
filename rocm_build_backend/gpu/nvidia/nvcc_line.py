"""An nvcc command line, read as nvcc reads it: the targets it lists and what else is on it.

``expand`` replaces options files (``--options-file F``/``-optf F,G``, nested ones too) with their
words, split as nvcc splits them (``split_options``); ``read_targets`` reads the target options in
every spelling (``-gencode=arch=compute_80,code=[sm_80,compute_80]``, ``-arch sm_90``,
``-arch=compute_80 -code=sm_80,sm_90``, ``-arch=native|all|all-major``): ``-gencode`` entries and
``-code`` values add up, the last ``-arch`` wins. An option nvcc does not know (``Options``, from
``data/nvcc_options.json``) that could carry a target or name an input (``risky``) is ``Refused``;
a line whose targets cannot be told for sure (one nvcc itself rejects) is ``Unreadable``.

Part of the pinned nvcc program (``pinned_nvcc.py``, which decides; ``enforce.program_text``
writes this module's text into it): the standard library only, nothing imported at run time
but what the program already has, nothing written. Pure but for reading options files.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: the program starts once per compile
if TYPE_CHECKING:
    from typing import Any, Sequence

GENCODE = ("-gencode", "--generate-code")
ARCH = ("-arch", "--gpu-architecture")
CODE = ("-code", "--gpu-code")
OPTIONS_FILE = ("-optf", "--options-file")
# an option nvcc does not know (forwarded to the host compiler, or newer than this table) is refused when
# it could carry a target or name an input file; any other passes through (the audit is the backstop)
TARGET_WORDS = ("gencode", "gpu-arch", "gpu-code", "gpu-name", "offload-arch", "cuda-gpu")
INPUT_SUFFIXES = (".cu", ".cup", ".gpu", ".ptx", ".cubin", ".fatbin", ".ltoir", ".optf", ".rsp")
MAX_FILES = 64  # options files read for one command line (nested ones count too)
MAX_FILE_BYTES = 1 << 20
CUDA_SUFFIXES = (".cu", ".cup", ".gpu")
SPECIAL = frozenset({"native", "all", "all-major"})


def _option(argv: Sequence[str], i: int, names: Sequence[str]) -> tuple[str, int] | None:
    """The value of option ``names`` at ``argv[i]`` (``-o=v`` or ``-o v``) and the next index."""
    arg = argv[i]
    for name in names:
        if arg == name:
            return (argv[i + 1], i + 2) if i + 1 < len(argv) else ("", i + 1)
        if arg.startswith(name + "="):
            return arg[len(name) + 1 :], i + 1
    return None


def _codes(text: str) -> list[str]:
    """``[sm_80,compute_80]``, ``"sm_80,compute_80"`` or ``sm_80`` as names."""
    text = text.strip().strip("\"'").strip("[]").strip("\"'")
    return [c.strip().strip("\"'").lower() for c in text.split(",") if c.strip()]


def _gencode(value: str) -> tuple[str, list[str]] | None:
    """``arch=compute_80,code=[sm_80,compute_80]`` as ``("compute_80", ["sm_80", "compute_80"])``."""
    value = value.strip().strip("\"'")
    arch_at, code_at = value.find("arch="), value.find("code=")
    if arch_at < 0 or code_at < 0:
        return None
    if arch_at < code_at:
        arch, code = value[arch_at + 5 : code_at].rstrip(","), value[code_at + 5 :]
    else:
        code, arch = value[code_at + 5 : arch_at].rstrip(","), value[arch_at + 5 :]
    arch = arch.strip().strip("\"'").lower()
    codes = _codes(code)
    return (arch, codes) if arch and codes else None


class Unreadable(Exception):
    """A command line whose targets this program cannot tell for sure: it runs as given (nvcc
    itself rejects each such line: ``-code`` without ``-arch``, ``-arch=sm_XY`` with ``-code``, an
    options file it cannot open)."""


class Refused(Exception):
    """An option this program does not know and that could carry a target or name an input: the
    compile fails, naming it."""


def split_options(text: str) -> list[str]:
    """The words of an options file as nvcc reads them: split on blanks; double quotes group and
    are removed; outside them a backslash keeps the next character; single quotes are plain."""
    words: list[str] = []
    word: list[str] = []
    have = quoted = False
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and not quoted:
            word.append(text[i + 1])
            have = True
            i += 2
            continue
        if ch == '"':
            quoted, have = not quoted, True
        elif ch == "\\":
            pass
        elif ch.isspace() and not quoted:
            if have:
                words.append("".join(word))
            word, have = [], False
        else:
            word.append(ch)
            have = True
        i += 1
    if have:
        words.append("".join(word))
    return words


def _read_options(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise Unreadable(f"cannot open options file {path}: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise Unreadable(f"options file {path} is over {MAX_FILE_BYTES} bytes")
    return data.decode("utf-8", "surrogateescape")


def expand(argv: Sequence[str], read: Any = _read_options) -> tuple[list[str], list[str]]:
    """``argv`` with each ``--options-file F`` / ``-optf F,G`` (``=`` spellings too) replaced by the
    words of its files, nested files included, as nvcc does (relative names from the working
    folder); and the files read. Unreadable when one cannot be read or there are too many."""
    if not any(a.startswith(OPTIONS_FILE) for a in argv):
        return list(argv), []
    out: list[str] = []
    files: list[str] = []
    todo = [list(argv)]
    while todo:
        args = todo[-1]
        if not args:
            todo.pop()
            continue
        got = _option(args, 0, OPTIONS_FILE)
        if got is None:
            out.append(args.pop(0))
            continue
        value, used = got
        del args[:used]
        names = [n for n in value.split(",") if n]
        if not names:
            raise Unreadable("an options file option without a file")
        words: list[str] = []
        for name in names:
            files.append(name)
            if len(files) > MAX_FILES or len(todo) > 16:
                raise Unreadable(f"more than {MAX_FILES} options files, or nested too deep")
            words += split_options(read(name))
        todo.append(words)
    return out, files


class Options:
    """nvcc's options (``config["options"]``, from ``data/nvcc_options.json``, each list one string of
    words): ``value`` take a value, ``flag`` none, ``joined`` also take it joined (``-I/usr/include``)."""

    def __init__(self, table: dict[str, str]) -> None:
        self.value = frozenset(table.get("value", "").split())
        self.flag = frozenset(table.get("flag", "").split())
        self.joined = tuple(table.get("joined", "").split())

    def known(self, arg: str) -> bool:
        """Whether nvcc knows option ``arg`` (``-o``, ``-o=v``, ``-Iv``)."""
        name = arg.split("=", 1)[0]
        if name in self.flag or name in self.value:
            return "=" not in arg or name in self.value
        return len(arg) > 2 and arg[:2] in self.joined


def risky(arg: str) -> bool:
    """Whether an option nvcc does not know could carry a target or name an input file."""
    low = arg.lower()
    if any(w in low for w in TARGET_WORDS):
        return True
    for prefix in ("sm_", "compute_", "lto_"):
        at = low.find(prefix)
        if at >= 0 and low[at + len(prefix) : at + len(prefix) + 1].isdigit():
            return True
    return low.split("=", 1)[-1].strip("\"'").endswith(INPUT_SUFFIXES)


def read_targets(argv: Sequence[str], options: Options) -> tuple[list[tuple[str, list[str]]], list[str], int, bool]:
    """(target entries, the other arguments, where the first target option was, whether a CUDA
    source or a device-link step is on the line). As nvcc reads them: ``-gencode`` entries add up,
    so do ``-code`` values; the last ``-arch`` wins. Raises Unreadable, Refused."""
    entries: list[tuple[str, list[str]]] = []
    rest: list[str] = []
    first = -1
    arch: list[str] = []
    code: list[str] = []
    device = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        for names, kind in ((GENCODE, "gencode"), (ARCH, "arch"), (CODE, "code")):
            got = _option(argv, i, names)
            if got is not None:
                break
        if got is not None:
            value, i = got
            first = len(rest) if first < 0 else first
            if kind == "gencode":
                parsed = _gencode(value)
                if parsed is None:
                    raise Unreadable(f"cannot read {names[0]} {value}")
                entries.append(parsed)
            elif kind == "arch":
                arch.append(value.strip().strip("\"'").lower())
            else:
                code += _codes(value)
            continue
        if arg.startswith("-") and len(arg) > 1 and not options.known(arg) and risky(arg):
            raise Refused(arg)
        if arg in ("-dlink", "--device-link", "-dlto", "--dlink-time-opt"):
            device = True
        if arg in ("-x", "--x") and i + 1 < len(argv) and argv[i + 1] == "cu":
            device = True
        if arg in ("-x=cu", "--x=cu"):
            device = True
        if not arg.startswith("-") and arg.endswith(CUDA_SUFFIXES):
            device = True
        rest.append(arg)
        i += 1
        if arg in options.value and i < len(argv):  # its value is no input file
            rest.append(argv[i])
            i += 1
    if code and not arch:
        raise Unreadable("-code without -arch")
    if arch:
        a = arch[-1]
        if a in SPECIAL:
            entries.append((a, []))
        elif a.startswith("sm_"):
            if code:
                raise Unreadable(f"-arch={a} with -code")
            entries.append(("compute_" + a[3:], [a, "compute_" + a[3:]]))
        else:
            entries.append((a, code or [a]))
    return entries, rest, first, device
