"""``index --add WHEEL... -o OUT`` and ``index --remove NAME==VERSION -o OUT``: publishing by name.

Many build jobs publish into one output: each adds its wheels (copied into ``OUT/files/``,
hosted like every wheel) or removes a version, and no folder is mirrored, so one job's run
never drops what another published. Runs take turns through OUT's lock and each costs what it
adds or removes: the state, pages and files of other projects are not read or rewritten.
Adding a wheel that is already there with the same bytes changes nothing; the same file name
with other bytes replaces it (the new copy is hosted beside the old one until the pages link
it). ``--remove`` matches the version exactly, local label included (``1.0`` is not
``1.0+gfx942``).

The plan options (``--targets``, ``--family``, ``--variants``) are fixed by the first run into
an output; later runs may repeat them or leave them out. An output built by mirroring a folder
is not published into (and the other way round): the next mirror run would undo it.

It reads the wheels it is given and hands the changes to ``index_changes.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from rocm_build_backend.errors import ConfigError, RocmBuildBackendError
from rocm_build_backend.gpu.targets import GpuTarget
from rocm_build_backend.wheel.index.changes import Options, Session, apply, load_lists, session
from rocm_build_backend.wheel.index.files import FILES_DIR, HASH_DIR, Layout, hash_file, prepare_out
from rocm_build_backend.wheel.index.pages import normalize, version_key
from rocm_build_backend.wheel.index.result import IndexResult
from rocm_build_backend.wheel.index.run import options
from rocm_build_backend.wheel.index.wheels import Item, parse_name, read_all

_SPEC = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s=]+)\s*$")


def parse_spec(spec: str) -> tuple[str, str]:
    """``NAME==VERSION`` -> (normalised name, version); ConfigError for anything else."""
    m = _SPEC.match(spec)
    if not m:
        raise ConfigError(
            [f"--remove {spec!r} is not NAME==VERSION"], hint="for example: --remove my-ext==1.2.0+gfx942"
        )
    return normalize(m.group(1)), m.group(2)


def _wheel_paths(paths: Iterable[str | Path], skipped: dict[str, str]) -> dict[str, Path]:
    """File name -> path of each wheel given (a folder gives each ``*.whl`` in it)."""
    out: dict[str, Path] = {}
    for given in paths:
        path = Path(given)
        found = sorted(path.glob("*.whl")) if path.is_dir() else [path]
        if path.is_dir() and not found:
            skipped[str(path)] = "the folder holds no wheels"
        for p in found:
            if not p.is_file():
                skipped[str(p)] = "no such file" if not p.exists() else "not a file"
            elif p.name in out and out[p.name].resolve() != p.resolve():
                skipped[str(p)] = f"another wheel named {p.name} was given ({out[p.name]})"
            else:
                out[p.name] = p
    return out


def _resolve(s: Session, given: Options) -> Options:
    """The options this output was created with; ConfigError when the given ones differ."""
    stored = s.store.meta("options")
    if not stored:
        return given
    was = Options.from_key(stored)
    differ = [
        what
        for what, conflict in (
            ("--targets", given.targets is not None and given.targets != was.targets),
            ("--family", given.family and not was.family),
            ("--variants", given.variants and not was.variants),
            ("generic code", not given.generic_ok and was.generic_ok),
        )
        if conflict
    ]
    if differ:
        raise ConfigError(
            [f"{s.lay.out_dir} was published with other {', '.join(differ)}"],
            hint="pass the options of the first run into this output (or none of them)",
        )
    return was


def _check_mode(s: Session) -> None:
    mode = s.store.meta("mode")
    if mode == "mirror" and (s.store.count_wheels() or s.store.index_defs()):
        raise RocmBuildBackendError(
            f"{s.lay.out_dir} mirrors a folder of wheels: its next run would undo this",
            hint="put the wheel into that folder and run `rocm-build-backend index WHEEL_DIR -o OUT_DIR`, "
            "or publish into another output folder",
        )


def _recovered(lay: Layout) -> dict[str, Path]:
    """The hosted wheels under ``OUT/files/<hash>/`` (a damaged state is rebuilt from them)."""

    found: dict[str, Path] = {}
    for path in sorted(lay.files_dir.glob("*/*.whl")):
        if len(path.parent.name) == HASH_DIR and path.is_file() and not path.is_symlink():
            try:
                if hash_file(path).startswith(path.parent.name):
                    if path.name not in found or found[path.name].stat().st_mtime_ns < path.stat().st_mtime_ns:
                        found[path.name] = path
            except OSError:
                continue
    return found


def publish(
    out_dir: str | Path,
    *,
    add: Sequence[str | Path] = (),
    remove: Sequence[str] = (),
    targets: Sequence[str | GpuTarget] | str | None = None,
    family: bool = False,
    generic_ok: bool = True,
    variants: bool = False,
    lists: bool = True,
) -> IndexResult:
    """Add wheels to (and remove versions from) the index in ``out_dir``, nothing else.

    ``add``: wheel files (or folders of them), copied into ``OUT/files/``; ``remove``:
    ``NAME==VERSION`` specs, each removing every wheel of that version. A wheel that cannot be
    read, or a spec that matches nothing, is skipped with the reason (exit code 1); the others
    go ahead. The options are those of ``build_index``.
    """
    specs = [(spec, *parse_spec(spec)) for spec in remove]
    if not add and not specs:
        raise ConfigError(["nothing to add or remove"], hint="pass --add WHEEL... or --remove NAME==VERSION")
    given = options(targets, family, generic_ok, variants)
    out = Path(out_dir)
    prepare_out(out)
    result = IndexResult(out_dir=out)
    sources = _wheel_paths(add, result.skipped)
    lay = Layout(out, out, None, in_place=False, copy=True, sources=dict(sources))
    with session(lay, result, variants) as s:
        _check_mode(s)
        opts = _resolve(s, given)
        if s.damaged:
            sources = {**_recovered(lay), **sources}
        items: list[Item] = []
        for fn, path in sources.items():
            item, why = parse_name(fn, opts.variants)
            if item is None:
                result.skipped[fn] = why or "not a wheel"
                continue
            item.path = path
            row = s.store.row(fn)
            item.known_sha, item.indexed = (row[1] if row else None), row is not None
            items.append(item)
        gone = _matching(s, specs)
        reads = read_all(lay, items)
        for fn, r in list(reads.items()):
            if r.same:  # already there with these bytes
                del reads[fn]
        result.reused = len(items) - len(reads)
        apply(s, opts, reads, gone=gone, meta={"mode": "publish", "options": opts.key()})
        load_lists(s, lists)
    return result


def _matching(s: Session, specs: list[tuple[str, str, str]]) -> dict[str, str]:
    """fn -> project of every wheel the ``--remove`` specs match; a spec matching none is skipped."""
    gone: dict[str, str] = {}
    for spec, project, version in specs:
        want = version_key(version)
        hits = [
            fn
            for fn, rec in s.store.project_records(project).items()
            if (version_key(str(rec.get("version")))[1] == want[1] if want[0] else rec.get("version") == version)
        ]
        if not hits:
            s.result.skipped[spec] = f"{s.lay.out_dir} holds no wheel of {project} {version}"
        gone.update((fn, project) for fn in hits)
    return gone


__all__ = ["FILES_DIR", "parse_spec", "publish"]
