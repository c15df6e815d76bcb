"""The pinned ``nvcc``: a program in front of the real nvcc that keeps each compile to the chosen targets.

nvcc has no option that removes a target (``NVCC_APPEND_FLAGS`` only adds), so a project that
passes its own ``-gencode`` list builds every entry of it. This program reads the target options
of one nvcc command line (``-gencode``/``--generate-code``, ``-arch``/``--gpu-architecture``,
``-code``/``--gpu-code``, in every spelling: ``-gencode=arch=compute_80,code=[sm_80,compute_80]``,
``-gencode arch=...``, ``-arch=sm_90``, ``-arch sm_90``, ``-arch=compute_80 -code=sm_80,sm_90``,
``-arch=native|all|all-major``) and then runs the real nvcc:

- a compile that lists some of the chosen targets keeps those and drops the others, each entry
  keeping its own virtual architecture (``arch=compute_80,code=sm_90`` stays so); PTX
  (``code=compute_XY``) is kept or added only as the ``ptx`` setting says;
- a compile that lists none of them (a file built for one architecture on purpose) is left whole,
  and so recorded;
- a compile that lists no target at all gets the chosen ones (what ``NVCC_APPEND_FLAGS`` gives);
- ``native``, ``all`` and ``all-major`` stand for the chosen targets;
- ``--version``, ``--list-gpu-*``, ``--help``, preprocessing (``-E``), dependency-only runs
  (``-M``, ``-MM``; ``-MD`` compiles and is rewritten), host-only compiles (no CUDA source, no
  target option) and command lines it cannot read (two ``-arch``, ``-code`` without ``-arch``,
  ``--options-file``) run exactly as given.

The arch options in ``NVCC_APPEND_FLAGS`` are the build's own copy of the targets (the plan puts
them there for nvcc calls that do not come through here); for a compile decided here they are
taken out so they cannot undo the decision. ``NVCC_PREPEND_FLAGS`` belongs to the user: its
arch options count as the compile's own.

Each decision is appended as one JSON line to the file named by
``ROCM_BUILD_BACKEND_ENFORCE_RECORD`` when it is set (the build log and the stamp read it); CMake's
own probes of the compiler (sources under ``CMakeFiles/``) are rewritten alike but not recorded.

This file runs as a program (``python -I -S pinned_nvcc.py ARGS``, configured by ``CONFIG`` at
its end): the standard library only, no import of the package, nothing written but the record.
With ``ROCM_BUILD_BACKEND_CACHE_PROGRAM`` set, a compile it decided runs as ``CACHE nvcc ARGS``
with the rewritten arguments (its targets on the line, none left in ``NVCC_APPEND_FLAGS``).
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
UNREADABLE = ("-optf", "--options-file")
# options whose value may be the next argument (so that value is not read as an input file)
VALUE_OPTIONS = frozenset({
    "-o", "--output-file", "-ccbin", "--compiler-bindir", "-I", "--include-path", "-L", "--library-path",
    "-l", "--library", "-D", "--define-macro", "-U", "--undefine-macro", "-x", "--x", "-std", "--std",
    "-Xcompiler", "--compiler-options", "-Xlinker", "--linker-options", "-Xptxas", "--ptxas-options",
    "-Xnvlink", "--nvlink-options", "-Xfatbin", "--fatbin-options", "-Xarchive", "--archive-options",
    "-Xcudafe", "-MF", "--dependency-output", "-MT", "--dependency-target-name", "-MQ", "-odir",
    "--output-directory", "-include", "--pre-include", "-isystem", "--system-include", "-idirafter",
    "-t", "--threads", "-maxrregcount", "--maxrregcount", "-cudart", "--cudart", "-cudadevrt",
    "--cudadevrt", "-rdc", "--relocatable-device-code", "-keep-dir", "--keep-dir", "-ldir",
    "--libdevice-directory", "-split-compile", "--split-compile", "-time", "--time", "-default-stream",
    "--default-stream", "-ftz", "--ftz", "-prec-div", "--prec-div", "-prec-sqrt", "--prec-sqrt",
    "-fmad", "--fmad", "-diag-suppress", "--diag-suppress", "-diag-error", "--diag-error",
    "-diag-warn", "--diag-warn", "-Werror", "--Werror", "-arch", "--gpu-architecture", "-code",
    "--gpu-code", "-gencode", "--generate-code", "-optf", "--options-file", "-dopt", "--dopt",
    "-Xnvvm", "-jump-table-density",
})
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
    """A command line whose targets this program cannot tell for sure: it runs as given."""


def read_targets(argv: Sequence[str]) -> tuple[list[tuple[str, list[str]]], list[str], int, bool]:
    """(target entries, the other arguments, where the first target option was, whether a CUDA
    source or a device-link step is on the line). Raises Unreadable."""
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
        if arg.startswith(UNREADABLE):
            raise Unreadable(f"{arg}: the options file may name targets")
        if arg in ("-dlink", "--device-link", "-dlto", "--dlink-time-opt"):
            device = True
        if arg in ("-x", "--x") and i + 1 < len(argv) and argv[i + 1] == "cu":
            device = True
        if arg in ("-x=cu", "--x=cu", "-xcu"):
            device = True
        if not arg.startswith("-") and arg.endswith(CUDA_SUFFIXES):
            device = True
        rest.append(arg)
        i += 1
        if arg in VALUE_OPTIONS and i < len(argv):  # its value is no input file
            rest.append(argv[i])
            i += 1
    if len(arch) > 1 or (code and not arch):
        raise Unreadable("several -arch, or -code without -arch")
    if arch:
        a = arch[0]
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
    the chosen ones), ``rewritten``, ``added``, ``whole`` (lists none of the chosen targets).
    """
    args = list(argv)
    if any(a in INFO or a in NOT_COMPILES for a in args):
        return "untouched", args, [], []
    try:
        entries, rest, first, device = read_targets(args)
    except Unreadable:
        return "untouched", args, [], []
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


def main(config: dict[str, Any], argv: Sequence[str] | None = None) -> None:
    """Decide, record, and replace this process with the real nvcc."""
    args = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ)
    prepend = env.get("NVCC_PREPEND_FLAGS", "")
    theirs = prepend.split() if any(w.startswith(GENCODE + ARCH + CODE) for w in prepend.split()) else []
    action, new, listed, now = decide(theirs + args, config)
    if action == "untouched":
        new = args
    else:
        if theirs:
            env["NVCC_PREPEND_FLAGS"] = _without_arch(prepend)
        if "NVCC_APPEND_FLAGS" in env:
            env["NVCC_APPEND_FLAGS"] = _without_arch(env["NVCC_APPEND_FLAGS"])
        record = env.get(RECORD_VAR)
        paths = [a for a in args if not a.startswith("-") and a.endswith(CUDA_SUFFIXES)]
        if record and not _probe(paths):
            # (CMake's own probes of the compiler, under CMakeFiles/, are rewritten but not recorded)
            sources = [os.path.basename(p) for p in paths]
            _record(record, {"tool": "nvcc", "action": action, "listed": listed, "now": now, "sources": sources[:8]})
    real = config["nvcc"]
    cache = env.get(CACHE_VAR, "") if action != "untouched" else ""
    command = ([cache] if cache else []) + [real] + new  # a cache sees the rewritten command line
    try:
        os.execve(command[0], command, env)
    except OSError as exc:
        sys.stderr.write(f"nvcc (pinned by rocm-build-backend): cannot run the real nvcc {real}: {exc}\n")
        raise SystemExit(127) from None
