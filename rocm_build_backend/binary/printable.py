"""Text from binaries made safe to print: control characters escaped.

Strings read from untrusted files (an OffloadBinary ``arch``, a section name, a zip member's
name) may hold newlines and terminal escape codes that would forge lines or colours in the
output. ``printable`` escapes them; every text output of the audit (and of ``check``) goes
through it, and so does the text output of ``check``, ``cache`` and ``index``. It imports
nothing from the package and must not change printable text.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls, and the Unicode line/paragraph separators and bidi overrides
_UNSAFE = "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"  # compiled (and kept by re) on first use


def _escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    if ch in named:
        return named[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with control characters written as escapes (``\\n``, ``\\x1b``, ``\\u202e``);
    printable text (including non-ASCII letters) is returned unchanged."""
    if re.search(_UNSAFE, text) is None:
        return text
    return re.sub(_UNSAFE, _escape, text)


def printable_lines(lines: list[str]) -> str:
    """The lines, each made printable, joined with newlines (the only newlines in the result)."""
    return "\n".join(printable(line) for line in lines)
