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
(scikit-build-core's ``build-dir``), the ``*.egg-info`` folders in the source folder and in
``src/``. Paths that are the source folder or contain it are never trees.
"""

from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Iterable

from rocm_build_backend.errors import ConfigError, StaleBuildTreeError

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
    from rocm_build_backend.gpu.targets import split_targets

    items = {t.strip().lower() for t in split_targets(list(targets)) if t.strip()}
    from rocm_build_backend.errors import RocmBuildBackendError
    from rocm_build_backend.gpu.targets import parse_targets

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


def _roots(source_dir: Path, extra: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The build-tree folders that exist, absolute, each once, never the sources themselves."""
    source = source_dir.resolve()
    candidates = [source / name for name in _IN_SOURCE]
    for item in extra:
        p = Path(item)
        candidates.append(p if p.is_absolute() else source / p)
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
    import json

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
    import shutil

    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)


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
    them. Returns [] when every tree is fresh.
    """
    if stale not in ("error", "clean"):
        raise ConfigError([f"stale must be 'error' or 'clean', not {stale!r}"])
    source = Path(source_dir).resolve()
    want = _norm(targets)
    found = []
    for root in _roots(source, extra):
        is_stale, had = tree_state(root, want)
        if is_stale:
            found.append((root, had))
    if not found:
        return []
    # a tree inside another stale tree (scikit-build-core's build/cmake in build/) goes with it
    found = [(root, had) for root, had in found
             if not any(other != root and other in root.parents for other, _ in found)]
    if stale == "clean":
        removed = []
        for root, _ in found:
            try:
                _remove(root)
            except OSError as exc:
                raise StaleBuildTreeError(
                    f"cannot remove the stale build tree {_shown(root, source)}: {exc}",
                    hint=f"remove it yourself: rm -rf {_shown(root, source)}",
                ) from None
            removed.append(root)
        return removed
    listed = "; ".join(f"{_shown(root, source)} (built for {had})" for root, had in found)
    paths = " ".join(_shown(root, source) for root, _ in found)
    raise StaleBuildTreeError(
        f"build trees made for other GPU targets: {listed}; this build is for {';'.join(want) or 'no targets'}",
        hint=f'set stale = "clean" in [tool.rocm-build-backend] (or {STALE_ENV}=clean), '
        f"or remove them: rm -rf {paths}",
    )


def mark_fresh(source_dir: str | os.PathLike[str], targets: list[str], extra: Iterable[str | os.PathLike[str]] = ()) -> list[Path]:
    """Write the stamp into every build tree that exists after a build; return the stamps.

    A tree that cannot be written (a read-only source folder) is skipped. ``*.egg-info`` folders
    are not stamped: setuptools rewrites them on every build and packs them into sdists, which
    must carry nothing GPU-specific.
    """
    import json

    data = (json.dumps({"schema_version": FRESH_SCHEMA, "generator": "rocm-build-backend",
                        "targets": _norm(targets)}, indent=2) + "\n").encode("utf-8")
    written = []
    for root in _roots(Path(source_dir), extra):
        if root.name.endswith(".egg-info"):
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
    from rocm_build_backend.errors import RocmBuildBackendError
    from rocm_build_backend.wheel.stamp import read_stamp

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
