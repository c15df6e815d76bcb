"""Wheel variants (WheelNext, PEP 817/825 drafts): properties from a wheel's audit, and files.

What a variant wheel says about the GPUs it serves is derived from what its binaries hold
(``check.wheel_targets``: the stamp cross-checked with the audit), never from the targets a
build asked for. Each vendor speaks its own provider (``BuildVendor.variant``: namespace,
feature, how an installer finds it, and which values a wheel's code earns), in the format its
own code uses: ``amd :: gfx_arch :: <owner>`` (``rocm-bootstrap``) and ``nvidia :: sm_arch ::
<XY>_real | <X0>_virtual`` (``nvidia-variant-provider``); see ``gpu/<vendor>/variant.py``. A
value is earned only when the wheel loads on every device the provider offers it to.

Formats follow ``variantlib`` 0.2.2 (``variantlib/constants.py``): the file name ends in a
label ``[0-9a-z._]+`` (line 29) before ``.whl``; ``<name>-<version>.dist-info/variant.json``
(line 8) with ``$schema`` ``https://variants-schema.wheelnext.dev/v0.2.0.json`` (line 24),
``default-priorities.namespace``, ``providers`` and ``variants`` (label -> namespace ->
feature -> values, values ``[a-z0-9_.]+``, line 33); the index's
``<name>-<version>-variants.json`` has the same keys with every label of that version.

Pure functions except ``make_variant_wheel`` and ``read_variant`` (one wheel in, one out). This
module does not decide which wheel an installer picks; ``variantlib`` and the providers do.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterable, Mapping

from packaging.utils import parse_wheel_filename

from rocm_build_backend.errors import RocmBuildBackendError, WheelError
from rocm_build_backend.gpu.build import VariantProvider
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.gpu.vendor import vendor_of, vendors
from rocm_build_backend.wheel.facts import WheelTargets
from rocm_build_backend.wheel.reader import wheel_targets
from rocm_build_backend.wheel.stamp import rewrite_wheel
from rocm_build_backend.wheel.variant.names import LABEL_RE as LABEL_RE
from rocm_build_backend.wheel.variant.names import (
    split_variant_name as split_variant_name,
)
from rocm_build_backend.wheel.variant.names import variant_filename as variant_filename
from rocm_build_backend.wheel.variant.names import (
    variants_json_name as variants_json_name,
)
from rocm_build_backend.wheel.variant.shape import check_shape

SCHEMA_URL = "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json"
DIST_INFO_NAME = "variant.json"  # variantlib constants.py:8
NULL_LABEL = "null"  # variantlib constants.py:6
VALUE_RE = re.compile(r"[a-z0-9_.]+")  # variantlib constants.py:33
_MAX_VARIANT_JSON = 1 << 20
_SHORT_LABEL = 3  # up to this many values the label names them; more: a hash as variantlib makes
LABEL_MAX = 16  # PEP 817's limit on a label's length, which variantlib 0.0.x still enforces

Properties = dict[str, dict[str, list[str]]]


# --------------------------------------------------------------------------- providers and values


def providers() -> list[tuple[str, VariantProvider]]:
    """(vendor name, its provider) for each vendor that has one, in registry order."""
    out = []
    for vendor in vendors():
        found = build_side(vendor).variant
        if found is not None:
            out.append((vendor.name, found))
    return out


def _serves_all(facts: "WheelTargets", devices: Iterable[str]) -> bool:
    devices = list(devices)
    return bool(devices) and all(facts.verdict(d, generic_ok=True)[0] == "ok" for d in devices)


def properties_for(facts: "WheelTargets") -> Properties:
    """The variant properties a wheel's device code earns: ``{namespace: {feature: [values]}}``.

    ``{}`` for a wheel without device code (the null variant). Raises WheelError when what
    the wheel holds is not known.
    """
    if not facts.known:
        raise WheelError(
            f"{facts.path.name}: cannot tell what it holds: " + "; ".join(facts.problems),
            hint="rebuild the wheel; its binaries could not be read",
        )
    if not facts.has_device_code:
        return {}
    out: Properties = {}
    names = sorted({t for f in facts.files for t in f.complete})
    for vendor, provider in providers():
        mine = [t for t in names if vendor_of(t.split(":")[0]).name == vendor]
        found = provider.values(mine, lambda devices: _serves_all(facts, devices)) if mine else []
        if found:
            out[provider.namespace] = {provider.feature: found}
    return out


def property_lines(props: Mapping[str, Mapping[str, Iterable[str]]]) -> list[str]:
    """``namespace :: feature :: value`` lines, sorted (PEP 825's property notation)."""
    return sorted(f"{ns} :: {feat} :: {v}" for ns, feats in props.items() for feat, vals in feats.items() for v in vals)


def default_label(props: Mapping[str, Mapping[str, Iterable[str]]]) -> str:
    """``null``; the values joined by ``.`` (``gfx942``, ``80_real.90_real``) when there are at
    most three and that fits in 16 characters; else the first 8 hex digits of the sha256
    variantlib computes over the property lines (``VariantDescription.hexdigest``,
    models/variant.py): ``gfx1030.gfx908.gfx90a`` is too long and gets its hash. Either way the
    same properties give the same label, and ``variant.json`` records what it stands for."""
    lines = property_lines(props)
    if not lines:
        return NULL_LABEL
    values = [line.rsplit(" :: ", 1)[1] for line in lines]
    if len(values) <= _SHORT_LABEL and len(".".join(values)) <= LABEL_MAX:
        return ".".join(values)
    digest = hashlib.sha256()
    for line in lines:
        digest.update(f"{line}\n".encode())
    return digest.hexdigest()[:8]


def check_label(label: str, props: Mapping[str, Any]) -> str:
    if not LABEL_RE.fullmatch(label):
        raise RocmBuildBackendError(
            f"variant label {label!r} is not valid", hint="use lower-case letters, digits, '.' and '_'"
        )
    if len(label) > LABEL_MAX:
        raise RocmBuildBackendError(
            f"variant label {label!r} is longer than {LABEL_MAX} characters",
            hint="give a shorter label, or none for the default",
        )
    if (label == NULL_LABEL) != (not props):
        raise RocmBuildBackendError(
            f"the label {NULL_LABEL!r} belongs to the variant without properties, and only to it (got {label!r})",
            hint="choose another label",
        )
    return label


def variant_json(label: str, props: Properties, *, namespaces: Iterable[str] | None = None) -> dict[str, Any]:
    """The ``variant.json`` of one wheel (variantlib 0.2.2 ``VariantDistInfo``'s keys).

    ``namespaces``: the priority order to declare (every namespace the project's variants
    use, so all wheels of a version agree, as PEP 825 asks); default: those used here, in
    the vendor registry's order. A null variant declares the first vendor's namespace (the
    format asks for at least one).
    """
    check_label(label, props)
    known = {p.namespace: dict(p.provider) for _, p in providers()}
    used = [ns for ns in known if ns in props] + sorted(ns for ns in props if ns not in known)
    order = list(namespaces) if namespaces is not None else (used or list(known)[:1])
    missing = [ns for ns in used if ns not in order]
    if missing or not order:
        raise RocmBuildBackendError(f"namespaces {', '.join(missing) or '(none)'} are used but not declared")
    unknown = [ns for ns in order if ns not in known]
    if unknown:
        raise RocmBuildBackendError(f"no provider is known for namespace {', '.join(unknown)}")
    return {
        "$schema": SCHEMA_URL,
        "default-priorities": {"namespace": order},
        "providers": {ns: known[ns] for ns in order},
        "variants": {label: {ns: {f: sorted(v) for f, v in sorted(props[ns].items())} for ns in sorted(props)}},
    }


def dumps(data: Mapping[str, Any]) -> bytes:
    """JSON as variantlib writes it (``VariantsJson.to_str``: indent 4, sorted keys)."""
    return (json.dumps(data, indent=4, sort_keys=True) + "\n").encode("utf-8")


# --------------------------------------------------------------------------- the index file


def merge_variants(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One ``<name>-<version>-variants.json`` from the ``variant.json`` of each wheel of a version.

    Labels are united (one label must mean one property set); the namespace order is the
    longest of the wheels' orders when each is a prefix of it (PEP 825's rule), else the
    namespaces in first-seen order; providers must agree. Raises WheelError on a conflict.
    """
    variants: dict[str, Any] = {}
    orders: list[list[str]] = []
    providers: dict[str, Any] = {}
    for data in entries:
        for label, props in (data.get("variants") or {}).items():
            if label in variants and variants[label] != props:
                raise WheelError(
                    f"variant label {label!r} stands for two property sets: "
                    f"{property_lines(variants[label])} and {property_lines(props)}",
                    hint="give each build its own label",
                )
            variants[label] = props
        orders.append(list((data.get("default-priorities") or {}).get("namespace") or []))
        for ns, info in (data.get("providers") or {}).items():
            if ns in providers and providers[ns] != info:
                raise WheelError(
                    f"the wheels declare the provider of {ns!r} differently",
                    hint="build every variant with the same rocm-build-backend",
                )
            providers[ns] = info
    longest = max(orders, key=len, default=[])
    if all(o == longest[: len(o)] for o in orders):
        order = longest
    else:
        order = []
        for o in orders:
            order += [ns for ns in o if ns not in order]
    return {
        "$schema": SCHEMA_URL,
        "default-priorities": {"namespace": order},
        "providers": {ns: providers[ns] for ns in order if ns in providers},
        "variants": {label: variants[label] for label in sorted(variants)},
    }


def index_files(wheels: Iterable[tuple[str, str, Mapping[str, Any]]]) -> dict[str, bytes]:
    """``{<name>-<version>-variants.json: bytes}`` for each version with variant wheels.

    ``wheels``: (name, version, variant.json data) of each variant wheel an index serves
    (``read_variant`` gives the data). For ``index.py`` to write beside the wheels and link
    from every project page that lists them.
    """
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for name, version, data in wheels:
        groups.setdefault(variants_json_name(name, version), []).append(data)
    return {fname: dumps(merge_variants(datas)) for fname, datas in sorted(groups.items())}


def index_files_for(paths: Iterable[str | Path]) -> dict[str, bytes]:
    """``index_files`` for the wheels at ``paths`` (those without a label are passed over)."""
    entries = []
    for path in paths:
        found = read_variant(path)
        if found is None:
            continue
        base, _ = split_variant_name(Path(path).name)
        name, version, _, _ = parse_wheel_filename(base)
        entries.append((str(name), str(version), found[1]))
    return index_files(entries)


# --------------------------------------------------------------------------- one wheel


def read_variant(path: str | Path, filename: str | None = None) -> tuple[str, dict[str, Any]] | None:
    """(label, variant.json data) of a variant wheel; None for a wheel without a label.

    ``filename``: the wheel's own name, when ``path`` is a copy under another name.

    Raises WheelError when the label and the ``variant.json`` inside disagree, it is missing, or
    it is not of the format's shape (``checks.check_shape``).
    """
    path = Path(path)
    _, label = split_variant_name(filename or path.name)
    if label is None:
        return None
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/" + DIST_INFO_NAME)]
            if len(names) != 1:
                raise WheelError(f"{path.name} has a variant label but {len(names)} {DIST_INFO_NAME} files")
            info = zf.getinfo(names[0])
            if info.file_size > _MAX_VARIANT_JSON:
                raise WheelError(f"{names[0]} in {path.name} is too large ({info.file_size} bytes)")
            with zf.open(info) as fh:
                raw = fh.read(_MAX_VARIANT_JSON + 1)
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as exc:
        raise WheelError(f"cannot read {path.name} ({exc})") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise WheelError(f"{DIST_INFO_NAME} in {path.name} is not valid JSON ({type(exc).__name__})") from None

    return label, check_shape(data, label, filename or path.name)


def make_variant_wheel(
    wheel: str | Path,
    out_dir: str | Path | None = None,
    *,
    label: str | None = None,
    namespaces: Iterable[str] | None = None,
    facts: "WheelTargets | None" = None,
    keep_original: bool = True,
) -> Path:
    """Write a variant copy of ``wheel`` into ``out_dir`` (default: beside it); return its path.

    The properties come from the wheel's audit (``check.wheel_targets``; pass ``facts`` when
    they are at hand); ``variant.json`` is added to its ``.dist-info``, RECORD rebuilt
    (``stamp.rewrite_wheel``), the label appended to the file name. The original wheel is left
    as it is, unless ``keep_original=False`` (for the build, which made it): then it is
    removed once the variant wheel is in place. Raises WheelError for a wheel that cannot be
    read, RocmBuildBackendError for a bad label.
    """
    src = Path(wheel)
    if facts is None:
        facts = wheel_targets(src)
    props = properties_for(facts)
    if facts.has_device_code and not props:
        raise WheelError(
            f"{src.name}: no variant property describes where its code loads (it holds {', '.join(facts.targets)})",
            hint="build it for a target a provider knows, or publish it without a variant",
        )
    label = check_label(label or default_label(props), props)
    data = variant_json(label, props, namespaces=namespaces)
    out = Path(out_dir) if out_dir is not None else src.parent
    final = out / variant_filename(src.name, label)
    if final.exists():
        raise WheelError(f"{final} already exists", hint="remove it, or give this variant another label")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".variant-", dir=out))
    try:
        copy = work / src.name
        shutil.copyfile(src, copy)
        with zipfile.ZipFile(copy) as zf:
            dist_info = sorted({n.split("/", 1)[0] for n in zf.namelist() if n.split("/", 1)[0].endswith(".dist-info")})
        if len(dist_info) != 1:
            raise WheelError(f"{src.name} must hold exactly one .dist-info directory")
        done = rewrite_wheel(copy, stamp=None, extra_files={f"{dist_info[0]}/{DIST_INFO_NAME}": dumps(data)})
        os.replace(done, final)
    except (OSError, zipfile.BadZipFile) as exc:
        raise WheelError(f"cannot write {final.name} ({exc})") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not keep_original and src.resolve() != final.resolve():
        src.unlink()
    return final
