"""The wheel stamp: ``<name>-<version>.dist-info/rocm_build.json``, and safe wheel rewriting.

``make_stamp`` builds the record (pure); ``rewrite_wheel`` adds it to a built wheel, optionally
renames the wheel to a new version (``local_version`` makes ``1.0+gfx942``), adds and patches
files, rewrites RECORD, and replaces the wheel atomically; ``read_stamp`` reads it back.
``rewrite_metadata_dir`` applies the same version to a prepared ``.dist-info`` directory so
that the prepared metadata and the wheel agree. The format is described in ``docs/stamp.md``.

Wheels are untrusted input: nothing is extracted to disk, every read is bounded, and a wheel
is rewritten completely or not at all (a temporary file in the same folder, then
``os.replace``). Heavy modules are imported inside the functions that need them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from collections.abc import Callable, Iterable, Mapping

from rocm_build_backend.errors import RocmBuildBackendError, WheelError

STAMP_NAME = "rocm_build.json"
SCHEMA_VERSION = 1
GENERATOR = "rocm-build-backend"

# Bounds for what is read whole into memory from an untrusted wheel.
_MAX_STAMP = 1 << 20  # the stamp JSON
_MAX_TEXT = 16 << 20  # METADATA, RECORD, a file handed to a patch function
_MAX_MEMBERS = 1_000_000
_CHUNK = 1 << 20
_TMP_SUFFIX = ".rocm-build-backend.tmp"
_TMP_RE = re.compile(r"^\..+\.(\d+)\.[A-Za-z0-9_]+" + re.escape(_TMP_SUFFIX) + "$")
_TOOLCHAIN_KEYS = ("compiler", "version", "hip_version", "rocm_version")
_SIGNATURES = ("RECORD.jws", "RECORD.p7s")


# --------------------------------------------------------------------------- the record


def _ordered_targets(values: Iterable) -> list[str]:
    """Target IDs in the stable sorted order, duplicates dropped; unparsable ones last, sorted."""
    from rocm_build_backend.gpu.targets import GpuTarget, parse_target, sort_targets

    known, unknown = [], set()
    for value in values:
        if isinstance(value, GpuTarget):
            known.append(value)
            continue
        try:
            known.append(parse_target(str(value)))
        except RocmBuildBackendError:
            unknown.add(str(value).strip().lower())
    return [str(t) for t in sort_targets(known)] + sorted(unknown - {""})


def make_stamp(
    *,
    requested: Iterable,
    source: str,
    audit_files: Mapping[str, Mapping],
    host_gpus: Iterable,
    toolchain: Mapping,
    version: str,
) -> dict:
    """The stamp record for one wheel (pure: a function of its arguments only).

    ``requested``: the targets the build asked for (GpuTarget or str); ``source`` where they
    came from (``settings``, ``PYTORCH_ROCM_ARCH``, ``detected:<probe>``); ``audit_files``:
    wheel member -> ``{"targets": [...], "complete": [...]}`` for each file with device code
    (other keys are dropped; ``complete`` defaults to ``targets``); ``host_gpus``: the build
    host's full target IDs; ``toolchain``: ``compiler`` (a name; a path is cut to its last
    part), ``version``, ``hip_version``, ``rocm_version`` (missing -> None; other keys are
    dropped); ``version``: rocm-build-backend's own version.
    """
    files: dict[str, dict] = {}
    for member in sorted(audit_files):
        entry = audit_files[member]
        found = _ordered_targets(entry.get("targets", ()))
        complete = _ordered_targets(entry.get("complete", found))
        files[member] = {"targets": found, "complete": [t for t in complete if t in found]}
    union: list[str] = _ordered_targets(t for f in files.values() for t in f["targets"])
    if files:
        common = set.intersection(*(set(f["complete"]) for f in files.values()))
        complete_all = [t for t in union if t in common]
    else:
        complete_all = []
    tool: dict[str, str | None] = {}
    for key in _TOOLCHAIN_KEYS:
        value = toolchain.get(key)
        value = None if value in (None, "") else str(value)
        if key == "compiler" and value:
            value = value.replace("\\", "/").rsplit("/", 1)[-1]
        tool[key] = value
    return {
        "schema_version": SCHEMA_VERSION,
        "generator": {"name": GENERATOR, "version": str(version)},
        "requested": {"targets": _ordered_targets(requested), "source": str(source)},
        "audit": {"targets": union, "complete": complete_all, "files": files},
        "host": {"gpus": _ordered_targets(host_gpus)},
        "toolchain": tool,
    }


def stamp_problems(data: object) -> list[str]:
    """What is wrong with a stamp's shape (the fields readers rely on); [] when it is fine.

    The full JSON Schema is ``data/stamp.schema.json``; this check needs no dependency.
    """

    def str_list(value: object) -> bool:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)

    if not isinstance(data, dict):
        return [f"the stamp is a JSON {type(data).__name__}, not an object"]
    problems = []
    version = data.get("schema_version")
    if type(version) is not int:
        return ["the stamp has no integer 'schema_version'"]
    if version != SCHEMA_VERSION:
        return [f"stamp schema version {version} is not {SCHEMA_VERSION}"]
    for key in ("generator", "requested", "audit", "host", "toolchain"):
        if not isinstance(data.get(key), dict):
            problems.append(f"'{key}' is missing or not an object")
    if problems:
        return problems
    if not str_list(data["requested"].get("targets")):
        problems.append("'requested.targets' is not a list of strings")
    if not isinstance(data["requested"].get("source"), str):
        problems.append("'requested.source' is not a string")
    audit = data["audit"]
    for key in ("targets", "complete"):
        if not str_list(audit.get(key)):
            problems.append(f"'audit.{key}' is not a list of strings")
    files = audit.get("files")
    if not isinstance(files, dict):
        problems.append("'audit.files' is not an object")
    else:
        for member, entry in files.items():
            if not (isinstance(entry, dict) and str_list(entry.get("targets")) and str_list(entry.get("complete"))):
                problems.append(f"'audit.files' entry {member!r} needs 'targets' and 'complete' lists")
                break
    if not str_list(data["host"].get("gpus")):
        problems.append("'host.gpus' is not a list of strings")
    for key in _TOOLCHAIN_KEYS:
        value = data["toolchain"].get(key, None)
        if value is not None and not isinstance(value, str):
            problems.append(f"'toolchain.{key}' is not a string or null")
    return problems


def stamp_bytes(stamp: Mapping) -> bytes:
    """The stamp as written into a wheel: indented JSON, UTF-8, a final newline."""
    import json

    return (json.dumps(stamp, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


# --------------------------------------------------------------------------- local version


def target_label(target) -> str:
    """One target as PEP 440 local-label segments (characters ``[a-z0-9.]``).

    The processor loses ``-`` and ``_`` (``gfx9-4-generic`` -> ``gfx94generic``, ``sm_90a`` ->
    ``sm90a``); each feature becomes its own segment after the processor, ``on`` for ``+``
    and ``off`` for ``-``: ``gfx90a:sramecc+:xnack-`` -> ``gfx90a.srameccon.xnackoff``. A
    segment that does not start with ``gfx``, ``sm`` or ``compute`` belongs to the target
    before it, so the label can be read back.
    """
    from rocm_build_backend.gpu.targets import GpuTarget, parse_target

    t = target if isinstance(target, GpuTarget) else parse_target(str(target))
    parts = [re.sub(r"[-_]", "", t.processor)]
    for feature in ("sramecc", "xnack"):
        mode = getattr(t, feature)
        if mode:
            parts.append(feature + ("on" if mode == "+" else "off"))
    return ".".join(parts)


def local_version(version: str, targets: Iterable) -> str:
    """``version`` with the targets merged into its PEP 440 local label.

    ``1.0`` -> ``1.0+gfx942``; ``2.5.1+rocm6.2`` -> ``2.5.1+rocm6.2.gfx942``; several targets in
    the stable sorted order (``1.0+gfx90a.gfx942``); features as in ``target_label``. The
    result is normalized. It is idempotent: a label that already ends with these targets is
    left as it is. No targets: the version, normalized, unchanged.
    """
    from packaging.version import InvalidVersion, Version

    from rocm_build_backend.gpu.targets import GpuTarget, parse_target, sort_targets

    try:
        parsed = Version(str(version))
    except InvalidVersion:
        raise RocmBuildBackendError(
            f"the project's version {version!r} is not a valid PEP 440 version",
            hint="fix the version, or turn off local-version",
        ) from None
    items = [t if isinstance(t, GpuTarget) else parse_target(str(t)) for t in targets]
    add = ".".join(target_label(t) for t in sort_targets(items)).split(".") if items else []
    if not add:
        return str(parsed)
    have = parsed.local.split(".") if parsed.local else []
    if have[len(have) - len(add):] == add:
        return str(parsed)
    return str(Version(f"{parsed.public}+{'.'.join(have + add)}"))


# --------------------------------------------------------------------------- wheel helpers


def _wheel_name_parts(filename: str) -> list[str]:
    """The dash-separated parts of a wheel file name, checked with ``packaging``."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise WheelError(
            f"'{filename}' is not a valid wheel file name ({exc})",
            hint="expected name-version[-build]-python-abi-platform.whl",
        ) from None
    return filename[: -len(".whl")].split("-")


def _open_wheel(path: Path):
    import zipfile

    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise WheelError(f"no such wheel: {path}") from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise WheelError(f"{path.name} is not a readable zip archive ({exc})",
                         hint="rebuild the wheel; it may be truncated") from None
    return zf


def _dist_info_dir(names: Iterable[str], filename: str) -> str:
    """The wheel's one ``.dist-info`` directory (a top-level folder with METADATA in it)."""
    dirs = sorted({n.split("/", 1)[0] for n in names if "/" in n and n.split("/", 1)[0].endswith(".dist-info")})
    if len(dirs) > 1:
        from packaging.utils import canonicalize_name, parse_wheel_filename

        want = canonicalize_name(parse_wheel_filename(filename)[0])
        dirs = [d for d in dirs if canonicalize_name(d[: -len(".dist-info")].rsplit("-", 1)[0]) == want]
    if len(dirs) != 1:
        found = "none" if not dirs else ", ".join(dirs)
        raise WheelError(
            f"{filename} must hold exactly one .dist-info directory (found: {found})",
            hint="rebuild the wheel with its build backend",
        )
    return dirs[0]


def _read_member(zf, info, limit: int, what: str) -> bytes:
    if info.file_size > limit:
        raise WheelError(f"{info.filename} is {info.file_size} bytes, more than the {limit} allowed for {what}")
    with zf.open(info) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise WheelError(f"{info.filename} is larger than the {limit} bytes allowed for {what}")
    return data


def set_metadata_version(metadata: bytes, new_version: str) -> bytes:
    """METADATA bytes with the header's ``Version:`` field set to ``new_version``."""
    text = metadata.decode("utf-8", "surrogateescape")
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if not line.strip():
            break  # end of the header; the body (description) follows
        if line.lower().startswith("version:"):
            ending = line[len(line.rstrip("\r\n")):]
            lines[i] = f"Version: {new_version}{ending}"
            return "".join(lines).encode("utf-8", "surrogateescape")
    raise WheelError("METADATA has no 'Version:' field", hint="rebuild the wheel with its build backend")


def _check_member_name(name: str, what: str) -> None:
    parts = name.split("/")
    if not name or name.startswith("/") or "\\" in name or name.endswith("/") or any(p in ("", ".", "..") for p in parts):
        raise WheelError(f"{what} {name!r} is not a valid path inside a wheel")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def clean_stale_temps(folder: Path) -> list[Path]:
    """Remove temporary wheels left in ``folder`` by a rewrite that was killed; return them."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        m = _TMP_RE.match(entry.name)
        if m and entry.is_file(follow_symlinks=False) and not _pid_alive(int(m.group(1))):
            try:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
            except OSError:
                pass
    return removed


def _emit(dst, chunk: bytes) -> None:
    """Every byte of member data written to the new wheel goes through here."""
    dst.write(chunk)


def _copy_stream(src, dst, digest) -> int:
    """Copy a member in bounded chunks, hashing as it goes; returns the byte count."""
    size = 0
    while True:
        chunk = src.read(_CHUNK)
        if not chunk:
            return size
        digest.update(chunk)
        _emit(dst, chunk)
        size += len(chunk)


def _can_copy_raw(zout, info) -> bool:
    """Whether ``info`` can be copied without recompressing (stored or deflated, not encrypted)."""
    import zipfile

    return (
        info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
        and not info.flag_bits & 0x1
        and all(hasattr(zout, a) for a in ("fp", "start_dir", "filelist", "NameToInfo", "_writecheck", "_writing"))
        and not zout._writing
    )


def _copy_raw(src_fp, src_size: int, info, zout, zinfo, digest) -> int:
    """Copy a member's compressed bytes as they are; inflate on the side only to hash and check.

    Recompressing a large extension module costs far more than reading it; the bytes written
    are the same compressed stream the backend made. The CRC and size are checked against the
    central directory, so a damaged member is refused, not copied.
    """
    import struct
    import zipfile
    import zlib

    src_fp.seek(info.header_offset)
    head = src_fp.read(30)
    if len(head) != 30 or head[:4] != b"PK\x03\x04":
        raise WheelError(f"{info.filename}: no local file header where the directory says")
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    start = info.header_offset + 30 + name_len + extra_len
    if start + info.compress_size > src_size:
        raise WheelError(f"{info.filename}: its data runs past the end of the wheel")
    src_fp.seek(start)

    zinfo.compress_type = info.compress_type
    zinfo.file_size = info.file_size
    zinfo.compress_size = info.compress_size
    zinfo.CRC = info.CRC
    zinfo.flag_bits = 0
    zip64 = info.file_size > zipfile.ZIP64_LIMIT or info.compress_size > zipfile.ZIP64_LIMIT
    out = zout.fp
    out.seek(zout.start_dir)
    zinfo.header_offset = out.tell()
    zout._writecheck(zinfo)
    zout._didModify = True
    out.write(zinfo.FileHeader(zip64))

    inflate = zlib.decompressobj(-15) if info.compress_type == zipfile.ZIP_DEFLATED else None
    size = crc = 0
    left = info.compress_size

    def take(data: bytes) -> None:
        nonlocal size, crc
        size += len(data)
        if size > info.file_size:
            raise WheelError(f"{info.filename} is damaged: it inflates past its recorded size")
        crc = zlib.crc32(data, crc)
        digest.update(data)

    try:
        while left:
            chunk = src_fp.read(min(_CHUNK, left))
            if not chunk:
                raise WheelError(f"{info.filename}: the wheel ends inside it")
            left -= len(chunk)
            _emit(out, chunk)
            if inflate is None:
                take(chunk)
                continue
            data = inflate.decompress(chunk, _CHUNK)
            while data:
                take(data)
                data = inflate.decompress(inflate.unconsumed_tail, _CHUNK) if inflate.unconsumed_tail else b""
        if inflate is not None:
            take(inflate.flush())
            if not inflate.eof:
                raise WheelError(f"{info.filename} is damaged: its deflate stream is cut short")
    except zlib.error as exc:
        raise WheelError(f"{info.filename} is damaged: {exc}") from None
    if size != info.file_size or crc != info.CRC:
        raise WheelError(f"{info.filename} is damaged: its size or CRC differs from the zip directory")
    zout.start_dir = out.tell()
    zout.filelist.append(zinfo)
    zout.NameToInfo[zinfo.filename] = zinfo
    return size


def _record_hash(digest) -> str:
    import base64

    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- rewrite


def rewrite_wheel(
    wheel_path: str | os.PathLike,
    *,
    stamp: Mapping | None,
    new_version: str | None = None,
    extra_files: Mapping[str, bytes] | None = None,
    patch_files: Mapping[str, Callable[[bytes], bytes]] | None = None,
) -> Path:
    """Rewrite a wheel in place: stamp, optional new version, added and patched files, RECORD.

    - ``stamp``: written as ``.dist-info/rocm_build.json`` (replacing one already there);
      None keeps whatever stamp the wheel has.
    - ``new_version``: renames the ``.dist-info`` (and ``.data``) directory, sets METADATA
      ``Version:`` and renames the file; the old file is removed only after the new one exists.
    - ``extra_files``: archive path -> bytes; replaces a member of that name in place, or adds
      it before the ``.data``/``.dist-info`` members. Paths under the wheel's ``.dist-info``
      use its current name and follow the rename.
    - ``patch_files``: archive path -> function(old bytes) -> new bytes.

    Unchanged members are copied compressed as they are (inflated on the side to hash them and
    check their CRC), so a large extension module is not recompressed. Every member keeps its
    order, compression, date and external attributes (file mode); new members get mode 0644,
    deflate, and the date of the old RECORD (reproducible output). RECORD is rebuilt from
    the bytes written (sha256, urlsafe base64 without padding, size); signature files
    (RECORD.jws, RECORD.p7s) are dropped since they no longer match. The new wheel is written
    to a temporary file in the same folder and moved over with ``os.replace``: if this is
    interrupted the original is untouched, and a leftover temporary file is removed by the
    next rewrite in that folder. Returns the path of the rewritten wheel.
    """
    import zipfile

    src = Path(wheel_path)
    parts = _wheel_name_parts(src.name)
    clean_stale_temps(src.parent)
    extra = dict(extra_files or {})
    patches = dict(patch_files or {})
    for name in extra:
        _check_member_name(name, "extra file")
        if not isinstance(extra[name], (bytes, bytearray)):
            raise WheelError(f"extra file {name!r} must be bytes")
    for name in patches:
        _check_member_name(name, "patched file")

    zin = _open_wheel(src)
    tmp_path: Path | None = None
    try:
        with zin:
            infos = zin.infolist()
            if len(infos) > _MAX_MEMBERS:
                raise WheelError(f"{src.name} has {len(infos)} members, more than {_MAX_MEMBERS}")
            names = [i.filename for i in infos]
            if len(set(names)) != len(names):
                from collections import Counter

                dup = sorted(n for n, k in Counter(names).items() if k > 1)[:3]
                raise WheelError(f"{src.name} holds duplicate members: {', '.join(dup)}",
                                 hint="rebuild the wheel with its build backend")
            dist_info = _dist_info_dir(names, src.name)
            base = dist_info[: -len(".dist-info")]
            required = [f"{dist_info}/{n}" for n in ("METADATA", "WHEEL", "RECORD")]
            missing = [n for n in required if n not in names]
            if missing:
                raise WheelError(f"{src.name} lacks {', '.join(missing)}", hint="rebuild the wheel with its build backend")
            for name in extra:
                top = name.split("/", 1)[0]
                if top.endswith(".dist-info") and top != dist_info:
                    raise WheelError(f"extra file {name!r} is not in the wheel's {dist_info}")
                if name in required:
                    raise WheelError(f"extra file {name!r} would replace the wheel's own {name.rsplit('/', 1)[1]}")
            unknown = sorted(set(patches) - set(names))
            if unknown:
                raise WheelError(f"cannot patch {', '.join(unknown)}: not in {src.name}")

            # Names: what the version change renames.
            new_base = base
            new_parts = list(parts)
            if new_version is not None:
                new_version = _normalized_version(new_version)
                new_base = f"{base.rsplit('-', 1)[0]}-{new_version}"
                new_parts[1] = new_version
            rename = {f"{base}.dist-info": f"{new_base}.dist-info", f"{base}.data": f"{new_base}.data"}

            def renamed(name: str) -> str:
                top, sep, rest = name.partition("/")
                return rename.get(top, top) + sep + rest

            stamp_name = f"{dist_info}/{STAMP_NAME}"
            if stamp is not None:
                extra[stamp_name] = stamp_bytes(stamp)
            record_info = zin.getinfo(f"{dist_info}/RECORD")
            new_date = record_info.date_time

            # The order: existing members (replaced in place), new package files before the
            # first .data/.dist-info member, new dist-info files just before RECORD.
            added = [n for n in extra if n not in names]
            added_pkg = [n for n in added if not n.split("/", 1)[0].endswith((".dist-info", ".data"))]
            added_meta = [n for n in added if n not in added_pkg]
            plan: list[tuple[str, object]] = []  # (old name, ZipInfo or None for new)
            inserted = False
            for info in infos:
                top = info.filename.split("/", 1)[0]
                if not inserted and top in rename:
                    plan.extend((n, None) for n in added_pkg)
                    inserted = True
                if info.filename == record_info.filename:
                    continue
                if top == dist_info and info.filename.rsplit("/", 1)[-1] in _SIGNATURES:
                    continue
                plan.append((info.filename, info))
            if not inserted:
                plan.extend((n, None) for n in added_pkg)
            plan.extend((n, None) for n in added_meta)

            new_name = "-".join(new_parts) + ".whl"
            dst = src.with_name(new_name)
            import tempfile

            fd, tmp = tempfile.mkstemp(prefix=f".{new_name}.{os.getpid()}.", suffix=_TMP_SUFFIX, dir=src.parent)
            tmp_path = Path(tmp)
            with os.fdopen(fd, "w+b") as fh, open(src, "rb") as raw:
                _write_members(zin, raw, fh, plan, extra, patches, renamed, new_version,
                               dist_info, new_date, record_info)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                mode = os.stat(src).st_mode & 0o7777
                os.chmod(tmp_path, mode)
            except OSError:
                pass
            os.replace(tmp_path, dst)
            tmp_path = None
            if dst != src:
                os.unlink(src)
            _fsync_dir(src.parent)
            return dst
    except RocmBuildBackendError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, KeyError,
            NotImplementedError, RuntimeError) as exc:
        raise WheelError(f"cannot rewrite {src.name}: {exc}",
                         hint="the original wheel is unchanged; rebuild it if it is damaged") from None
    finally:
        if tmp_path is not None:
            try:
                os.unlink(tmp_path)
            except OSError:
                pass


def _normalized_version(version: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        return str(Version(version))
    except InvalidVersion:
        raise WheelError(f"new version {version!r} is not a valid PEP 440 version") from None


def _write_members(zin, raw, fh, plan, extra, patches, renamed, new_version, dist_info, new_date, record_info):
    """Write the planned members and a fresh RECORD to ``fh``; return the RECORD rows."""
    import csv
    import hashlib
    import io
    import zipfile

    rows: list[tuple[str, str, str]] = []
    raw_size = os.fstat(raw.fileno()).st_size
    with zipfile.ZipFile(fh, "w") as zout:
        for old_name, info in plan:
            name = renamed(old_name)
            if info is None:
                zinfo = zipfile.ZipInfo(name, date_time=new_date)
                zinfo.compress_type = zipfile.ZIP_DEFLATED
                zinfo.create_system = 3
                zinfo.external_attr = (0o100644 << 16)
            else:
                zinfo = zipfile.ZipInfo(name, date_time=info.date_time)
                zinfo.compress_type = info.compress_type
                zinfo.create_system = info.create_system
                zinfo.external_attr = info.external_attr
                zinfo.comment = info.comment
            if old_name.endswith("/"):  # a directory entry: no RECORD row
                zout.writestr(zinfo, b"")
                continue
            data: bytes | None = None
            if old_name in extra:
                data = bytes(extra[old_name])
            elif old_name in patches:
                data = patches[old_name](_read_member(zin, info, _MAX_TEXT, "a patched file"))
                if not isinstance(data, (bytes, bytearray)):
                    raise WheelError(f"the patch for {old_name} returned {type(data).__name__}, not bytes")
            elif old_name == f"{dist_info}/METADATA" and new_version is not None:
                data = set_metadata_version(_read_member(zin, info, _MAX_TEXT, "METADATA"), new_version)
            digest = hashlib.sha256()
            if data is not None:
                zinfo.file_size = len(data)
                with zout.open(zinfo, "w") as w:
                    size = _copy_stream(io.BytesIO(data), w, digest)
            elif _can_copy_raw(zout, info):
                size = _copy_raw(raw, raw_size, info, zout, zinfo, digest)
            else:
                zinfo.file_size = info.file_size
                with zin.open(info) as r, zout.open(zinfo, "w") as w:
                    size = _copy_stream(r, w, digest)
            rows.append((name, _record_hash(digest), str(size)))
        record_name = renamed(record_info.filename)
        rows.append((record_name, "", ""))
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        rinfo = zipfile.ZipInfo(record_name, date_time=record_info.date_time)
        rinfo.compress_type = record_info.compress_type
        rinfo.create_system = record_info.create_system
        rinfo.external_attr = record_info.external_attr or (0o100644 << 16)
        zout.writestr(rinfo, buf.getvalue().encode("utf-8"))
    return rows


# --------------------------------------------------------------------------- prepared metadata


def rewrite_metadata_dir(
    metadata_dir: str | os.PathLike,
    new_version: str,
    *,
    extra_files: Mapping[str, bytes] | None = None,
) -> str:
    """Give a prepared ``.dist-info`` directory the version the wheel will have.

    ``metadata_dir`` is the folder handed to ``prepare_metadata_for_build_*`` (holding one
    ``.dist-info``) or the ``.dist-info`` folder itself. METADATA ``Version:`` is set and the
    folder renamed ``<name>-<new version>.dist-info``; ``extra_files`` (file name -> bytes)
    are written into it. Returns the new folder's base name, which the hook must return.
    """
    path = Path(metadata_dir)
    if path.name.endswith(".dist-info"):
        dist_info = path
    else:
        found = sorted(p for p in path.glob("*.dist-info") if p.is_dir())
        if len(found) != 1:
            raise WheelError(f"{path} must hold exactly one .dist-info directory (found {len(found)})")
        dist_info = found[0]
    new_version = _normalized_version(new_version)
    metadata = dist_info / "METADATA"
    try:
        old = metadata.read_bytes()
        new = set_metadata_version(old, new_version)
        if new != old:
            tmp = metadata.with_name(".METADATA" + _TMP_SUFFIX)
            tmp.write_bytes(new)
            os.replace(tmp, metadata)
        for name, data in (extra_files or {}).items():
            if "/" in name or name in ("", ".", "..", "METADATA"):
                raise WheelError(f"extra metadata file {name!r} must be a plain file name")
            tmp = dist_info / f".{name}{_TMP_SUFFIX}"
            tmp.write_bytes(bytes(data))
            os.replace(tmp, dist_info / name)
        target = dist_info.with_name(f"{dist_info.name[: -len('.dist-info')].rsplit('-', 1)[0]}-{new_version}.dist-info")
        if target != dist_info:
            if target.exists():
                raise WheelError(f"cannot rename {dist_info.name}: {target.name} already exists")
            os.rename(dist_info, target)
    except FileNotFoundError as exc:
        raise WheelError(f"cannot update prepared metadata in {dist_info}: {exc.strerror}: {exc.filename}") from None
    except OSError as exc:
        raise WheelError(f"cannot update prepared metadata in {dist_info}: {exc}") from None
    return target.name


# --------------------------------------------------------------------------- reading


def read_stamp(wheel_path: str | os.PathLike) -> dict | None:
    """The wheel's stamp, or None when it has none (a wheel not built through the shim).

    Raises WheelError for an unreadable wheel, a stamp that is not JSON, a stamp written by a
    newer schema version, or one whose shape is wrong.
    """
    import json
    import zipfile

    path = Path(wheel_path)
    zf = _open_wheel(path)
    try:
        with zf:
            names = zf.namelist()
            if len(names) > _MAX_MEMBERS:
                raise WheelError(f"{path.name} has {len(names)} members, more than {_MAX_MEMBERS}")
            dist_info = _dist_info_dir(names, path.name)
            name = f"{dist_info}/{STAMP_NAME}"
            if name not in names:
                return None
            raw = _read_member(zf, zf.getinfo(name), _MAX_STAMP, "the stamp")
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
        raise WheelError(f"cannot read the stamp of {path.name}: {exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WheelError(
            f"the stamp {name} in {path.name} is not valid JSON ({exc})",
            hint="rebuild the wheel through rocm-build-backend",
        ) from None
    if isinstance(data, dict) and type(data.get("schema_version")) is int and data["schema_version"] > SCHEMA_VERSION:
        raise WheelError(
            f"the stamp in {path.name} has schema version {data['schema_version']}; "
            f"this rocm-build-backend reads version {SCHEMA_VERSION}",
            hint="upgrade rocm-build-backend",
        )
    problems = stamp_problems(data)
    if problems:
        raise WheelError(
            f"the stamp {name} in {path.name} is not a valid rocm-build-backend stamp: " + "; ".join(problems),
            hint="rebuild the wheel through rocm-build-backend",
        )
    return data


def stamp_targets(stamp: Mapping) -> list[str]:
    """The targets a stamp says the wheel was built for (requested)."""
    return list(stamp.get("requested", {}).get("targets", []))
