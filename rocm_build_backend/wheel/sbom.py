"""SBOMs inside a wheel (PEP 770: ``<name>-<version>.dist-info/sboms/``), kept true when a
rewrite gives the wheel a new version and file name (``split``, ``index --split``, ``thin``
with a new version, the build's ``local-version``).

``auditwheel repair`` writes one (CycloneDX) that names the wheel by package URL,
``pkg:pypi/<name>@<version>?file_name=<wheel file>``. A renamed wheel's SBOM gets, in place:

- every package URL of this distribution at the old version: the new version, URL-quoted
  (``1.0+gfx942`` as ``1.0%2Bgfx942``), and a ``file_name=`` of the old wheel: the new one;
- every other mention of the old wheel's file name: the new one;
- in a JSON document, a ``version`` (CycloneDX) or ``versionInfo`` (SPDX) beside this
  distribution's ``name`` at the old version: the new version (the document is then written
  out again as compact JSON; otherwise its bytes are kept as they were but for the names).

It reads and returns bytes; it knows nothing of zip files and writes nothing.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, unquote
import json

SBOM_DIR = "sboms/"
_PURL = rb"pkg:pypi/([A-Za-z0-9._%-]+)@([A-Za-z0-9._%+!-]+)(\?[^\s\"'#<>]*)?"  # compiled on first use


def is_sbom(name: str, dist_info: str) -> bool:
    """Whether member ``name`` is an SBOM of the wheel whose metadata folder is ``dist_info``."""
    return name.startswith(f"{dist_info}/{SBOM_DIR}") and not name.endswith("/")


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def renamed_sbom(data: bytes, old_wheel: str, new_wheel: str) -> bytes:
    """``data`` naming ``new_wheel`` (file name) wherever it named ``old_wheel``."""
    if old_wheel == new_wheel:
        return data

    dist, old_version = old_wheel.split("-")[:2]
    new_version = new_wheel.split("-")[1]
    old_q, new_q = quote(old_wheel, safe="").encode(), quote(new_wheel, safe="").encode()

    def purl(m: re.Match[bytes]) -> bytes:
        name, version, qualifiers = m.group(1), m.group(2), m.group(3) or b""
        if _canon(unquote(name.decode())) == _canon(dist) and unquote(version.decode()) == old_version:
            version = quote(new_version, safe="").encode()
        qualifiers = re.sub(rb"(?<=[?&]file_name=)" + re.escape(old_q) + rb"(?=&|$)", new_q, qualifiers)
        return b"pkg:pypi/" + name + b"@" + version + qualifiers

    out = re.sub(_PURL, purl, data).replace(old_wheel.encode(), new_wheel.encode())
    return _json_versions(out, dist, old_version, new_version)


def _json_versions(data: bytes, dist: str, old_version: str, new_version: str) -> bytes:
    """A JSON document's ``version``/``versionInfo`` fields of ``dist`` set to the new version."""

    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return data  # not JSON: the names are all there is to change
    changed = False
    stack: list[Any] = [doc]
    while stack:  # iterative: a deeply nested document must not exhaust the stack
        node = stack.pop()
        if isinstance(node, dict):
            name = node.get("name")
            if isinstance(name, str) and _canon(name) == _canon(dist):
                for key in ("version", "versionInfo"):
                    if node.get(key) == old_version:
                        node[key] = new_version
                        changed = True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    if not changed:
        return data
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")
