"""``rocm-build-backend thin``: a new wheel whose device code is exactly what loads on the
given targets.

The wheel is read member by member and written to a temporary file in the output folder,
moved into place only when everything succeeded. A member that may hold device code (an
ELF file, a bundle, a CCOB, a fatbin) is inflated into a bounded buffer (memory up to
``thin_zip.MEMORY_CAP``, beyond that a temporary file) and thinned by ``binary.rewrite``;
every other member's compressed bytes are copied as they are. RECORD is rebuilt from the
bytes written; the stamp (``.dist-info/rocm_build.json``) is updated or added with the new
targets, the audit of the new files, and ``thinned_from`` (the original wheel's name,
sha256 and targets). Exit codes of the errors raised here: 2 for input the command does not
take (a signed wheel, no device code, an unusual wheel), 1 when the wheel has no code for a
requested target, 3 for a damaged wheel or binary. Nothing prints here.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocm_build_backend.errors import FormatError, RocmBuildBackendError, TargetMismatchError, WheelError
from rocm_build_backend.gpu.targets import GpuTarget

SIGNATURES = ("RECORD.jws", "RECORD.p7s")
STAMP_NAME = "rocm_build.json"
COMPRESS_LEVEL = 6


class ThinInputError(RocmBuildBackendError):
    """A wheel ``thin`` does not take: signed, without device code, or unusual."""

    exit_code = 2


class NoCodeForTarget(TargetMismatchError):
    """The wheel holds no device code that loads on a requested target."""

    exit_code = 1


class DamagedWheel(WheelError):
    """A member, or a binary inside one, is damaged."""

    exit_code = 3


@dataclass
class MemberResult:
    name: str
    action: str  # unchanged, thinned, dropped, kept-whole
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    reason: str = ""
    size_before: int = 0
    size_after: int = 0
    layout: str = ""  # a thinned library: "compacted" or "in place"
    layout_reason: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.name, "action": self.action, "kept": _sorted(self.kept),
                               "dropped": _sorted(self.dropped), "size_before": self.size_before,
                               "size_after": self.size_after}
        if self.reason:
            out["reason"] = self.reason
        if self.layout:
            out["layout"] = self.layout
        if self.layout_reason:
            out["layout_reason"] = self.layout_reason
        return out


@dataclass
class ThinResult:
    source: Path
    output: Path
    targets: list[str]
    members: list[MemberResult] = field(default_factory=list)
    wheel_before: int = 0
    wheel_after: int = 0
    installed_before: int = 0
    installed_after: int = 0
    had: list[str] = field(default_factory=list)  # every device target the source held
    sha256: str = ""

    @property
    def kept_whole(self) -> list[MemberResult]:
        return [m for m in self.members if m.action == "kept-whole"]

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": 1, "source": str(self.source), "output": str(self.output),
                "targets": list(self.targets), "source_targets": _sorted(self.had),
                "source_sha256": self.sha256,
                "wheel_size": {"before": self.wheel_before, "after": self.wheel_after},
                "installed_size": {"before": self.installed_before, "after": self.installed_after},
                "files": [m.to_json() for m in self.members]}

    def to_text(self) -> str:
        lines = [f"{self.output}"]
        for m in self.members:
            what = {"thinned": f"kept {', '.join(_sorted(m.kept)) or 'nothing'}; dropped "
                               f"{', '.join(_sorted(m.dropped))}; {_mib(m.size_before)} -> {_mib(m.size_after)}"
                               + (f" (in place: {m.layout_reason})" if m.layout == "in place" else ""),
                    "dropped": f"removed (held {', '.join(_sorted(m.dropped))})",
                    "unchanged": f"unchanged ({', '.join(_sorted(m.kept))})",
                    "kept-whole": f"KEPT WHOLE: {m.reason}"}[m.action]
            lines.append(f"  {m.name}: {what}")
        lines.append(f"wheel {_mib(self.wheel_before)} -> {_mib(self.wheel_after)}; installed "
                     f"{_mib(self.installed_before)} -> {_mib(self.installed_after)}")
        return "\n".join(lines)


def _sorted(targets: list[str]) -> list[str]:
    from rocm_build_backend.binary.audit import sorted_targets

    return sorted_targets(targets)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _check_wheel(zf: zipfile.ZipFile, name: str) -> str:
    """The wheel's .dist-info folder, after refusing what thin does not take."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        parse_wheel_filename(name)
    except InvalidWheelFilename as exc:
        raise ThinInputError(f"{name} is not a valid wheel file name ({exc})",
                             hint="expected name-version[-build]-python-abi-platform.whl") from None
    infos = zf.infolist()
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        raise ThinInputError(f"{name} holds the same member twice", hint="rebuild the wheel")
    for i in infos:
        parts = i.filename.rstrip("/").split("/")
        if i.filename.startswith("/") or "\\" in i.filename or any(p in ("", ".", "..") for p in parts):
            raise ThinInputError(f"{name}: member {i.filename!r} is not a valid path inside a wheel")
        if i.flag_bits & 0x1:
            raise ThinInputError(f"{name}: member {i.filename} is encrypted", hint="thin takes unencrypted wheels")
    dirs = sorted({n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info") and "/" in n})
    if len(dirs) != 1:
        raise ThinInputError(f"{name} must hold exactly one .dist-info folder (found {len(dirs) or 'none'})")
    for sig in SIGNATURES:
        if f"{dirs[0]}/{sig}" in names:
            raise ThinInputError(f"{name} is signed ({sig}); a thinned wheel would not match its signature",
                                 hint="thin the unsigned wheel, then sign the result")
    for req in ("METADATA", "WHEEL", "RECORD"):
        if f"{dirs[0]}/{req}" not in names:
            raise ThinInputError(f"{name} has no {dirs[0]}/{req}", hint="rebuild the wheel")
    return dirs[0]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def output_name(source: str, new_version: str | None) -> str:
    if new_version is None:
        return source
    parts = source[: -len(".whl")].split("-")
    parts[1] = new_version
    return "-".join(parts) + ".whl"


def _refuse_existing(dst: Path, src: Path) -> None:
    if dst.resolve() == src.resolve():
        raise ThinInputError(f"the thinned wheel would replace its source {src}",
                             hint="give another --outdir")
    if not dst.exists():
        return
    from rocm_build_backend.wheel.stamp import read_stamp

    try:
        made_by_us = "thinned_from" in (read_stamp(dst) or {})
    except RocmBuildBackendError:
        made_by_us = False
    if not made_by_us:
        raise ThinInputError(f"{dst} exists and was not written by thin",
                             hint="remove it or give another --outdir")


def thin_wheel(wheel: str | os.PathLike[str], targets: list[GpuTarget], outdir: str | os.PathLike[str],
               *, new_version: str | None = None, keep_layout: bool = False) -> ThinResult:
    """Write the thinned wheel into ``outdir``; see the module docstring. ``keep_layout``: thinned
    libraries keep their size and layout (zeros where code was dropped), not compacted."""
    from rocm_build_backend.wheel import thin_write

    src = Path(wheel)
    out = Path(outdir)
    if not src.is_file():
        raise ThinInputError(f"no such wheel: {src}", hint="give the path of a .whl file")
    try:
        zf = zipfile.ZipFile(src)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise DamagedWheel(f"{src.name} is not a readable zip archive ({exc})",
                           hint="download or build the wheel again") from None
    with zf, open(src, "rb") as raw:
        dist_info = _check_wheel(zf, src.name)
        dst = out / output_name(src.name, new_version)
        _refuse_existing(dst, src)
        result = ThinResult(src, dst, [str(t) for t in targets], sha256=_sha256(src))
        created = _make_folder(out)
        fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".thin.tmp", dir=out)
        try:
            with os.fdopen(fd, "w+b") as fh:
                thin_write.write(zf, raw, fh, dist_info, targets, result, new_version, str(out),
                                 compact=not keep_layout)
                fh.flush()
                os.fsync(fh.fileno())
            _settle(result)
            os.replace(tmp, dst)
            tmp = ""
        except FormatError as exc:
            raise DamagedWheel(exc.message, hint="the wheel's device code is damaged; nothing was written") from None
        except DamagedWheel:
            raise
        except WheelError as exc:
            raise DamagedWheel(exc.message, hint="the wheel is damaged; nothing was written") from None
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError,
                RuntimeError) as exc:
            raise DamagedWheel(f"cannot thin {src.name}: {exc}", hint="nothing was written") from None
        finally:
            if tmp:
                os.unlink(tmp)
                if created:
                    _remove_if_empty(created, out)
    result.wheel_before, result.wheel_after = src.stat().st_size, dst.stat().st_size
    return result


def _make_folder(out: Path) -> Path | None:
    """Create ``out`` (and parents); return the topmost folder this created, if any."""
    top = None
    for folder in [out, *out.parents]:
        if folder.exists():
            break
        top = folder
    out.mkdir(parents=True, exist_ok=True)
    return top


def _remove_if_empty(top: Path, out: Path) -> None:
    """Remove the folders ``_make_folder`` created (``out`` up to ``top``) when empty."""
    folder = out
    try:
        while True:
            folder.rmdir()  # fails, and stops, on a folder that is not empty
            if folder == top:
                return
            folder = folder.parent
    except OSError:
        pass


def _settle(result: ThinResult) -> None:
    """Refuse a result with nothing to show for the requested targets (before the move)."""
    from rocm_build_backend.binary.audit import sorted_targets

    if not result.had:
        raise ThinInputError(f"{result.source.name} holds no GPU device code; there is nothing to thin",
                             hint="thin wheels with HIP or CUDA code; this one loads on any GPU as it is")
    kept = [t for m in result.members for t in m.kept]
    if not kept:
        raise NoCodeForTarget(
            f"{result.source.name} holds device code for {', '.join(sorted_targets(result.had))}; "
            f"none of it loads on {', '.join(result.targets)}",
            hint="pick targets the wheel has code for, or build the wheel for these targets")

