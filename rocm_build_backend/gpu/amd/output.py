"""Reading AMD tools' output as text: ANSI codes and CRLF removed, the telling first line,
and the error codes (driver not loaded, /dev/kfd permission, ...) the tools print.

Must not decide targets: the parsers (``rocminfo.py``, ``tools.py``) do that.
"""

from __future__ import annotations

import re


_ANSI = re.compile(r"(?:\x1b|\^\[)\[[0-9;]*[A-Za-z]")


ERRORS = (
    # (pattern, code); first match wins, so the most specific come first
    (re.compile(r"/dev/kfd.*Permission denied|not member of \"?(render|video)\"? group", re.I),
     "kfd_permission_denied"),
    (re.compile(r"ROCk module is NOT loaded", re.I), "driver_not_loaded"),
    (re.compile(r"HSA_STATUS_ERROR_OUT_OF_RESOURCES", re.I), "out_of_resources"),
    (re.compile(r"hsa api call failure|HSA_STATUS_ERROR|Segmentation fault|core dumped", re.I),
     "tool_failed"),
)


def clean_lines(text: str) -> list[str]:
    return [_ANSI.sub("", line).rstrip() for line in text.replace("\r\n", "\n").split("\n")]


def first_line(text: str, pattern: re.Pattern[str] | None = None) -> str:
    for line in clean_lines(text):
        line = line.strip()
        if line and (pattern is None or pattern.search(line)):
            return line[:120]
    return ""


def error_code(text: str) -> str | None:
    for pattern, code in ERRORS:
        if pattern.search(text):
            if code == "driver_not_loaded" and re.search(r"/dev/kfd.*No such file", text):
                return "driver_not_loaded_no_kfd"
            return code
    return None


def error_line(text: str, code: str | None) -> str:
    for pattern, c in ERRORS:
        if c == code or (code == "driver_not_loaded_no_kfd" and c == "driver_not_loaded"):
            return first_line(text, pattern)
    return first_line(text)
