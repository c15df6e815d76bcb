"""Build trees remember the GPU targets they were built for; refuse or clean stale ones.

setuptools' ``build_ext`` skips an extension it thinks is up to date whatever the flags, and a
CMake build tree keeps its cached ``CMAKE_HIP_ARCHITECTURES``: a build for new targets in an
old tree "succeeds" with the old device code. So after a build the shim writes a small stamp,
``.rocm-build-backend.json``, into each build tree it knows, and before the next build it
checks them.

A tree is stale when
- its stamp names other targets than this build's; or
- it has no stamp, and a ``CMakeCache.txt`` in it sets ``CMAKE_HIP_ARCHITECTURES``,
  ``GPU_TARGETS`` or ``AMDGPU_TARGETS`` to other targets; or
- it has no stamp, and compiled objects (``.o``, ``.so``, ``.a``, code objects, ...) outside
  the CMake build folders whose cache names this build's targets: a build of unknown
  targets, whose objects a new build would reuse.
An unstamped tree with no compiled objects (a pure-Python ``build/lib``, an ``.egg-info``)
is fresh. A stamp is trusted over a CMake cache (the CMake cache may hold defaults, such as
hip-config's AMDGPU_TARGETS list, for variables this build does not use).

Trees: ``build/`` and ``_skbuild/`` in the source folder, the folders passed as ``extra``
(scikit-build-core's ``build-dir``, passed only when that is the wrapped backend), the
``*.egg-info`` folders in the source folder and in ``src/``. Paths that are the source folder
or contain it are never trees. A folder outside the source folder is a tree only when the
backend put it there: it carries our stamp, or its ``CMakeCache.txt`` names this source folder.

A tree is removed (``stale = "clean"``) only when we can prove it was made for this source:
our stamp, or a ``CMakeCache.txt`` in it naming this source folder. Anything else is
reported, never removed; ``mark_fresh`` stamps only trees that are ours or that the build
just made, so a folder of the user's never becomes "ours".
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from rocm_build_backend.errors import ConfigError, RocmBuildBackendError, StaleBuildTreeError
from rocm_build_backend.gpu.targets import parse_targets, split_targets
from rocm_build_backend.wheel.stamp import read_stamp

FRESH_NAME = ".rocm-build-backend.json"
FRESH_SCHEMA = 1
CMAKE_ARCH_VARS = ("CMAKE_HIP_ARCHITECTURES", "GPU_TARGETS", "AMDGPU_TARGETS")
STALE_ENV = "ROCM_BUILD_BACKEND_STALE"

_IN_SOURCE = ("build", "_skbuild")
_OBJECT_SUFFIXES = (".o", ".obj", ".so", ".a", ".lib", ".pyd", ".dll", ".dylib", ".hsaco", ".co", ".fatbin", ".cubin")
_CMAKE_DEPTH = 4  # CMakeCache.txt sits at the top of a CMake binary dir, a few levels down
_MAX_CACHE = 8 << 20
_MAX_STAMP = 1 << 16


def _norm(targets: Iterable[str]) -> list[str]:
    """A comparable form of a target list: stripped, lowercase, unique, sorted as targets sort."""
    items = {t.strip().lower() for t in split_targets(list(targets)) if t.strip()}

    try:
        return [str(t) for t in parse_targets(sorted(items))]
    except RocmBuildBackendError:  # an unknown name in an old stamp or cache: compare the text
        return sorted(items)


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _cmake_source(cache: Path) -> Path | None:
    """The source folder a CMakeCache.txt was configured for (CMAKE_HOME_DIRECTORY)."""
    try:
        with open(cache, "rb") as fh:
            text = fh.read(_MAX_CACHE).decode("utf-8", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY:") and "=" in line:
            value = line.partition("=")[2].strip()
            return Path(value) if value else None
    return None


def owned(root: Path, source_dir: str | os.PathLike[str]) -> bool:
    """Whether we can prove that ``root`` was made by a build of ``source_dir``.

    Our stamp in it, or a CMakeCache.txt naming this source folder (or a folder in it): at the
    top of ``root`` when ``root`` lies outside the source folder, a few levels down inside it.
    """
    source = Path(source_dir).resolve()
    if (Path(root) / FRESH_NAME).is_file():
        return True
    inside = _inside(Path(root).resolve(), source)
    caches = _cmake_caches(Path(root)) if inside else [Path(root) / "CMakeCache.txt"]
    for cache in caches:
        configured = _cmake_source(cache)
        if configured is not None and _inside(configured.resolve(), source):
            return True
    return False


def _roots(source_dir: Path, extra: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The build-tree folders that exist, absolute, each once, never the sources themselves.

    A folder from ``extra`` outside the source folder counts only when it is ``owned``.
    """
    source = source_dir.resolve()
    candidates = [source / name for name in _IN_SOURCE]
    for item in extra:
        p = Path(item)
        p = p if p.is_absolute() else source / p
        if p.is_dir() and not _inside(p.resolve(), source) and not owned(p, source):
            continue  # not the backend's for this project: never followed out of the project
        candidates.append(p)
    for folder in (source, source / "src"):
        try:
            candidates.extend(sorted(folder.glob("*.egg-info")))
        except OSError:
            pass
    out: list[Path] = []
    for p in candidates:
        if not p.is_dir():
            continue
        real = p.resolve()
        if _inside(source, real):  # "." or a parent of the sources: never a build tree
            continue
        if real not in {q.resolve() for q in out}:
            out.append(p if p.is_symlink() else real)
    return out


def _cmake_caches(root: Path) -> list[Path]:
    """CMakeCache.txt files at most a few levels under ``root`` (CMakeFiles/ not entered)."""
    found = []
    base_depth = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root):
        depth = len(Path(dirpath).parts) - base_depth
        dirnames[:] = [d for d in dirnames if d != "CMakeFiles" and depth < _CMAKE_DEPTH]
        if "CMakeCache.txt" in filenames:
            found.append(Path(dirpath) / "CMakeCache.txt")
    return sorted(found)


def cmake_arch(cache: Path) -> dict[str, list[str]]:
    """The GPU-arch variables a CMakeCache.txt sets to a non-empty value."""
    out: dict[str, list[str]] = {}
    try:
        with open(cache, "rb") as fh:
            text = fh.read(_MAX_CACHE).decode("utf-8", "replace")
    except OSError:
        return out
    for line in text.splitlines():
        if line.startswith(("#", "//")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        name = key.split(":", 1)[0].strip()
        if name in CMAKE_ARCH_VARS and value.strip():
            out[name] = _norm([value])
    return out


def find_build_trees(source_dir: str | os.PathLike[str], extra: Iterable[str | os.PathLike[str]] = ()) -> list[Path]:
    """The build trees of a source folder that exist, and the CMake caches in them with arch info.

    Order: tree roots (``build/``, ``_skbuild/``, ``extra``, ``*.egg-info``) each followed by
    the ``CMakeCache.txt`` files under it that set ``CMAKE_HIP_ARCHITECTURES``, ``GPU_TARGETS``
    or ``AMDGPU_TARGETS``.
    """
    out: list[Path] = []
    for root in _roots(Path(source_dir), extra):
        out.append(root)
        if not root.name.endswith(".egg-info"):
            out.extend(c for c in _cmake_caches(root) if cmake_arch(c))
    return out


def read_fresh(tree: Path) -> list[str] | None:
    """The targets a tree's stamp records, or None when it has no readable stamp."""
    try:
        with open(Path(tree) / FRESH_NAME, "rb") as fh:
            data = json.loads(fh.read(_MAX_STAMP).decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    targets = data.get("targets") if isinstance(data, dict) else None
    if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
        return None
    return _norm(targets)


def _has_objects(root: Path, skip: Iterable[Path] = ()) -> bool:
    """Compiled objects under ``root``, outside the folders in ``skip``."""
    skipped = {str(p) for p in skip}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in skipped]
        if any(f.endswith(_OBJECT_SUFFIXES) or ".so." in f for f in filenames):
            return True
    return False


def tree_state(root: Path, targets: list[str]) -> tuple[bool, str]:
    """(stale, what the tree was built for) for one tree root and this build's targets."""
    want = _norm(targets)
    stamped = read_fresh(root)
    if stamped is not None:
        return stamped != want, ";".join(stamped) or "no targets"
    if root.name.endswith(".egg-info"):
        return False, "unknown"
    known = []  # CMake binary dirs whose cache names this build's targets
    for cache in _cmake_caches(root):
        arch = cmake_arch(cache)
        for var, value in arch.items():
            if value != want:
                return True, f"{';'.join(value)} ({var} in {cache.relative_to(root)})"
        if arch:
            known.append(cache.parent)
    if root in known:
        return False, ";".join(want)
    if _has_objects(root, skip=known):
        return True, "unknown targets (compiled objects from a build without a stamp)"
    return False, "unknown"


def _shown(path: Path, source: Path) -> str:
    try:
        rel = path.relative_to(source)
    except ValueError:
        return str(path)
    return rel.as_posix() + ("/" if path.is_dir() else "")


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)


class StaleTree(NamedTuple):
    """A build tree made for other targets: where, what it was built for, whether it is ours."""

    path: Path
    built_for: str
    owned: bool


def find_stale(
    source_dir: str | os.PathLike[str],
    targets: list[str],
    extra: Iterable[str | os.PathLike[str]] = (),
) -> list[StaleTree]:
    """The stale build trees, outermost only (a stale tree inside another goes with it)."""
    source = Path(source_dir).resolve()
    want = _norm(targets)
    found = []
    for root in _roots(source, extra):
        is_stale, had = tree_state(root, want)
        if is_stale:
            found.append((root, had))
    # a tree inside another stale tree (scikit-build-core's build/cmake in build/) goes with it
    return [
        StaleTree(root, had, owned(root, source))
        for root, had in found
        if not any(other != root and other in root.parents for other, _ in found)
    ]


def _not_ours(trees: list[StaleTree], source: Path) -> str:
    shown = " ".join(_shown(t.path, source) for t in trees)
    return (
        f"nothing proves this build made {shown} (no {FRESH_NAME} stamp, no CMakeCache.txt naming "
        f"this source folder), so it is not removed; if it holds only build output, remove it yourself"
    )


def check_fresh(
    source_dir: str | os.PathLike[str],
    targets: list[str],
    *,
    stale: str = "error",
    extra: Iterable[str | os.PathLike[str]] = (),
) -> list[Path]:
    """Check the build trees against this build's targets.

    ``stale="error"`` raises StaleBuildTreeError naming each stale path, the targets it holds
    and this build's targets; ``stale="clean"`` removes exactly the stale paths and returns
    them, when each is provably ours (``owned``); otherwise it removes nothing and raises.
    Returns [] when every tree is fresh.
    """
    if stale not in ("error", "clean"):
        raise ConfigError([f"stale must be 'error' or 'clean', not {stale!r}"])
    source = Path(source_dir).resolve()
    want = _norm(targets)
    found = find_stale(source, want, extra)
    if not found:
        return []
    listed = "; ".join(f"{_shown(t.path, source)} (built for {t.built_for})" for t in found)
    message = f"build trees made for other GPU targets: {listed}; this build is for {';'.join(want) or 'no targets'}"
    foreign = [t for t in found if not t.owned]
    if stale == "clean":
        if foreign:
            raise StaleBuildTreeError(message, hint=_not_ours(foreign, source))
        removed = []
        for tree in found:
            try:
                _remove(tree.path)
            except OSError as exc:
                raise StaleBuildTreeError(
                    f"cannot remove the stale build tree {_shown(tree.path, source)}: {exc}",
                    hint=f"remove it yourself: rm -rf {_shown(tree.path, source)}",
                ) from None
            removed.append(tree.path)
        return removed
    if foreign:
        raise StaleBuildTreeError(message, hint=_not_ours(foreign, source))
    paths = " ".join(_shown(t.path, source) for t in found)
    raise StaleBuildTreeError(
        message,
        hint=f'set stale = "clean" in [tool.rocm-build-backend] (or -C rocm-build-backend.stale=clean, '
        f"or {STALE_ENV}=clean), or remove them: rm -rf {paths}",
    )


def existing_trees(source_dir: str | os.PathLike[str], extra: Iterable[str | os.PathLike[str]] = ()) -> list[Path]:
    """The build trees that exist now and are not provably ours: ``mark_fresh`` leaves them be."""
    source = Path(source_dir).resolve()
    return [root for root in _roots(source, extra) if not owned(root, source)]


def mark_fresh(
    source_dir: str | os.PathLike[str],
    targets: list[str],
    extra: Iterable[str | os.PathLike[str]] = (),
    *,
    skip: Iterable[Path] = (),
) -> list[Path]:
    """Write the stamp into every build tree that exists after a build; return the stamps.

    ``skip``: trees that existed before the build and were not ours (``existing_trees``); a
    stamp would make a folder of the user's look like ours. A tree that cannot be written (a
    read-only source folder) is skipped. ``*.egg-info`` folders are not stamped: setuptools
    rewrites them on every build and packs them into sdists, which must carry nothing
    GPU-specific.
    """
    data = (
        json.dumps(
            {"schema_version": FRESH_SCHEMA, "generator": "rocm-build-backend", "targets": _norm(targets)}, indent=2
        )
        + "\n"
    ).encode("utf-8")
    skipped = {Path(p) for p in skip}
    written = []
    for root in _roots(Path(source_dir), extra):
        if root.name.endswith(".egg-info") or root in skipped:
            continue
        path = root / FRESH_NAME
        tmp = root / f"{FRESH_NAME}.{os.getpid()}.tmp"
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
            written.append(path)
        except OSError:
            try:
                tmp.unlink()
            except OSError:
                pass
    return written


def stale_wheels(outdir: str | os.PathLike[str], targets: list[str]) -> list[tuple[Path, list[str]]]:
    """Wheels in ``outdir`` whose stamp names other targets: (path, their targets).

    Wheels without a stamp, or that cannot be read, are not reported (they are not the shim's).
    """
    want = _norm(targets)
    out: list[tuple[Path, list[str]]] = []
    try:
        wheels = sorted(Path(outdir).glob("*.whl"))
    except OSError:
        return out
    for wheel in wheels:
        try:
            stamp = read_stamp(wheel)
        except RocmBuildBackendError:
            continue
        if stamp is None:
            continue
        theirs = _norm(stamp["requested"]["targets"])
        if theirs != want:
            out.append((wheel, theirs))
    return out
