"""A wheel's zip as untrusted input: open it, find its ``.dist-info``, read a member with a limit.

Every other module of ``wheel/`` that opens a ``.whl`` goes through here, so that the rules for
an untrusted archive live in one place: a wheel file name is checked with ``packaging``, a
member is read whole only up to a limit (declared sizes are not trusted: the bytes are counted
as they inflate), and whatever ``zipfile`` raises for a damaged member is turned into a
``WheelError`` that names the member.

It holds no knowledge of stamps, pages or caches, writes nothing and extracts nothing to disk.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from rocm_build_backend.errors import WheelError

# Bounds for what is read whole into memory from an untrusted wheel.
MAX_STAMP = 1 << 20  # the stamp JSON
MAX_TEXT = 16 << 20  # METADATA, RECORD, a file handed to a patch function
MAX_METADATA = MAX_TEXT  # METADATA, also what index writes out as PEP 658 metadata
MAX_MEMBERS = 1_000_000


def wheel_name_parts(filename: str) -> list[str]:
    """The dash-separated parts of a wheel file name, checked with ``packaging``."""
    try:
        parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise WheelError(
            f"'{filename}' is not a valid wheel file name ({exc})",
            hint="expected name-version[-build]-python-abi-platform.whl",
        ) from None
    return filename[: -len(".whl")].split("-")


def open_wheel(path: Path) -> "zipfile.ZipFile":
    """``path`` opened as a zip archive; WheelError when it is missing or not a zip."""
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise WheelError(f"no such wheel: {path}") from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise WheelError(
            f"{path.name} is not a readable zip archive ({exc})", hint="rebuild the wheel; it may be truncated"
        ) from None
    return zf


def dist_info_dir(names: Iterable[str], filename: str) -> str:
    """The wheel's one ``.dist-info`` directory (a top-level folder with METADATA in it)."""
    dirs = sorted({n.split("/", 1)[0] for n in names if "/" in n and n.split("/", 1)[0].endswith(".dist-info")})
    if len(dirs) > 1:
        want = canonicalize_name(parse_wheel_filename(filename)[0])
        dirs = [d for d in dirs if canonicalize_name(d[: -len(".dist-info")].rsplit("-", 1)[0]) == want]
    if len(dirs) != 1:
        found = "none" if not dirs else ", ".join(dirs)
        raise WheelError(
            f"{filename} must hold exactly one .dist-info directory (found: {found})",
            hint="rebuild the wheel with its build backend",
        )
    return dirs[0]


def read_member(zf: "zipfile.ZipFile", info: "zipfile.ZipInfo", limit: int, what: str) -> bytes:
    """A member's bytes, at most ``limit`` of them; WheelError when it is larger."""
    if info.file_size > limit:
        raise WheelError(f"{info.filename} is {info.file_size} bytes, more than the {limit} allowed for {what}")
    with zf.open(info) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise WheelError(f"{info.filename} is larger than the {limit} bytes allowed for {what}")
    return data


def read_named(zf: "zipfile.ZipFile", name: str, limit: int, what: str) -> bytes:
    """The member ``name``, read whole up to ``limit`` bytes; WheelError for anything that fails.

    A member that is missing, larger than ``limit`` (counted as it inflates), damaged (a bad
    deflate stream, a CRC that does not match), encrypted, or compressed with a method this
    Python cannot inflate is a WheelError naming the member, never a ``zlib.error``,
    ``RuntimeError`` or ``NotImplementedError``.
    """
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise WheelError(f"{name} is missing", hint="is it a wheel?") from None
    try:
        return read_member(zf, info, limit, what)
    except WheelError:
        raise
    except NotImplementedError as exc:
        raise WheelError(
            f"{name} cannot be read: {exc} (compression method {info.compress_type})",
            hint="rebuild the wheel with a standard zip (deflate)",
        ) from None
    except RuntimeError as exc:  # zipfile raises it for an encrypted member
        why = "it is encrypted" if info.flag_bits & 0x1 else str(exc)
        raise WheelError(f"{name} cannot be read: {why}", hint="a wheel is never encrypted; rebuild it") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
        raise WheelError(f"{name} is damaged ({exc})", hint="rebuild or re-download the wheel") from None
