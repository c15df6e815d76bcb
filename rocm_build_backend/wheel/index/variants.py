"""The variants index of ``build_index(..., variants=True)``: ``OUT/variants/simple/``.

Variant wheels (WheelNext drafts; ``variant.py``) in WHEEL_DIR are listed in one index of their
own, whatever their targets, and never in the per-target indexes (pip cannot install them).
The same project pages list the plain wheels of the same projects as the fallback
(``listed``): an installer without the variants' provider (uv for AMD GPUs; any installer
without variant support) then finds the plain wheel, and PEP 825 ranks plain wheels after
every variant that fits, so one index serves both without ``--index-strategy``.
Beside them each project page links ``<name>-<version>-variants.json`` (``variant.index_files``
from the wheels' own ``variant.json``), which a variant-aware installer reads to learn every
label of that version and what it stands for. The JSON is hosted under its content's hash,
``OUT/files/<hash>/<name>-<version>-variants.json`` (with ``base_url``: ``OUT/files/<name>-...``,
to be uploaded beside the wheels), written before the pages that link to it and removed by the
state logic like a hosted wheel. It carries no ``data-core-metadata``: it is not a wheel.

Each wheel's ``variant.json`` is someone else's claim: it is read once, checked for shape and
against the audit of the wheel's binaries (``variant.checks``) before it is published; one that
fails, or that reuses a label of an earlier wheel of the version for other properties, is
skipped with the reason, and the other wheels are indexed.

It renders no page and removes nothing; ``index.py`` strings it into the run.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rocm_build_backend.errors import WheelError
from rocm_build_backend.wheel.index.files import HASH_DIR, Layout, Record
from rocm_build_backend.wheel.index.pages import Entry, normalize
from rocm_build_backend.wheel.reader import wheel_targets
from rocm_build_backend.wheel.variant.checks import check_claims, check_shape, merge_checked
from rocm_build_backend.wheel.variant.names import split_variant_name, variants_json_name
from rocm_build_backend.wheel.variant.properties import dumps, read_variant

INDEX = "variants"
JSON_SUFFIX = "-variants.json"


def variant_label(fn: str) -> tuple[str, str | None]:
    """(the file name without its variant label, the label or None); the name unchanged when
    it is not a variant wheel's."""
    try:
        return split_variant_name(fn)
    except WheelError:
        return fn, None


def read_variant_json(path: Path, filename: str) -> dict[str, Any]:
    """The ``variant.json`` of a variant wheel, once its shape and its claims (against the
    audit of the wheel's binaries) are checked; WheelError when it is missing or fails."""
    found = read_variant(path, filename)
    if found is None:
        raise WheelError(f"{filename} is not a variant wheel")
    label, data = found
    check_claims(data, label, wheel_targets(path, audit=True), filename)
    return data


def listed(wheels: dict[str, Record]) -> list[str]:
    """The wheels the variants index lists: every variant wheel, and each plain wheel of a
    project that has variant wheels (the fallback on the same project pages)."""
    projects = {normalize(str(rec["name"])) for rec in wheels.values() if "variant" in rec}
    return sorted(fn for fn, rec in wheels.items() if "variant" in rec or normalize(str(rec["name"])) in projects)


def json_path(lay: Layout, fn: str, sha256: str) -> Path:
    """Where a variants JSON is hosted: under its hash, or flat for upload beside the wheels."""
    if lay.base_url is not None:
        return lay.files_dir / fn
    return lay.files_dir / sha256[:HASH_DIR] / fn


def _checked(wheels: dict[str, Record], listed: list[str], skipped: dict[str, str]) -> dict[str, list[str]]:
    """The listed variant wheels whose record's variant.json has the format's shape (a record
    from an older state is checked again), grouped by their variants JSON file; the others
    skipped. The plain wheels listed as the fallback have no variants JSON."""
    groups: dict[str, list[str]] = {}
    for fn in listed:
        rec = wheels[fn]
        if "variant" not in rec:
            continue
        try:
            check_shape(rec.get("variant"), str(variant_label(fn)[1]), fn)
            jfn = variants_json_name(str(rec["name"]), str(rec["version"]))
        except WheelError as exc:
            skipped[fn] = exc.message
            continue
        groups.setdefault(jfn, []).append(fn)
    return groups


def json_files(
    lay: Layout, wheels: dict[str, Record], listed: list[str], skipped: dict[str, str]
) -> tuple[dict[Path, bytes], dict[str, list[Entry]], list[str]]:
    """The variants JSON files of the listed variant wheels, their entries per project page,
    and the wheels to list (the plain fallback wheels among ``listed`` stay). A wheel whose
    variant.json fails, or reuses an earlier wheel's label for other properties, goes to
    ``skipped`` with the reason; the rest are indexed."""
    files: dict[Path, bytes] = {}
    pages: dict[str, list[Entry]] = {}
    kept = [fn for fn in listed if "variant" not in wheels[fn]]
    for jfn, fns in sorted(_checked(wheels, listed, skipped).items()):
        merged, left_out = merge_checked([(fn, wheels[fn]["variant"]) for fn in fns])
        skipped.update(left_out)
        kept += [fn for fn in fns if fn not in left_out]
        data = dumps(merged)
        sha = hashlib.sha256(data).hexdigest()
        path = json_path(lay, jfn, sha)
        files[path] = data
        version = jfn[: -len(JSON_SUFFIX)].rsplit("-", 1)[1]
        norm = normalize(str(wheels[fns[0]]["name"]))
        page_dir = lay.out_dir / INDEX / "simple" / norm
        pages.setdefault(norm, []).append(
            (jfn, {"sha256": sha, "size": len(data), "version": version}, _href(lay, jfn, path, page_dir))
        )
    return files, pages, sorted(kept)


def _href(lay: Layout, fn: str, path: Path, page_dir: Path) -> str:
    if lay.base_url is not None:
        return f"{lay.base_url}/{quote(fn)}"
    rel = os.path.relpath(path, page_dir).replace(os.sep, "/")
    return "/".join(quote(part) for part in rel.split("/"))
