"""Text from wheels made safe to print: control characters escaped.

Names and strings read from untrusted wheels (a member's name, a target name in a stamp or an
OffloadBinary, a file name in a folder) may hold newlines and terminal escape codes that would
forge lines or colours in ``check``, ``cache`` and ``index`` output. ``printable`` escapes them.
It imports nothing from the package and must not change printable text.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls, and the Unicode line/paragraph separators and bidi overrides
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with control characters written as escapes (``\\n``, ``\\x1b``, ``\\u202e``);
    printable text (including non-ASCII letters) is returned unchanged."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escape, text)


def printable_lines(lines: list[str]) -> str:
    """The lines, each made printable, joined with newlines (the only newlines in the result)."""
    return "\n".join(printable(line) for line in lines)
