"""The pages of a static index: PEP 503 HTML and PEP 691 JSON, root and per project.

A root page lists every project (PEP 503 asks for all of them), one short line each, so it is
cheap to render once per run: about 40 bytes of HTML and 20 of JSON per project. ``top_html``
is the output folder's own page, a link to each index's ``simple/``.

Every anchor carries ``#sha256=``, ``data-requires-python`` and both ``data-core-metadata``
(PEP 714) and ``data-dist-info-metadata`` (PEP 658), but for a ``<name>-<version>-variants.json``
(it is not a wheel); names are normalised (PEP 503) and every
string written into HTML is escaped. The bytes are deterministic (sorted keys, sorted files),
so an unchanged page is not rewritten.

It renders bytes from records only: it reads no wheel and writes no file.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from packaging.version import InvalidVersion, Version

API_VERSION = "1.1"

# (file name, record, href) for one wheel on a project page
Entry = tuple[str, dict[str, Any], str]


def normalize(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def version_key(version: str) -> tuple[int, Any, str]:
    try:
        return (1, Version(version), version)
    except InvalidVersion:
        return (0, None, version)


def file_sort_key(rec: dict[str, Any], fn: str) -> tuple[int, Any, str]:
    try:
        v = Version(rec["version"])
        return (1, v, fn)
    except (InvalidVersion, TypeError):
        return (0, Version("0"), fn)


_HEAD = (
    "<!DOCTYPE html>\n<html>\n  <head>\n"
    f'    <meta name="pypi:repository-version" content="{API_VERSION}">\n'
    "    <title>{title}</title>\n  </head>\n  <body>\n"
)
_TAIL = "  </body>\n</html>\n"


def root_html(index: str, projects: list[tuple[str, str]]) -> bytes:
    out = [_HEAD.format(title=html.escape(f"Simple index ({index})"))]
    out += [f'<a href="{n}/">{n}</a>\n' for n in (html.escape(norm) for norm, _display in projects)]
    out.append(_TAIL)
    return "".join(out).encode("utf-8")


_TOP = _HEAD.format(title="Package indexes") + "    <h1>Package indexes</h1>\n"


def is_top_html(data: bytes) -> bool:
    """Whether a file's bytes are a page ``top_html`` wrote (else it is someone else's)."""
    return data.startswith(_TOP.encode("utf-8"))


def top_html(indexes: list[str]) -> bytes:
    """The output folder's page: one link per index to its ``simple/`` root."""
    out = [_TOP]
    out += [f'    <a href="{n}/simple/">{n}</a><br>\n' for n in (html.escape(name) for name in indexes)]
    out.append(_TAIL)
    return "".join(out).encode("utf-8")


def root_json(projects: list[tuple[str, str]]) -> bytes:
    doc = {"meta": {"api-version": API_VERSION}, "projects": [{"name": d} for _n, d in projects]}
    return (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")


def project_html(norm: str, entries: list[Entry]) -> bytes:
    out = [_HEAD.format(title=html.escape(f"Links for {norm}")), f"    <h1>Links for {html.escape(norm)}</h1>\n"]
    for fn, rec, href in entries:
        attrs = f' href="{html.escape(href + "#sha256=" + rec["sha256"])}"'
        if rec.get("requires_python"):
            attrs += f' data-requires-python="{html.escape(rec["requires_python"])}"'
        if rec.get("metadata_sha256"):  # a wheel; a variants JSON has no core metadata
            meta = html.escape("sha256=" + rec["metadata_sha256"])
            attrs += f' data-core-metadata="{meta}" data-dist-info-metadata="{meta}"'
        out.append(f"    <a{attrs}>{html.escape(fn)}</a><br>\n")
    out.append(_TAIL)
    return "".join(out).encode("utf-8")


def project_json(norm: str, entries: list[Entry]) -> bytes:
    files, versions = [], set()
    for fn, rec, href in entries:
        item = {
            "filename": fn,
            "url": href,
            "hashes": {"sha256": rec["sha256"]},
            "size": rec["size"],
        }
        if rec.get("metadata_sha256"):  # a wheel; a variants JSON has no core metadata
            item["core-metadata"] = item["dist-info-metadata"] = {"sha256": rec["metadata_sha256"]}
        if rec.get("requires_python"):
            item["requires-python"] = rec["requires_python"]
        files.append(item)
        if rec.get("version"):
            versions.add(rec["version"])
    doc = {
        "meta": {"api-version": API_VERSION},
        "name": norm,
        "files": files,
        "versions": sorted(versions, key=version_key),
    }
    return (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")
