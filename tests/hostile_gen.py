"""Generated hostile inputs for the verbs that write or run things: ``thin``, ``split``,
``index --split``/``--variants``, ``check --env``, ``install`` and ``configure``.

Used by the tests (``test_hostile_*.py`` in ``tests/unit`` and ``tests/integration``, through
``helpers.hostile``) and by ``bench/bench_wheel_hostile.py``. Each
generator makes a small input (a few KB to a few MB on disk) whose cost, before the budgets, grew
with a number it chooses freely: bytes a member or a compressed bundle inflates to, nesting
depth, symlinked spellings of one file, what a program prints.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import struct
import sys
import zipfile
import zlib
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "binaries"
MIB = 1 << 20


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(
    path: Path,
    members: dict[str, bytes],
    *,
    dist: str = "pkg-1.0",
    lies: dict[str, str] | None = None,
    streamed: dict[str, tuple[bytes, int]] | None = None,
) -> Path:
    """A wheel at ``path`` with ``members``, METADATA/WHEEL and a RECORD. ``lies``: member ->
    the RECORD row to write for it instead of the true one. ``streamed``: member -> (head, n):
    ``head`` then ``n`` zero bytes, written in chunks (never held whole) and listed in RECORD
    with its real hash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    name, version = dist.split("-")
    files = dict(members)
    files.setdefault(
        f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n".encode()
    )
    files.setdefault(
        f"{dist}.dist-info/WHEEL", b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-any\n\n"
    )
    rows = [(lies or {}).get(n, record_line(n, d)) for n, d in files.items()]
    big_rows = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in files.items():
            zf.writestr(n, d)
        for n, (head, count) in (streamed or {}).items():
            h = hashlib.sha256(head)
            info = zipfile.ZipInfo(n)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o100755 << 16
            with zf.open(info, "w", force_zip64=True) as w:
                w.write(head)
                zero = bytes(MIB)
                left = count
                while left:
                    piece = zero[: min(MIB, left)]
                    w.write(piece)
                    h.update(piece)
                    left -= len(piece)
            digest = base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()
            big_rows.append((lies or {}).get(n, f"{n},sha256={digest},{len(head) + count}"))
        rows += big_rows + [f"{dist}.dist-info/RECORD,,"]
        zf.writestr(f"{dist}.dist-info/RECORD", csv_rows(rows))
    return path


def csv_rows(rows: list[str]) -> bytes:
    """RECORD bytes from ``name,hash,size`` rows, written as a CSV writer does (a name with a
    comma or a newline quoted)."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for row in rows:
        name, hashed, size = row.rsplit(",", 2)
        writer.writerow([name, hashed, size])
    return buf.getvalue().encode()


def fat_members() -> dict[str, bytes]:
    """Real HIP fixtures with code for gfx90a and gfx942."""
    return {
        "pkg/_hip.so": (DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes(),
        "pkg/kernels/gfx942.hsaco": (DATA / "amdgpu_gfx942_cov5.hsaco").read_bytes(),
        "pkg/__init__.py": b"",
    }


def fat_wheel(folder: Path, name: str = "pkg-1.0-py3-none-any.whl", **kw: object) -> Path:
    return write_wheel(folder / name, fat_members(), **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- decompression bombs


def ccob_bomb(inflated: int) -> bytes:
    """A standalone CCOB v3 (zlib) whose bundle is a real two-target bundle (gfx90a, gfx942)
    followed by zeros, ``inflated`` bytes in all; its header says exactly that size."""
    base = (DATA / "synthetic_ccob_v2_zlib.bin").read_bytes()
    bundle = zlib.decompress(base[24:])
    pad = max(0, inflated - len(bundle))
    comp = zlib.compressobj(9)
    md5 = hashlib.md5(bundle)
    parts = [comp.compress(bundle)]
    zero = bytes(MIB)
    left = pad
    while left:
        piece = zero[: min(MIB, left)]
        parts.append(comp.compress(piece))
        md5.update(piece)
        left -= len(piece)
    parts.append(comp.flush())
    payload = b"".join(parts)
    digest = int.from_bytes(md5.digest()[:8], "little")
    return b"CCOB" + struct.pack("<HHQQQ", 3, 0, 32 + len(payload), len(bundle) + pad, digest) + payload


def ccob_bomb_wheel(folder: Path, inflated: int) -> Path:
    """A wheel of a few KB whose one device-code member is ``ccob_bomb(inflated)``."""
    return write_wheel(
        folder / "bomb-1.0-py3-none-any.whl",
        {"bomb/kernels.hipfb": ccob_bomb(inflated), "bomb/__init__.py": b""},
        dist="bomb-1.0",
    )


def zeros_after_elf_wheel(folder: Path, zeros: int) -> Path:
    """A wheel whose library is a real two-target HIP library followed by ``zeros`` zero bytes
    (deflate makes them about a thousandth of that)."""
    head = (DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes()
    return write_wheel(
        folder / "zeros-1.0-py3-none-any.whl",
        {"zeros/__init__.py": b""},
        dist="zeros-1.0",
        streamed={"zeros/_hip.so": (head, zeros)},
    )


def bad_header_elf_wheel(folder: Path, zeros: int) -> Path:
    """A member with ELF magic and a header that points nowhere, ``zeros`` bytes long."""
    head = b"\x7fELF\x02\x01\x01" + b"\xff" * 57
    return write_wheel(
        folder / "badelf-1.0-py3-none-any.whl",
        {"badelf/__init__.py": b""},
        dist="badelf-1.0",
        streamed={"badelf/_k.so": (head, zeros)},
    )


def lying_record_wheel(folder: Path, how: str) -> Path:
    """A two-target wheel whose RECORD lies about ``pkg/_hip.so`` (``hash``, ``size``) or
    leaves it out (``missing``), or about a plain member (``plain``)."""
    members = fat_members()
    other = record_line("pkg/_hip.so", b"something else")
    size = record_line("pkg/_hip.so", members["pkg/_hip.so"]).rsplit(",", 1)[0] + ",12"
    lies = {
        "hash": {"pkg/_hip.so": other},
        "size": {"pkg/_hip.so": size},
        "plain": {"pkg/__init__.py": record_line("pkg/__init__.py", b"x = 1\n")},
    }.get(how, {})
    path = write_wheel(folder / "pkg-1.0-py3-none-any.whl", members, lies=lies)
    if how == "missing":
        with zipfile.ZipFile(path) as zf:
            files = {i.filename: zf.read(i) for i in zf.infolist()}
        record = files["pkg-1.0.dist-info/RECORD"].decode()
        files["pkg-1.0.dist-info/RECORD"] = "".join(
            line + "\n" for line in record.splitlines() if not line.startswith("pkg/_hip.so,")
        ).encode()
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for n, d in files.items():
                zf.writestr(n, d)
    return path


# --------------------------------------------------------------------------- environments


def site_with_dist(
    site: Path, name: str = "gpupkg", files: dict[str, bytes] | None = None, record_rows: list[str] | None = None
) -> Path:
    """A distribution in ``site``: its files and a RECORD listing them (plus ``record_rows``)."""
    files = files if files is not None else {f"{name}/_hip.so": (DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes()}
    dist_info = site / f"{name}-1.0.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\n")
    rows = [record_line(rel, data) for rel, data in files.items()] + (record_rows or [])
    (dist_info / "RECORD").write_text("\n".join(rows + [f"{dist_info.name}/RECORD,,"]) + "\n")
    return dist_info


def plant(path: Path, how: str) -> None:
    """Replace ``path`` by a symlink to /dev/zero (``zero``) or a FIFO (``fifo``)."""
    if path.exists() or path.is_symlink():
        path.unlink()
    if how == "zero":
        path.symlink_to("/dev/zero")
    else:
        os.mkfifo(path)


def spellings(site: Path, n: int) -> Path:
    """One library listed ``n`` times in RECORD, each through another symlinked folder."""
    lib = (DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes()
    dist_info = site_with_dist(site, "spelled", {"spelled/_hip.so": lib})
    for i in range(n):
        (site / "spelled" / f"d{i}").symlink_to(".")
    tail = record_line("x", lib)[1:]  # ",sha256=...,size": the same bytes under every spelling
    rows = [f"spelled/d{i}/_hip.so{tail}" for i in range(n)]
    record = dist_info / "RECORD"
    record.write_text(record.read_text() + "\n".join(rows) + "\n")
    return dist_info


def program(folder: Path, name: str, body: str) -> Path:
    """An executable Python script (this interpreter) that stands for a hostile program."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


FLOOD = "import os, sys\nchunk = b'x' * (1 << 20)\nwhile True:\n    os.write(1, chunk)\n"
SLEEP = "import time\ntime.sleep(3600)\n"


def answers(text: str) -> str:
    """A program that prints ``text`` whatever it is asked."""
    return f"import sys\nsys.stdout.write({text!r})\n"


# --------------------------------------------------------------------------- pyproject.toml


def deep_toml(depth: int, kind: str) -> str:
    """A pyproject.toml whose one key holds arrays (``array``) or inline tables (``table``)
    nested ``depth`` deep."""
    if kind == "array":
        value = "[" * depth + "1" + "]" * depth
    else:
        value = "{a = " * depth + "1" + "}" * depth
    return f'[project]\nname = "deep"\nversion = "1.0"\n\n[tool.deep]\nx = {value}\n'


def variant_json(label: str, props: dict, namespaces: list | None = None) -> dict:
    """A ``variant.json`` for ``label`` as the shim writes it (props: namespace -> feature -> values)."""
    import copy

    from rocm_build_backend.wheel.variant.properties import SCHEMA_URL, providers

    props = copy.deepcopy(props)
    known = {p.namespace: dict(p.provider) for _, p in providers()}
    order = namespaces if namespaces is not None else [ns for ns in known if ns in props] or list(known)[:1]
    return {
        "$schema": SCHEMA_URL,
        "default-priorities": {"namespace": order},
        "providers": {ns: known.get(ns, {"requires": ["x"]}) for ns in order},
        "variants": {label: props},
    }


def variant_wheel(
    folder: Path, name: str, version: str, label: str, data: object, members: dict[str, bytes] | None = None
) -> Path:
    """A variant wheel ``<name>-<version>-py3-none-any-<label>.whl`` whose variant.json is
    ``data`` (any JSON, or bytes as they are)."""
    dist = f"{name}-{version}"
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    files = dict(
        members if members is not None else {f"{name}/_hip.so": (DATA / "hip_gfx90a_gfx942_cov5.so").read_bytes()}
    )
    files[f"{dist}.dist-info/variant.json"] = raw
    return write_wheel(folder / f"{dist}-py3-none-any-{label}.whl", files, dist=dist)
