"""The pinned ``nvcc``: a program in front of the real nvcc that keeps each compile to the chosen targets.

nvcc has no option that removes a target (``NVCC_APPEND_FLAGS`` only adds). This program reads
one command line as nvcc does (options files ``--options-file F``/``-optf F,G`` expanded in place,
nested ones too; ``-gencode`` entries and ``-code`` values add up; the last ``-arch`` wins; every
spelling: ``-gencode=arch=compute_80,code=[sm_80,compute_80]``, ``-arch sm_90``,
``-arch=compute_80 -code=sm_80,sm_90``, ``-arch=native|all|all-major``), then runs the real nvcc:

- a compile that lists some of the chosen targets keeps those and drops the others, each entry
  keeping its own virtual architecture; PTX (``code=compute_XY``) only as the ``ptx`` setting says;
- a compile that lists none of them (a file built for one architecture on purpose) is left whole;
- a compile that lists no target at all gets the chosen ones; ``native``, ``all`` and
  ``all-major`` stand for them; a decided compile runs with its options files' words in place;
- an option nvcc does not know (``data/nvcc_options.json``, in ``CONFIG``) that could carry a
  target or name an input (``sm_XY``, ``gencode``, ``gpu-arch``, a ``.cu`` value...) fails the
  compile, named (exit 2); other unknown options pass through (the audit is the backstop);
- ``--version``, ``--list-gpu-*``, ``--help``, ``-E``, ``-M``, ``-MM`` (``-MD`` compiles),
  host-only compiles and lines nvcc itself rejects (``-code`` without ``-arch``, ``-arch=sm_XY``
  with ``-code``, an options file it cannot open) run exactly as given.

The arch options in ``NVCC_APPEND_FLAGS`` are the build's own copy of the targets; for a compile
decided here they are taken out so they cannot undo the decision. ``NVCC_PREPEND_FLAGS`` belongs
to the user: its arch options count as the compile's own.

Each decision is one JSON line appended to the file named by ``ROCM_BUILD_BACKEND_ENFORCE_RECORD``
(the build log and the stamp read it); CMake's own probes (sources under ``CMakeFiles/``) are
rewritten alike but not recorded. This file runs as a program (``python -I -S pinned_nvcc.py
ARGS``, configured by ``CONFIG`` at its end): the standard library only, nothing written but the
record. With ``ROCM_BUILD_BACKEND_CACHE_PROGRAM`` set, a compile it decided runs as ``CACHE nvcc
ARGS`` with the rewritten arguments (its targets on the line, none left in ``NVCC_APPEND_FLAGS``).
``gpu/nvidia/enforce.py`` writes it; ``decide`` is pure and tested on its own.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: this program starts once per compile
if TYPE_CHECKING:
    from typing import Any, Sequence

RECORD_VAR = "ROCM_BUILD_BACKEND_ENFORCE_RECORD"
CACHE_VAR = "ROCM_BUILD_BACKEND_CACHE_PROGRAM"  # the compiler cache to run a decided compile through
GENCODE = ("-gencode", "--generate-code")
ARCH = ("-arch", "--gpu-architecture")
CODE = ("-code", "--gpu-code")
INFO = frozenset({"--version", "-V", "--help", "-h", "--list-gpu-code", "-code-ls", "--list-gpu-arch",
                  "-arch-ls", "-dryrun", "--dryrun"})
NOT_COMPILES = frozenset({"-E", "--preprocess", "-M", "--generate-dependencies", "-MM",
                          "--generate-nonsystem-dependencies"})
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
            return arg[len(name) + 1:], i + 1
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
        arch, code = value[arch_at + 5:code_at].rstrip(","), value[code_at + 5:]
    else:
        code, arch = value[code_at + 5:arch_at].rstrip(","), value[arch_at + 5:]
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
        if at >= 0 and low[at + len(prefix):at + len(prefix) + 1].isdigit():
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


def decide(argv: Sequence[str], config: dict[str, Any]) -> tuple[str, list[str], list[str], list[str]]:
    """What to run for ``argv``: (action, the new arguments, the targets listed, the targets now).

    ``config``: ``sass`` and ``ptx`` (the chosen code targets), ``gencode`` (target -> its
    ``-gencode=...`` option), ``ptx_for`` (SASS target -> the PTX target the ``ptx`` setting adds
    with it). Actions: ``untouched`` (runs as given, environment too), ``kept`` (already exactly
    the chosen ones), ``rewritten``, ``added``, ``whole`` (lists none of the chosen targets),
    ``refused`` (an unknown option that could carry a target or name an input: the targets listed
    are that option). ``argv`` has its options files expanded (``expand``).
    """
    args = list(argv)
    if any(a in INFO or a in NOT_COMPILES for a in args):
        return "untouched", args, [], []
    try:
        entries, rest, first, device = read_targets(args, Options(config.get("options") or {}))
    except Unreadable:
        return "untouched", args, [], []
    except Refused as exc:
        return "refused", args, [str(exc)], []
    if not entries and not device:
        return "untouched", args, [], []
    sass, ptx = set(config["sass"]), set(config["ptx"])
    chosen = sorted(sass | ptx)
    if not entries:
        return "added", args + [config["gencode"][t] for t in chosen], [], chosen
    listed = sorted({c for _, codes in entries for c in codes} | {a for a, codes in entries if a in SPECIAL})
    if any(a in SPECIAL for a, _ in entries):
        now_flags = [config["gencode"][t] for t in chosen]
        return "rewritten", rest[:first] + now_flags + rest[first:], listed, chosen
    if not any(c in sass or c in ptx for _, codes in entries for c in codes):
        return "whole", args, listed, listed
    kept: list[tuple[str, list[str]]] = []
    for virtual, codes in entries:
        keep = [c for c in codes if c in sass or c in ptx]
        keep += [config["ptx_for"][c] for c in keep if c in config["ptx_for"]]
        keep = list(dict.fromkeys(keep))
        if keep:
            kept.append((virtual, keep))
    have = {c for _, codes in kept for c in codes}
    now = sorted(have)
    if now == listed:
        return "kept", args, listed, now
    flags = []
    for virtual, codes in kept:
        code = codes[0] if len(codes) == 1 else "[" + ",".join(codes) + "]"
        flags.append(f"-gencode=arch={virtual},code={code}")
    return "rewritten", rest[:first] + flags + rest[first:], listed, now


def _without_arch(value: str) -> str:
    """``NVCC_APPEND_FLAGS`` without its target options (split on blanks, as nvcc does)."""
    words = value.split()
    out: list[str] = []
    skip = False
    for w in words:
        if skip:
            skip = False
        elif w in GENCODE + ARCH + CODE:
            skip = True
        elif not w.startswith(tuple(n + "=" for n in GENCODE + ARCH + CODE)):
            out.append(w)
    return " ".join(out)


def _probe(paths: Sequence[str]) -> bool:
    """Whether this is one of CMake's own probes of the compiler: it runs them under CMakeFiles/."""
    try:
        here = os.getcwd()
    except OSError:
        here = ""
    return any("CMakeFiles" in p.replace("\\", "/").split("/") for p in [here, *paths])


def json_line(line: dict[str, Any]) -> bytes:
    """One JSON object of strings and lists of strings, and a newline (``json`` is not imported:
    it would cost more than the rest of this program)."""
    def text(value: object) -> str:
        out = ['"']
        for ch in str(value):
            out.append("\\" + ch if ch in '"\\' else "\\u%04x" % ord(ch) if ord(ch) < 0x20 else ch)
        return "".join(out) + '"'

    def item(value: object) -> str:
        return "[" + ",".join(text(v) for v in value) + "]" if isinstance(value, list) else text(value)

    body = ",".join(text(k) + ":" + item(v) for k, v in line.items())
    return ("{" + body + "}\n").encode("utf-8", "replace")


def _record(path: str, line: dict[str, Any]) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, json_line(line))
        finally:
            os.close(fd)
    except OSError:
        pass  # the record is for the log; the compile must not fail for it


def _refuse(option: str, record: str | None, sources: list[str]) -> None:
    if record:
        _record(record, {"tool": "nvcc", "action": "refused", "listed": [option], "now": [], "sources": sources[:8]})
    sys.stderr.write(
        f"nvcc (pinned by rocm-build-backend): error: unknown option {option!r} could name a GPU target or an "
        "input file, so the targets of this compile cannot be held to the build's\n"
        "hint: spell it as an nvcc option this program knows (-gencode, -arch, -code, --options-file), "
        "or build with enforce = false under [tool.rocm-build-backend]\n")
    raise SystemExit(2)


def main(config: dict[str, Any], argv: Sequence[str] | None = None) -> None:
    """Expand options files, decide, record, and replace this process with the real nvcc."""
    args = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ)
    prepend = env.get("NVCC_PREPEND_FLAGS", "")
    theirs = prepend.split() if any(w.startswith(GENCODE + ARCH + CODE) for w in prepend.split()) else []
    try:
        line, files = expand(theirs + args)
    except Unreadable:  # nvcc cannot read it either and says so
        line, files = [], []
    action, new, listed, now = decide(line, config) if line else ("untouched", args, [], [])
    paths = [a for a in (line or args) if not a.startswith("-") and a.endswith(CUDA_SUFFIXES)]
    sources = [os.path.basename(p) for p in paths]
    record = env.get(RECORD_VAR)
    if action == "refused":
        _refuse(listed[0], record if not _probe(paths) else None, sources)
    if action == "untouched":
        new = args
    else:
        if theirs:
            env["NVCC_PREPEND_FLAGS"] = _without_arch(prepend)
        if "NVCC_APPEND_FLAGS" in env:
            env["NVCC_APPEND_FLAGS"] = _without_arch(env["NVCC_APPEND_FLAGS"])
        if record and not _probe(paths):
            # (CMake's own probes of the compiler, under CMakeFiles/, are rewritten but not recorded)
            entry = {"tool": "nvcc", "action": action, "listed": listed, "now": now, "sources": sources[:8]}
            if files:
                entry["options_files"] = [os.path.basename(f) for f in files[:8]]
            _record(record, entry)
    real = config["nvcc"]
    cache = env.get(CACHE_VAR, "") if action != "untouched" else ""
    command = ([cache] if cache else []) + [real] + new  # a cache sees the rewritten command line
    try:
        os.execve(command[0], command, env)
    except OSError as exc:
        sys.stderr.write(f"nvcc (pinned by rocm-build-backend): cannot run the real nvcc {real}: {exc}\n")
        raise SystemExit(127) from None
