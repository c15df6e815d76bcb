"""The pinned ``nvcc``: a program in front of the real nvcc that keeps each compile to the chosen targets.

nvcc has no option that removes a target (``NVCC_APPEND_FLAGS`` only adds). This program reads
one command line as nvcc does (``nvcc_line.py``: options files expanded in place, the target
options in every spelling), then runs the real nvcc:

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
rewritten alike but not recorded. With ``ROCM_BUILD_BACKEND_CACHE_PROGRAM`` set, a compile it
decided runs as ``CACHE nvcc ARGS`` with the rewritten arguments (its targets on the line, none
left in ``NVCC_APPEND_FLAGS``).

The program runs as ``python -I -S pinned_nvcc.py ARGS``, where this package cannot be imported:
``gpu/nvidia/enforce.py`` (``program_text``) writes it as one file, this module's text with
``nvcc_line.py``'s in place of the import between the ``# <nvcc_line>`` markers, configured by
``CONFIG`` at its end. The standard library only, nothing written but the record; ``decide`` is
pure and tested on its own.
"""

from __future__ import annotations

import os
import sys

# <nvcc_line>
from rocm_build_backend.gpu.nvidia.nvcc_line import (
    ARCH,
    CODE,
    CUDA_SUFFIXES,
    GENCODE,
    SPECIAL,
    Options,
    Refused,
    Unreadable,
    expand,
    read_targets,
)
# </nvcc_line>

TYPE_CHECKING = False  # typing is not imported at run time: this program starts once per compile
if TYPE_CHECKING:
    from typing import Any, Sequence

RECORD_VAR = "ROCM_BUILD_BACKEND_ENFORCE_RECORD"
CACHE_VAR = "ROCM_BUILD_BACKEND_CACHE_PROGRAM"  # the compiler cache to run a decided compile through
INFO = frozenset(
    {
        "--version",
        "-V",
        "--help",
        "-h",
        "--list-gpu-code",
        "-code-ls",
        "--list-gpu-arch",
        "-arch-ls",
        "-dryrun",
        "--dryrun",
    }
)
NOT_COMPILES = frozenset(
    {"-E", "--preprocess", "-M", "--generate-dependencies", "-MM", "--generate-nonsystem-dependencies"}
)


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
        "or build with enforce = false under [tool.rocm-build-backend]\n"
    )
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
