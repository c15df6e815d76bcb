"""Small valid wheels made by hand for the tests: a real RECORD, an optional stamp."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


SCHEMA = Path(__file__).resolve().parents[1] / "rocm_build_backend" / "data" / "stamp.schema.json"


def valid_stamp(stamp: dict) -> dict:
    """``stamp``, once it validates against the shipped ``stamp.schema.json`` (jsonschema)."""
    import jsonschema

    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(stamp)
    return stamp


def stamp_for(device: dict[str, list[str] | tuple[list[str], list[str]]], *, check: bool = True) -> dict:
    """A stamp (docs/stamp.md) whose audit found ``device``: member -> targets, or
    member -> (targets, complete). Validated against the shipped schema unless ``check`` is
    False (a hostile stamp made on purpose)."""
    files = {}
    for member, spec in device.items():
        targets, complete = spec if isinstance(spec, tuple) else (spec, spec)
        files[member] = {"targets": list(targets), "complete": list(complete)}
    union = sorted({t for f in files.values() for t in f["targets"]})
    common = set.intersection(*(set(f["complete"]) for f in files.values())) if files else set()
    stamp = {
        "schema_version": 1,
        "generator": {"name": "rocm-build-backend", "version": "0.1.0"},
        "requested": {"targets": union, "source": "settings"},
        "audit": {"targets": union, "complete": sorted(common), "files": files},
        "host": {"gpus": []},
        "toolchain": {"compiler": "hipcc", "version": "5.2.21153", "hip_version": None, "rocm_version": None},
    }
    return valid_stamp(stamp) if check else stamp


def make_wheel(folder: Path, name: str, version: str, *, device: dict | None = None,
               members: dict[str, bytes] | None = None, stamp: dict | bytes | bool | None = True,
               requires_python: str | None = None, dist: str | None = None,
               placeholder: bytes = b"placeholder for a library") -> Path:
    """A small valid wheel. ``device``: member -> targets for the stamp (members get
    ``placeholder`` bytes unless ``members`` gives them); ``stamp``: True (from ``device``),
    False (none), or the stamp itself (a dict, or raw bytes for a corrupt one)."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = dist or name.replace("-", "_").replace(".", "_")
    dist_info = f"{dist}-{version}.dist-info"
    files: dict[str, bytes] = {f"{dist}/__init__.py": f"VERSION = {version!r}\n".encode()}
    for member in device or {}:
        files[member] = placeholder
    files.update(members or {})
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if requires_python:
        meta += f"Requires-Python: {requires_python}\n"
    files[f"{dist_info}/METADATA"] = (meta + "\nA test package.\n").encode()
    files[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n\n"
    if stamp is True and device is not None:
        stamp = stamp_for(device)
    if isinstance(stamp, dict):
        files[f"{dist_info}/rocm_build.json"] = json.dumps(stamp, indent=2).encode()
    elif isinstance(stamp, bytes):
        files[f"{dist_info}/rocm_build.json"] = stamp
    record = [record_line(n, d) for n, d in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return path


def damage_member(path: Path, member: str, how: str) -> None:
    """Damage one member of a wheel in place, as a hostile or broken wheel would carry it.

    ``how``: ``corrupt`` (its compressed bytes overwritten), ``encrypted`` (the encryption flag
    set), ``method`` (an unknown compression method, 99), ``huge`` is made by ``huge_member``.
    The zip's directory stays readable, so only reading that member fails.
    """
    import struct

    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
        start_dir = zf.start_dir
    local = info.header_offset
    name_len, extra_len = struct.unpack("<HH", data[local + 26: local + 30])
    body = local + 30 + name_len + extra_len
    central = start_dir
    while data[central: central + 4] == b"PK\x01\x02":
        n, e, c = struct.unpack("<HHH", data[central + 28: central + 34])
        if data[central + 46: central + 46 + n].decode() == member:
            break
        central += 46 + n + e + c
    else:
        raise ValueError(f"{member} is not in the central directory")
    if how == "corrupt":
        for i in range(body, body + info.compress_size):
            data[i] = 0xFF
    elif how == "encrypted":
        for at in (local + 6, central + 8):
            struct.pack_into("<H", data, at, struct.unpack_from("<H", data, at)[0] | 0x1)
    elif how == "method":
        for at in (local + 8, central + 10):
            struct.pack_into("<H", data, at, 99)
    else:
        raise ValueError(how)
    path.write_bytes(bytes(data))


def huge_member(path: Path, member: str, size: int, head: bytes = b"") -> None:
    """Replace ``member`` with ``head`` and zeros up to ``size`` bytes (deflate makes it small)."""
    with zipfile.ZipFile(path) as zf:
        members = [(i, zf.read(i)) for i in zf.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, data in members:
            if info.filename == member:
                data = head + bytes(size - len(head))
            zf.writestr(info.filename, data)
