"""CMake source read as a list of commands, in linear time: ``commands(text)``.

A hand-written scanner, not a regular expression over the whole file: every pattern it uses
matches one token from a fixed position, with no quantifier inside another over the same
characters, so a file of blanks, newlines or unbalanced quotes costs time in proportion to its
length (the old single-pattern reader backtracked cubically on ``set(X`` followed by blanks).
Comments (``#`` and ``#[[ ... ]]``) are skipped, quoted and bracket arguments kept as one
argument, nested parentheses kept inside a command. Never fails: what does not parse is skipped.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BLANKS = re.compile(r"[ \t\r\f\v]*")
_WORD = re.compile(r"(?:[^\s()#\"\\]|\\.)+", re.S)
_QUOTED = re.compile(r"(?:[^\"\\]|\\.)*", re.S)  # the inside of a quoted argument
_BRACKET = re.compile(r"\[(=*)\[")
_SPACE = " \t\r\f\v\n"


class Command(NamedTuple):
    """One command invocation: its name (lower case), its arguments and the line it starts on."""

    name: str
    args: tuple[str, ...]
    line: int


def _bracket_end(text: str, pos: int) -> tuple[str, int] | None:
    """(content, end) of a bracket argument or comment opening at ``pos`` (``[==[``), else None."""
    m = _BRACKET.match(text, pos)
    if m is None:
        return None
    close = "]" + m.group(1) + "]"
    end = text.find(close, m.end())
    if end < 0:
        return text[m.end() :], len(text)
    return text[m.end() : end], end + len(close)


def _skip_comment(text: str, pos: int) -> int:
    """The position after the comment starting at ``pos`` (a ``#``)."""
    found = _bracket_end(text, pos + 1)
    if found is not None:
        return found[1]
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _arguments(text: str, pos: int) -> tuple[list[str], int]:
    """The arguments of a command whose ``(`` is just before ``pos``, and the position after its ``)``."""
    args: list[str] = []
    depth, n = 1, len(text)
    while pos < n:
        c = text[pos]
        if c in _SPACE:
            pos += 1
        elif c == "#":
            pos = _skip_comment(text, pos)
        elif c == "(":
            depth += 1
            pos += 1
        elif c == ")":
            depth -= 1
            pos += 1
            if depth == 0:
                return args, pos
        elif c == '"':
            m = _QUOTED.match(text, pos + 1)
            end = m.end() if m else pos + 1
            args.append(text[pos + 1 : end])
            pos = end + 1
        elif c == "[" and (found := _bracket_end(text, pos)) is not None:
            args.append(found[0])
            pos = found[1]
        else:
            m = _WORD.match(text, pos)
            if m is None:  # a lone backslash at the end
                pos += 1
                continue
            args.append(m.group(0))
            pos = m.end()
    return args, n


def commands(text: str) -> list[Command]:
    """Every command invocation of a CMake file, in order, with its line. Linear in ``len(text)``."""
    out: list[Command] = []
    pos, n, line, counted = 0, len(text), 1, 0
    while pos < n:
        c = text[pos]
        if c in _SPACE:
            pos += 1
            continue
        if c == "#":
            pos = _skip_comment(text, pos)
            continue
        m = _NAME.match(text, pos)
        if m is None:
            pos += 1
            continue
        after = _BLANKS.match(text, m.end())
        at = after.end() if after else m.end()
        if at >= n or text[at] != "(":
            pos = m.end()
            continue
        line += text.count("\n", counted, pos)
        counted = pos
        args, pos = _arguments(text, at + 1)
        out.append(Command(m.group(0).lower(), tuple(args), line))
    return out
