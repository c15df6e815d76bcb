"""Reading AMD tools' output as text: ANSI codes and CRLF removed, the telling first line,
and the error codes (driver not loaded, /dev/kfd permission, ...) the tools print.

Output as users paste it is read too: CR or CRLF line ends, tabs, terminal colour codes
(``grep --color``), and rocminfo with its line breaks lost, where several ``Key: value``
fields share one line and are split again at rocminfo's own field names.

Must not decide targets: the parsers (``rocminfo.py``, ``tools.py``) do that.
"""

from __future__ import annotations

import re


_ANSI = re.compile(r"(?:\x1b|\^\[)\[[0-9;]*[A-Za-z]")


ERRORS = (
    # (pattern, code); first match wins, so the most specific come first
    (
        re.compile(r"/dev/kfd.*Permission denied|not member of \"?(render|video)\"? group", re.I),
        "kfd_permission_denied",
    ),
    (re.compile(r"ROCk module is NOT loaded", re.I), "driver_not_loaded"),
    (re.compile(r"HSA_STATUS_ERROR_OUT_OF_RESOURCES", re.I), "out_of_resources"),
    (re.compile(r"hsa api call failure|HSA_STATUS_ERROR|Segmentation fault|core dumped", re.I), "tool_failed"),
)


#: rocminfo's field names (ROCm 2 to 6), longest first so that "Marketing Name" wins over "Name".
_ROCMINFO_KEYS = sorted(
    """
Runtime Version|Runtime Ext Version|System Timestamp Freq.|Sig. Max Wait Duration|Machine Model|
System Endianness|Mwaitx|DMAbuf Support|VMM Support|XNACK enabled|Name|Uuid|Marketing Name|
Vendor Name|Feature|Profile|Float Round Mode|Max Queue Number|Queue Min Size|Queue Max Size|
Queue Type|Node|Device Type|Cache Info|L1|L2|L3|Chip ID|ASIC Revision|Cacheline Size|
Max Clock Freq. (MHz)|BDFID|Internal Node ID|Compute Unit|SIMDs per CU|Shader Engines|
Shader Arrs. per Eng.|WatchPts on Addr. Ranges|Coherent Host Access|Memory Properties|Features|
Fast F16 Operation|Wavefront Size|Workgroup Max Size|Workgroup Max Size per Dimension|
Max Waves Per CU|Max Work-item Per CU|Grid Max Size|Grid Max Size per Dimension|
Max fbarriers/Workgrp|Packet Processor uCode|SDMA engine uCode|IOMMU Support|Pool Info|Segment|
Size|Allocatable|Alloc Granule|Alloc Recommended Granule|Alloc Alignment|Accessible by all|
Acessible by all|ISA Info|Machine Models|Profiles|Default Rounding Mode|Fast f16|
FBarrier Max Size""".replace("\n", "").split("|"),
    key=len,
    reverse=True,
)
_FIELD = re.compile(r"(?<![\w.])(?=[A-Z])(" + "|".join(re.escape(k) for k in _ROCMINFO_KEYS) + r")\s*:")
_HEADER = re.compile(r"(?<!\w)((?:Agent|Pool|ISA) [0-9]+)(?=\s|\*|$)|\*{3,}|={3,}")


def _unfold(line: str) -> list[str]:
    """A line holding several rocminfo fields (its line breaks lost) as one line per field."""
    if line.count(":") < 2 or len(_FIELD.findall(line, 0, 4096)) < 2:
        return [line]
    line = _HEADER.sub(lambda m: f"\n{m.group(1)}\n" if m.group(1) else "\n", line)
    return [part.strip() for part in _FIELD.sub(lambda m: f"\n{m.group(1)}:", line).split("\n")]


def plain(text: str) -> str:
    """The text without terminal colour codes, with LF line ends."""
    return _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")


def clean_lines(text: str) -> list[str]:
    """The output's lines without colour codes or trailing blanks; CR, CRLF and LF all end a
    line, and a line holding several rocminfo fields is split into one line per field."""
    lines = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [part.rstrip() for line in lines for part in _unfold(line)]


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
