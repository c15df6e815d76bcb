"""``rocm-build-backend thin``: a new wheel whose device code is exactly what loads on the
given targets.

The wheel is read member by member and written to a temporary file in the output folder
(``.<wheel>.<pid>.<random>.thin.tmp``; a later run removes those whose process is gone),
moved into place only when everything succeeded. The output folder must be a folder one can
write; the output name must be free or an earlier thin result for the same targets (another
one is replaced only with ``force``). Inflating is bounded by one budget per wheel (64 times
its size plus 64 MiB, ``binary.budget``) and RECORD must match every member. A member that
may hold device code (an ELF file, a bundle, a CCOB, a fatbin) is inflated into a bounded
buffer (memory up to ``thin.stream.MEMORY_CAP``, beyond that a temporary file) and thinned by
``binary.rewrite``;
every other member's compressed bytes are copied as they are. RECORD is rebuilt from the
bytes written; the stamp (``.dist-info/rocm_build.json``) is updated or added with the new
targets, the audit of the new files, and ``thinned_from`` (the original wheel's name,
sha256 and targets). Exit codes of the errors raised here: 2 for input the command does not
take (a signed wheel, no device code, an unusual wheel), 1 when the wheel has no code for a
requested target, 3 for a damaged wheel or binary. A wheel written is exit 0, or 1
(``ThinResult.exit_code``) when it is not the wheel asked for: a file kept whole still holds code
for other GPUs, or a requested target has no code in it. Nothing prints here (``cli/render.py``
lays the result out as text).
"""

from __future__ import annotations

import errno
import hashlib
import os
import zipfile
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from rocm_build_backend import files
from rocm_build_backend.binary.budget import BudgetExceeded, budget_for
from rocm_build_backend.binary.report import sorted_targets
from rocm_build_backend.errors import FormatError, RocmBuildBackendError, WheelError
from rocm_build_backend.files import check_output_name, why_not_written
from rocm_build_backend.gpu.targets import GpuTarget, sort_targets, vendor_name
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.wheel.record import RecordMismatch
from rocm_build_backend.wheel.label import label_targets, relabel
from rocm_build_backend.wheel.stamp import read_stamp, rewrite_wheel
from rocm_build_backend.wheel.thin import write as thin_write
from rocm_build_backend.wheel.thin.result import (
    SIGNATURES,
    DamagedWheel,
    MemberResult,
    NoCodeForTarget,
    ThinInputError,
    ThinResult,
)
from rocm_build_backend.binary.rewrite_plan import CannotThin, Selector

__all__ = [
    "thin_wheel",
    "output_name",
    "refuse_existing",
    "held_devices",
    "DamagedWheel",
    "MemberResult",
    "NoCodeForTarget",
    "ThinInputError",
    "ThinResult",
]


def _check_wheel(zf: zipfile.ZipFile, name: str) -> str:
    """The wheel's .dist-info folder, after refusing what thin does not take."""
    try:
        parse_wheel_filename(name)
    except InvalidWheelFilename as exc:
        raise ThinInputError(
            f"{name} is not a valid wheel file name ({exc})",
            hint="expected name-version[-build]-python-abi-platform.whl",
        ) from None
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
            raise ThinInputError(
                f"{name} is signed ({sig}); a thinned wheel would not match its signature",
                hint="thin the unsigned wheel, then sign the result",
            )
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


def refuse_existing(dst: Path, src: Path, targets: list[str], force: bool) -> None:
    """Refuse to replace the source, a name taken by anything but a regular file, a file thin
    did not write, or (without ``force``) a thin result for other targets."""
    if dst.resolve() == src.resolve():
        raise ThinInputError(f"the thinned wheel would replace its source {src}", hint="give another --outdir")
    if not check_output_name(dst):
        return
    try:
        stamp = read_stamp(dst) or {}
    except RocmBuildBackendError:
        stamp = {}
    if "thinned_from" not in stamp:
        raise ThinInputError(f"{dst} exists and was not written by thin", hint="remove it or give another --outdir")
    requested = stamp.get("requested")
    before = requested.get("targets") if isinstance(requested, dict) else None
    if before != targets and not force:
        held = ", ".join(map(str, before)) if isinstance(before, list) else "other targets"
        raise ThinInputError(
            f"{dst} is a thin result for {held}; it is not replaced by one for {', '.join(targets)}",
            hint="give another --outdir, or --force to replace it",
        )


def held_devices(held: list[str]) -> list[GpuTarget]:
    """The devices a wheel's code is for, as labels and ``split`` name them: each code target's
    device as its vendor says (``BuildVendor.device_of``: ``gfx90a:xnack-`` -> ``gfx90a``,
    ``sm_90a`` and PTX-only ``compute_90`` -> ``sm_90``)."""
    out = set()
    for text in held:
        code = GpuTarget(text.split(":", 1)[0])
        out.add(build_side(vendor_name(code)).device_of(code))
    return sort_targets(out)


def _file_mode() -> int:
    """The mode a new file gets under this process's umask (0644 under the usual 022)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no /proc: read it by setting it, and put it back at once
    os.umask(mask)
    return 0o666 & ~mask


def thin_wheel(
    wheel: str | os.PathLike[str],
    targets: list[GpuTarget],
    outdir: str | os.PathLike[str],
    *,
    new_version: str | None = None,
    force: bool = False,
    keep_layout: bool = False,
) -> ThinResult:
    """Write the thinned wheel into ``outdir``; see the module docstring. ``force``: replace
    an earlier thin result for other targets under the same name. ``keep_layout``: thinned
    libraries keep their size and layout (zeros where code was dropped), not compacted.

    ``new_version``: the output's version (``split`` gives each wheel its label). Without it a
    wheel whose local label names targets (``1.0+gfx908.gfx90a``) gets a label naming what the
    thinned wheel holds (``1.0+gfx908``); a wheel without such a label keeps its name. An
    output never takes its input's place: that is refused (exit 2)."""
    src = Path(wheel)
    out = Path(outdir)
    if not src.is_file():
        raise ThinInputError(f"no such wheel: {src}", hint="give the path of a .whl file")
    version, relabelled = _label_plan(src.name, targets, new_version)
    try:
        zf = zipfile.ZipFile(src)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise DamagedWheel(
            f"{src.name} is not a readable zip archive ({exc})", hint="download or build the wheel again"
        ) from None
    with zf, open(src, "rb") as raw:
        dist_info = _check_wheel(zf, src.name)
        dst = out / output_name(src.name, version)
        created = files.output_folder(out)
        try:
            refuse_existing(dst, src, [str(t) for t in targets], force)
        except BaseException:
            if created:
                _remove_if_empty(created, out)
            raise
        files.remove_leftovers(out, files.leftover_pattern(".", ".thin.tmp"))
        result = ThinResult(src, dst, [str(t) for t in targets], sha256=_sha256(src))
        fd, tmp = files.temp_file(out, dst.name, ".thin.tmp")
        try:
            _write(zf, raw, fd, dist_info, targets, result, version, out, compact=not keep_layout)
            os.chmod(tmp, _file_mode())  # mkstemp makes 0600: a web server must be able to read it
            os.replace(tmp, dst)
            tmp = ""
        except OSError as exc:
            raise _os_error(exc, src, out) from None
        finally:
            if tmp:
                os.unlink(tmp)
                if created:
                    _remove_if_empty(created, out)
    if relabelled:
        _relabel_to_held(result)
    result.wheel_before, result.wheel_after = src.stat().st_size, result.output.stat().st_size
    return result


def _write(
    zf: zipfile.ZipFile,
    raw: Any,
    fd: int,
    dist_info: str,
    targets: list[GpuTarget],
    result: ThinResult,
    new_version: str | None,
    out: Path,
    *,
    compact: bool,
) -> None:
    """The member loop within the wheel's budget, every failure one error of ours."""
    name = result.source.name
    try:
        with os.fdopen(fd, "w+b") as fh, budget_for(os.fstat(raw.fileno()).st_size, task=f"thinning {name}"):
            thin_write.write(zf, raw, fh, dist_info, targets, result, new_version, str(out), compact=compact)
            fh.flush()
            os.fsync(fh.fileno())
        _settle(result, targets)
    except BudgetExceeded as exc:
        raise DamagedWheel(
            exc.message, hint="a wheel may inflate to 64 times its size plus 64 MiB here; nothing was written"
        ) from None
    except FormatError as exc:
        raise DamagedWheel(exc.message, hint="the wheel's device code is damaged; nothing was written") from None
    except (DamagedWheel, RecordMismatch):
        raise
    except WheelError as exc:
        raise DamagedWheel(exc.message, hint="the wheel is damaged; nothing was written") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
        raise DamagedWheel(f"cannot thin {name}: {exc}", hint="nothing was written") from None


_WRITING = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EROFS)


def _os_error(exc: OSError, src: Path, out: Path) -> RocmBuildBackendError:
    """A failed write in the output folder (full, read-only), or a source that cannot be read."""
    if exc.errno in _WRITING:
        return why_not_written(exc, out)
    return DamagedWheel(f"cannot thin {src.name}: {exc.strerror or exc}", hint="nothing was written")


def _label_plan(name: str, targets: list[GpuTarget], new_version: str | None) -> tuple[str | None, bool]:
    """(the version to write, whether it must be checked against what the wheel holds after)."""
    if new_version is not None:
        return new_version, False
    try:
        version = str(parse_wheel_filename(name)[1])
    except InvalidWheelFilename:
        return None, False  # refused with the reason by _check_wheel
    if not label_targets(version):
        return None, False
    return relabel(version, held_devices([str(t) for t in targets])), True


def _relabel_to_held(result: ThinResult) -> None:
    """Rename a relabelled output when the code it kept is for other devices than its label's
    (the label is written before the binaries are read: the requested targets')."""
    version = str(parse_wheel_filename(result.source.name)[1])
    want = relabel(version, held_devices([t for m in result.members for t in m.kept]))
    if output_name(result.source.name, want) == result.output.name:
        return
    if (result.output.parent / output_name(result.source.name, want)).resolve() == result.source.resolve():
        result.output.unlink()
        raise ThinInputError(
            f"the thinned wheel would replace its source {result.source}", hint="give another --outdir"
        )
    result.output = rewrite_wheel(result.output, stamp=None, new_version=want)


def _remove_if_empty(top: Path, out: Path) -> None:
    """Remove the folders ``files.output_folder`` created (``out`` up to ``top``) when empty."""
    folder = out
    try:
        while True:
            folder.rmdir()  # fails, and stops, on a folder that is not empty
            if folder == top:
                return
            folder = folder.parent
    except OSError:
        pass


def _settle(result: ThinResult, targets: list[GpuTarget]) -> None:
    """Refuse a result with nothing to show for the requested targets (before the move); note
    the targets that have no code in it."""

    if not result.had:
        raise ThinInputError(
            f"{result.source.name} holds no GPU device code; there is nothing to thin",
            hint="thin wheels with HIP or CUDA code; this one loads on any GPU as it is",
        )
    kept = [t for m in result.members for t in m.kept]
    if not kept:
        raise NoCodeForTarget(
            f"{result.source.name} holds device code for {', '.join(sorted_targets(result.had))}; "
            f"none of it loads on {', '.join(result.targets)}",
            hint="pick targets the wheel has code for, or build the wheel for these targets",
        )
    for target in targets:
        try:
            served = any(Selector([target]).keeps(code) for code in set(kept))
        except CannotThin:
            served = False
        if not served:
            result.missing.append(str(target))
