"""The pinned HIP compiler: rewrites each clang command line to build exactly the chosen targets.

It runs in front of clang three ways (``gpu/amd/enforce.py`` writes them): as
``CMAKE_HIP_COMPILER_LAUNCHER`` (CMake's HIP language runs ``launcher clang++ ARGS``), as the
``clang``/``clang++`` of a view of hipcc's clang folder (``HIP_CLANG_PATH``), so every clang run
hipcc makes comes here, links included, and as ``HIPCXX`` (CMake's HIP compiler, links
included; the launcher passes a compile for that one on untouched, so it is decided once).
Each way it is started as ``python -I -S hip_launcher.py COMPILER ARGS`` and ends by running
``COMPILER`` with the rewritten arguments. With ``ROCM_BUILD_BACKEND_CACHE_PROGRAM`` set, a compile
runs through that compiler cache with the final command line (the cache's key holds the
targets), except as the view's clang: there the cache stands in front of hipcc.

Appending ``--no-offload-arch=all --offload-arch=X`` is not enough: clang resolves
``--offload-arch=native`` (it runs ``amdgpu-arch``) before it applies the reset, so a machine
without a GPU fails, and a ``-fgpu-rdc`` link step that lists its own ``--offload-arch`` builds
the device code for that list. So the command line is rewritten, the way clang reads it:

- response files (``@file``) are expanded first, as clang does on Linux (GNU quoting: blanks
  separate, ``\\`` escapes the next character, ``'...'`` and ``"..."`` quote; nested names are
  relative to the working folder; a file that cannot be read stays a plain argument); an
  ``@file`` that names no target is passed on as it is, one that does is replaced by its words;
- every target option is taken out (``--offload-arch=``, ``--cuda-gpu-arch=``, hipcc's
  ``--amdgpu-target=``, each also with its value as the next word; ``--no-offload-arch=``,
  ``--no-cuda-gpu-arch=``; ``native`` among the values) and the chosen targets go last, one
  ``--offload-arch=`` each. The build's own copy of them (``HIPCC_COMPILE_FLAGS_APPEND``, which
  hipcc puts on its compiles) is recognised and not counted as the project's;
- a compile (``-c``, ``-S``, ``--cuda-device-only``, or a HIP source compiled and linked in one
  run), a preprocessing run that lists targets, and a ``-fgpu-rdc`` link step (``--hip-link`` or
  object inputs: the device code is made there) are rewritten; other runs (a link without
  ``-fgpu-rdc``, ``--version``) run as given, and so do compiles that are not HIP and list no
  target (a C file hipcc passes on);
- an option that could name a target in a way not read here (``-Xarch_device``,
  ``-Xarch_amdgcn``, ``-Xopenmp-target``, ``-fopenmp-targets=``, ``--offload=``, ``-Xclang
  -target-cpu``, ``-mcpu=gfx...``, ``-march=gfx...``) stops the run: exit 2 with the option named.

Each compile and rdc link is appended as one JSON line to the file named by
``ROCM_BUILD_BACKEND_ENFORCE_RECORD`` when it is set (``action``: ``rewritten``, ``kept``,
``added``; ``step``: ``compile`` or ``link``); CMake's own compiler checks (under ``CMakeFiles/``)
are rewritten alike but not recorded. This file runs as a program, configured by ``CONFIG`` at
its end: the standard library only, no import of the package. ``decide`` is pure apart from
reading response files, and tested on its own.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: this program starts once per compile
if TYPE_CHECKING:
    from typing import Any, Sequence

RECORD_VAR = "ROCM_BUILD_BACKEND_ENFORCE_RECORD"
CACHE_VAR = "ROCM_BUILD_BACKEND_CACHE_PROGRAM"  # the compiler cache to run a compile through
VIEW_VAR = "ROCM_BUILD_BACKEND_HIP_VIEW"  # set by the view's clang: hipcc runs it, a cache is in front of hipcc
TARGET_OPTIONS = ("--offload-arch", "--cuda-gpu-arch", "--amdgpu-target")
REMOVE_OPTIONS = ("--no-offload-arch", "--no-cuda-gpu-arch")
REFUSED = frozenset({"-Xarch_device", "-Xarch_amdgcn", "-Xopenmp-target"})
REFUSED_PREFIXES = ("-Xopenmp-target=", "-fopenmp-targets=", "--offload=", "-Xarch_amdgcn", "-Xarch_device")
DEVICE_CPU = ("-mcpu=gfx", "-march=gfx")
# options whose value is the next word (so that value is not read as an option or an input)
VALUE_OPTIONS = frozenset(
    {
        "-o",
        "-x",
        "-I",
        "-L",
        "-D",
        "-U",
        "-include",
        "-imacros",
        "-isystem",
        "-idirafter",
        "-iquote",
        "-isysroot",
        "-MF",
        "-MT",
        "-MQ",
        "-Xlinker",
        "-Xassembler",
        "-Xpreprocessor",
        "-mllvm",
        "-Xarch_host",
        "-Xcuda-fatbinary",
        "-Xcuda-ptxas",
        "-Xoffload-linker",
        "-z",
        "-T",
        "-u",
        "-target",
        "-arch",
        "-F",
        "-iprefix",
        "-iwithprefix",
        "-iwithprefixbefore",
        "-MJ",
    }
)
NOT_COMPILES = frozenset({"-E", "-M", "-MM", "--preprocess"})
COMPILES = frozenset({"-c", "-S", "--cuda-device-only"})
HIP_SUFFIXES = (".hip", ".cu", ".cuh")
SOURCE_SUFFIXES = (".hip", ".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".C", ".c++", ".cp")
RESPONSE_LIMIT = 16 << 20  # bytes read from one response file
RESPONSE_DEPTH = 32  # nested response files (clang stops a loop the same way)
MAX_LINE = 100_000  # bytes of arguments passed on the command line; more go in a response file


class Refused(Exception):
    """A command line with an option that may name a target in a way this program cannot read."""


def tokenize(text: str) -> list[str]:
    """A response file's words, as LLVM's ``TokenizeGNUCommandLine`` splits them."""
    words: list[str] = []
    token: list[str] = []
    i, end = 0, len(text)
    while i < end:
        ch = text[i]
        if ch == "\\" and i + 1 < end:
            token.append(text[i + 1])
            i += 2
        elif ch in "\"'":
            close = i + 1
            while close < end and text[close] != ch:
                if text[close] == "\\" and close + 1 < end:
                    close += 1
                token.append(text[close])
                close += 1
            i = close + 1
        elif ch in " \t\r\n":
            if token:
                words.append("".join(token))
            token, i = [], i + 1
        else:
            token.append(ch)
            i += 1
    if token:
        words.append("".join(token))
    return words


def _read_response(name: str) -> str | None:
    try:
        with open(name, "rb") as fh:
            data = fh.read(RESPONSE_LIMIT + 1)
    except OSError:
        return None
    if len(data) > RESPONSE_LIMIT:
        raise Refused(f"@{name}: response file larger than {RESPONSE_LIMIT} bytes")
    text = data.decode("utf-8", "surrogateescape")
    return text[1:] if text.startswith("\ufeff") else text


def expand(args: Sequence[str], depth: int = 0, seen: tuple[str, ...] = ()) -> list[tuple[str, int]]:
    """``args`` with every readable ``@file`` replaced by its words, each word with the index of
    the argument of ``args`` it came from."""
    out: list[tuple[str, int]] = []
    for index, arg in enumerate(args):
        name = arg[1:]
        text = None
        if arg.startswith("@") and name and depth < RESPONSE_DEPTH and os.path.realpath(name) not in seen:
            text = _read_response(name)
        if text is None:
            out.append((arg, index))
            continue
        inner = expand(tokenize(text), depth + 1, seen + (os.path.realpath(name),))
        out += [(word, index) for word, _ in inner]
    return out


def _target_value(words: Sequence[str], i: int, names: Sequence[str]) -> tuple[str, str, int] | None:
    """(option, value, next index) when ``words[i]`` is one of ``names``, joined or separate."""
    word = words[i]
    for name in names:
        if word.startswith(name + "="):
            return name, word[len(name) + 1 :], i + 1
        if word == name:
            return name, (words[i + 1] if i + 1 < len(words) else ""), i + 2
    return None


def _refused(word: str, following: str) -> str | None:
    if word in REFUSED or word.startswith(REFUSED_PREFIXES):
        return f"{word} {following}".strip()
    if word.startswith(DEVICE_CPU):
        return word
    if word == "-Xclang" and following in ("-target-cpu", "-target-feature"):
        return f"-Xclang {following}"
    return None


def read_line(words: Sequence[str], ours: Sequence[str]) -> tuple[list[str], set[int], dict[str, bool]]:
    """(the targets listed, indexes of the words that name targets, what kind of run it is)."""
    listed: list[str] = []
    removed: set[int] = set()
    kind = {
        "compile": False,
        "preprocess": False,
        "rdc": False,
        "hip_link": False,
        "hip": False,
        "inputs": False,
        "objects": False,
    }
    skip = _own_copy(words, ours)
    removed.update(skip)
    i = 0
    while i < len(words):
        if i in skip:
            i += 1
            continue
        word = words[i]
        following = words[i + 1] if i + 1 < len(words) else ""
        refused = _refused(word, following)
        if refused:
            raise Refused(refused)
        got = _target_value(words, i, TARGET_OPTIONS)
        dropped = _target_value(words, i, REMOVE_OPTIONS) if got is None else None
        found = got if got is not None else dropped
        if found is not None:
            _, value, nxt = found
            removed.update(range(i, nxt))
            values = [v for v in value.split(",") if v]
            if got is not None:
                listed += values
            else:
                listed = [] if "all" in values else [t for t in listed if t not in values]
            i = nxt
            continue
        _kind(kind, word, following)
        if word == "--":
            kind["inputs"] = True
            break
        i += 2 if word in VALUE_OPTIONS else 1
    return list(dict.fromkeys(listed)), removed, kind


def _own_copy(words: Sequence[str], ours: Sequence[str]) -> set[int]:
    """The indexes of the last run of words equal to ``ours`` (the build's own copy of the
    targets, from ``HIPCC_COMPILE_FLAGS_APPEND``)."""
    n = len(ours)
    for start in range(len(words) - n, -1, -1):
        if n and list(words[start : start + n]) == list(ours):
            return set(range(start, start + n))
    return set()


def _kind(kind: dict[str, bool], word: str, following: str) -> None:
    if word in COMPILES:
        kind["compile"] = True
        kind["hip"] = kind["hip"] or word == "--cuda-device-only"
    elif word in NOT_COMPILES:
        kind["preprocess"] = True
    elif word == "-fgpu-rdc":
        kind["rdc"] = True
    elif word == "-fno-gpu-rdc":
        kind["rdc"] = False
    elif word == "--hip-link":
        kind["hip_link"] = True
    elif word == "-xhip" or (word == "-x" and following == "hip"):
        kind["hip"] = True
    elif not word.startswith("-") or word == "-":
        kind["inputs"] = True
        if word.endswith(HIP_SUFFIXES):
            kind["hip"] = True
        elif not word.endswith(SOURCE_SUFFIXES):
            kind["objects"] = True


def decide(argv: Sequence[str], flags: Sequence[str]) -> tuple[str, list[str], list[str], str]:
    """(action, the command to run, the targets the run listed, ``compile`` or ``link``) for
    ``COMPILER ARGS``; ``flags``: the options for the chosen targets (the reset, then one
    ``--offload-arch=`` each). Actions: ``untouched`` (run as given, or a preprocessing run whose
    targets were rewritten: not counted), ``kept`` (listed exactly the chosen ones), ``added``
    (listed none), ``rewritten``. Raises Refused."""
    args = list(argv)
    if len(args) < 2:
        return "untouched", args, [], "compile"
    flat = expand(args[1:])
    words = [w for w, _ in flat]
    listed, removed, kind = read_line(words, flags)
    chosen = [f.split("=", 1)[1] for f in flags if f.startswith("--offload-arch=")]
    named = any(i not in _own_copy(words, flags) for i in removed)
    compiles = (kind["compile"] or kind["hip"]) and (kind["hip"] or named)
    link = kind["rdc"] and not kind["compile"] and not kind["hip"] and (kind["hip_link"] or kind["objects"])
    what = "compile" if kind["compile"] or kind["hip"] else "link"
    if kind["preprocess"]:
        compiles = link = False
    if not (compiles or link or (kind["preprocess"] and named)):
        return "untouched", args, [], what
    touched = {flat[i][1] for i in removed}
    rest: list[str] = []
    for index, arg in enumerate(args[1:]):
        if index in touched:
            rest += [w for i, (w, src) in enumerate(flat) if src == index and i not in removed]
        else:
            rest.append(arg)
    command = [args[0], *rest, *(f"--offload-arch={t}" for t in chosen)]
    action = "kept" if sorted(listed) == sorted(chosen) else "added" if not listed else "rewritten"
    return action if not kind["preprocess"] else "untouched", command, listed, what


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


def quote(word: str) -> str:
    """``word`` for a GNU-style response file (what ``tokenize`` reads back as that word)."""
    return "'" + word.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _record(action: str, what: str, argv: Sequence[str], listed: Sequence[str], targets: Sequence[str]) -> None:
    record = os.environ.get(RECORD_VAR)
    words = list(argv[1:])
    inputs = [
        a for i, a in enumerate(words) if not a.startswith(("-", "@")) and not (i and words[i - 1] in VALUE_OPTIONS)
    ]
    sources = [a for a in inputs if a.endswith(SOURCE_SUFFIXES)]
    if not record or _probe(sources):  # CMake's own compiler checks
        return
    shown = sources if what == "compile" else inputs
    line = {
        "tool": "hip",
        "action": action,
        "step": what,
        "listed": list(listed),
        "now": list(targets),
        "sources": [os.path.basename(p) for p in shown][:8],
    }
    try:
        fd = os.open(record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, json_line(line))
        finally:
            os.close(fd)
    except OSError:
        pass


def _run(command: Sequence[str]) -> None:
    """Run ``command``: in place of this program, or, for a command line too long to pass on,
    as a child with its arguments in a response file that is removed afterwards."""
    if sum(len(a) + 1 for a in command) <= MAX_LINE:
        os.execvp(command[0], list(command))
    name = os.path.join(os.environ.get("TMPDIR") or "/tmp", f"hip-launcher-{os.getpid()}.rsp")
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write("\n".join(quote(a) for a in command[1:]).encode("utf-8", "surrogateescape"))
        pid = os.posix_spawnp(command[0], [command[0], "@" + name], os.environ)
        _, status = os.waitpid(pid, 0)
    finally:
        os.unlink(name)
    raise SystemExit(os.waitstatus_to_exitcode(status))


def ours(compiler: str) -> bool:
    """Whether ``compiler`` is a starter of this program's folder (CMake's launcher in front of our
    ``HIPCXX``): that one decides, so the compile is decided and recorded once."""
    here = os.path.dirname(os.path.realpath(__file__))
    return os.path.realpath(compiler).startswith(here + os.sep)


def main(config: dict[str, Any], argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.stderr.write("hip-launcher (rocm-build-backend): no compiler to run\n")
        raise SystemExit(2)
    try:
        passed_on = any(ours(a) for a in args[:2] if os.sep in a and not a.startswith("-"))  # [ccache] our HIPCXX
        action, command, listed, what = ("untouched", args, [], "") if passed_on else decide(args, config["flags"])
    except Refused as exc:
        sys.stderr.write(
            f"hip-launcher (rocm-build-backend): error: cannot hold this compile to the "
            f"targets {' '.join(config['targets'])}: option {exc} may name a GPU target "
            "in a way that is not read here; remove it, or build with enforce = false\n"
        )
        raise SystemExit(2) from None
    if action != "untouched":
        _record(action, what, args, listed, config["targets"])
    cache = os.environ.get(CACHE_VAR, "")
    if (
        cache
        and action != "untouched"
        and what == "compile"
        and not os.environ.get(VIEW_VAR)
        and os.path.basename(command[0]) not in ("ccache", "sccache")
    ):
        command = [cache, *command]  # the cache sees the targets this compile really builds
    try:
        _run(command)
    except OSError as exc:
        sys.stderr.write(f"hip-launcher (rocm-build-backend): cannot run {command[0]}: {exc}\n")
        raise SystemExit(127) from None
