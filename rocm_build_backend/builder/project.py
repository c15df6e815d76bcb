"""For projects you do not want to edit: plan or build one (a folder; an sdist is unpacked first,
``sdist.py``) through the shim
(``configure``, which edits a project to use the shim, is in ``configure.py``).

``shim_settings`` is the one place that says how a project that does not name the shim gets
built through it (its own declared backend, wrapped); ``plan_project`` and ``build_project``
both use it, so that ``plan`` shows what ``build`` does. ``Built`` is what a build made, as
plain data (``build --json``).

A build runs the shim's hook in a subprocess; its exit status is the shim's own (1 refused: a
stale tree, a compiler that rejects a target, a target missing from the wheel; 2 a bad setting;
3 cannot tell: no GPU found) or the wrapped backend's failure (1), and ``BuildFailedError``
carries it on. The hook runs in a session of its own: SIGINT, SIGTERM and SIGHUP go on to its
process group, the command waits for it to end (128 + the signal's number), and a build that
failed or stopped leaves nothing in the output folder: what appeared there during it (a wheel,
setuptools' ``.tmp-*`` folder, a temporary file) is removed before the command says so.
carries it on. A wheel built for GPU targets without device code, from a project whose build
files show GPU switches or whose tree has GPU sources, is a finding (``Built.finding``, exit 1
with the switch named), never a success.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from pyproject_hooks import BuildBackendHookCaller

from rocm_build_backend.builder.diagnose import diagnose, skipped_for_missing
from rocm_build_backend.builder.freshness import StaleTree, find_stale, stale_wheels
from rocm_build_backend.builder.interrupt import end_group, forwarded
from rocm_build_backend.builder.log import LOG_PREFIX
from rocm_build_backend.builder.prepare import Prepared, prepare
from rocm_build_backend.builder.source import backend_build_dirs, load_project, read_pyproject, wrapped_backend
from rocm_build_backend.builder.switches import scan
from rocm_build_backend.errors import CANNOT_TELL, DEFINITE_NO, USAGE, ConfigError, RocmBuildBackendError
from rocm_build_backend.wheel.stamp import read_stamp

SHIM = "rocm_build_backend"
LEGACY = "setuptools.build_meta:__legacy__"  # what pip uses for a project without pyproject.toml


def _declared(path: Path) -> tuple[str | None, list[str]]:
    system = read_pyproject(path).get("build-system") or {}
    backend = system.get("build-backend")
    return (backend if isinstance(backend, str) else None), list(system.get("backend-path") or [])


def project_folder(path: Path) -> Path:
    """PATH, resolved, when it is a Python project's folder; ConfigError saying what it is not."""
    if not path.exists():
        raise ConfigError([f"{path} does not exist"], hint="give the path of a Python project's folder")
    path = path.resolve()
    if not path.is_dir():
        raise ConfigError([f"{path} is not a folder"], hint="give the project's folder")
    if not (path / "pyproject.toml").is_file() and not (path / "setup.py").is_file():
        raise ConfigError([f"{path} has no pyproject.toml or setup.py"], hint="give a Python project's folder")
    return path


def shim_settings(path: Path, config_settings: Mapping[str, Any]) -> dict[str, Any]:
    """The config settings that build PATH through the shim: a project that does not name the
    shim keeps its own declared backend (setuptools' legacy backend without pyproject.toml)."""
    settings = dict(config_settings)
    backend, backend_path = _declared(path)
    if backend != SHIM:
        settings.setdefault("rocm-build-backend.backend", backend or LEGACY)
        if backend_path:
            settings.setdefault("rocm-build-backend.backend-path", ",".join(backend_path))
    return settings


def plan_project(path: Path, config_settings: Mapping[str, Any]) -> tuple[Prepared, list[StaleTree]]:
    """What ``build`` would do with PATH: the prepared plan, and the stale trees that would stop it
    (or that ``stale = "clean"`` would remove). Builds nothing, removes nothing; the wrapped
    backend is imported, as the build would (``BackendUnavailableError``, exit 2)."""
    path = project_folder(path)
    project = load_project(shim_settings(path, config_settings), source_dir=path)
    wrapped_backend(project)  # a backend the build could not import stops the plan as it would the build
    prepared = prepare(project, keep_going=True)
    stale = find_stale(path, [str(t) for t in prepared.plan.targets], extra=backend_build_dirs(project))
    return prepared, stale


_TAIL_LINES = 400  # of the build's output, kept to say why it failed
_LINE = 4096  # bytes of one line kept


def _tee_runner(tail: deque[str], received: list[int], echo: bool = True) -> Callable[..., None]:
    """A pyproject-hooks runner: the hook's output goes to our stderr as it comes (stdout stays
    for the wheel's path), and its last lines are kept in ``tail``. Without ``echo`` (``-q``) the
    output is shown only when the hook fails: its last lines. The hook runs in a session of
    its own; SIGINT, SIGTERM and SIGHUP to us go to its process group (``interrupt.forwarded``)
    and are kept in ``received``; we wait for it, and what is left of its group when it ended on a
    signal is killed, so that nothing of the build outlives the command."""

    def run(cmd: Sequence[str], cwd: str | None = None, extra_environ: Mapping[str, str] | None = None) -> None:
        env = dict(os.environ)
        env.update(extra_environ or {})
        with (
            subprocess.Popen(
                cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
            ) as proc,
            forwarded(proc.pid, received),
        ):
            out = proc.stdout
            assert out is not None
            while raw := out.readline(1 << 16):  # a long line comes in pieces: memory stays bounded
                if echo:
                    sys.stderr.buffer.write(raw)
                    sys.stderr.buffer.flush()
                tail.append(raw[:_LINE].decode("utf-8", "replace"))
            proc.wait()
            if received:
                end_group(proc.pid)
        if received:
            raise BuildInterrupted(received[0])
        if proc.returncode and not echo:
            sys.stderr.write("".join(tail))
        if proc.returncode:
            raise subprocess.CalledProcessError(proc.returncode, cmd)

    return run


PLAN_SCHEMA_VERSION = 1
BUILD_SCHEMA_VERSION = 1


class BuildFailedError(RocmBuildBackendError):
    """The build through the shim stopped; ``exit_code`` is the hook's own (see the module)."""

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int = DEFINITE_NO) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = exit_code


class BuildInterrupted(Exception):
    """The command got a signal while the hook built; the hook's process group has ended."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass
class Built:
    """What ``build`` made: the wheel, its stamp (None without one), and the other wheels in the
    output folder built for other targets."""

    project: Path
    wheel: Path
    stamp: dict[str, Any] | None
    stale: list[tuple[Path, list[str]]] = field(default_factory=list)
    finding: BuildFailedError | None = None  # a wheel without device code from a GPU project

    @property
    def targets(self) -> list[str]:
        return list(((self.stamp or {}).get("requested") or {}).get("targets") or [])

    def to_json(self) -> dict[str, Any]:
        """``build --json``: schema ``data/schemas/build.schema.json``, documented in docs/json/build.md."""
        return {
            "schema_version": BUILD_SCHEMA_VERSION,
            "project": str(self.project),
            "wheel": str(self.wheel),
            "targets": self.targets,
            "stamp": self.stamp,
            "stale_wheels": [{"path": str(p), "targets": list(t)} for p, t in self.stale],
        }


def plan_json(prepared: Prepared, stale: list[StaleTree]) -> dict[str, Any]:
    """``plan --json``: schema ``data/schemas/plan.schema.json``, documented in docs/json/plan.md."""
    clean = prepared.project.settings.stale == "clean"
    data: dict[str, Any] = {"schema_version": PLAN_SCHEMA_VERSION}
    data.update(prepared.plan.to_json())
    compiler = prepared.compiler.to_json() if prepared.compiler else None
    data["compiler"] = {k: v for k, v in compiler.items() if k != "path"} if compiler else None
    problem = prepared.compiler_problem
    data["compiler_problem"] = {"message": problem.message, "hint": problem.hint} if problem else None
    data["stale"] = [
        {
            "path": str(t.path),
            "built_for": t.built_for,
            "owned": t.owned,
            "action": "remove" if clean and t.owned else "stop",
        }
        for t in stale
    ]
    return data


def build_project(path: Path, outdir: Path | None, config_settings: Mapping[str, Any], *, echo: bool = True) -> Built:
    """Build PATH's wheel through the shim with its own declared backend, without isolation.

    Returns the wheel, its stamp and the other wheels in the output folder built for other
    targets; a failed build raises ``BuildFailedError`` with the hook's exit code.
    """
    path = project_folder(path)
    outdir = (outdir or path / "dist").resolve()
    outdir.mkdir(parents=True, exist_ok=True)
    settings = shim_settings(path, config_settings)
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    received: list[int] = []
    caller = BuildBackendHookCaller(
        str(path), SHIM, runner=_tee_runner(tail, received, echo), python_executable=sys.executable
    )
    before = _entries(outdir)
    try:
        name = caller.build_wheel(str(outdir), settings)
    except subprocess.CalledProcessError as exc:
        _remove_new(outdir, before)
        raise failed(path.name, exc.returncode, "".join(tail)) from None
    except BuildInterrupted as exc:
        removed = _remove_new(outdir, before)
        what = signal.Signals(exc.signum).name
        raise BuildFailedError(
            f"building {path.name} stopped by {what}: the build's processes have ended"
            + (f"; removed what it left in {outdir}: {', '.join(removed)}" if removed else ""),
            hint="build again to finish it",
            exit_code=128 + exc.signum,
        ) from None
    except BaseException:
        _remove_new(outdir, before)
        raise
    wheel = outdir / name

    built = Built(path, wheel, read_stamp(wheel))
    built.stale = [(p, t) for p, t in stale_wheels(outdir, built.targets) if p != wheel]
    built.finding = no_device_code(path, built)
    return built


def _entries(folder: Path) -> dict[str, tuple[int, int, int]]:
    """The entries of ``folder``: name -> (inode, size, modification time)."""
    out = {}
    with os.scandir(folder) as entries:
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            out[entry.name] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def _remove_new(folder: Path, before: dict[str, tuple[int, int, int]]) -> list[str]:
    """Remove what a failed build left in ``folder``: entries that were not there before it, and
    wheels it replaced; the names removed."""
    removed = []
    for name, now in _entries(folder).items():
        was = before.get(name)
        if was is not None and (was == now or not name.endswith(".whl")):
            continue
        target = folder / name
        try:
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
        except OSError:
            continue
        removed.append(name)
    return sorted(removed)


_GPU_ROLES = ("gpu-on", "prebuilt", "guard")
_GPU_SOURCES = (".cu", ".cuh", ".hip")
_WALK_LIMIT = 20_000  # entries looked at for GPU sources


def gpu_evidence(path: Path) -> tuple[list[str], list[str]]:
    """What in PATH's build says it has GPU code: its own GPU switches (the switch reader's
    findings, ``file L<line> NAME=VALUE``) and its first GPU source files (``.cu``, ``.hip``)."""
    switches = [
        f"{f.where} {f.name}" + (f"={f.value}" if f.value else "")
        for f in scan(path)
        if f.role in _GPU_ROLES or f.kind == "cuda-guard"
    ]
    sources: list[str] = []
    seen = 0
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("build", "dist"))
        seen += len(names) + len(dirs)
        sources += [str(Path(root, n).relative_to(path)) for n in sorted(names) if n.endswith(_GPU_SOURCES)]
        if len(sources) >= 3 or seen > _WALK_LIMIT:
            break
    return switches, sources[:3]


def no_device_code(path: Path, built: Built) -> BuildFailedError | None:
    """The finding for a wheel built for GPU targets that holds no device code from a project
    with GPU switches or GPU sources (exit 1, the switch named); None otherwise."""
    audit = (built.stamp or {}).get("audit") or {}
    if not built.targets or audit.get("targets"):
        return None
    switches, sources = gpu_evidence(path)
    if not switches and not sources:
        return None
    has = f"its own GPU switches {', '.join(switches[:4])}" if switches else f"GPU sources ({', '.join(sources)})"
    hint = (
        "turn its GPU build on (" + "; ".join(s.split(" ", 2)[-1] for s in switches[:4]) + ") and build again"
        if switches
        else "see its build files for what turns its GPU build on"
    )
    return BuildFailedError(
        f"{built.wheel.name} holds no device code, though {' '.join(built.targets)} "
        f"{'was' if len(built.targets) == 1 else 'were'} asked and the project has {has}",
        hint=hint + '; a project meant to have no GPU code sets verify = "off"',
    )


def failed(name: str, returncode: int, output: str) -> BuildFailedError:
    """The error for a build hook that exited with ``returncode`` after printing ``output``.

    The shim's own refusal (its ``error:``/``hint:`` lines, exit 1, 2 or 3) is repeated with its
    code; a failure of the wrapped backend is exit 1, with its cause when ``diagnose`` knows it.
    """
    code = returncode if returncode in (DEFINITE_NO, USAGE, CANNOT_TELL) else DEFINITE_NO
    own = _own_error(output)
    if own is not None:
        skipped = (
            skipped_for_missing(output) if " holds no " in own[0] and "could not be imported" not in own[0] else None
        )
        if skipped is not None:  # said by a CMake step, which the hook's own tee does not see
            own = (f"{own[0]}: {skipped.what}", skipped.todo)
        return BuildFailedError(f"building {name} stopped: {own[0]}", hint=own[1], exit_code=code)
    cause = diagnose(output)
    if cause is not None:
        return BuildFailedError(f"building {name} failed: {cause.what}", hint=cause.todo, exit_code=DEFINITE_NO)
    return BuildFailedError(
        f"building {name} failed (see the lines above)",
        hint="fix what the error lines say, then build again",
        exit_code=DEFINITE_NO,
    )


def _own_error(output: str) -> tuple[str, str | None] | None:
    """The shim's last ``error:`` line (and its ``hint:``) in a hook's output, when the shim
    stopped the build itself; None when the wrapped backend failed (its cause is logged as
    ``error: the build failed: ...``)."""
    error, hint = f"{LOG_PREFIX}error: ", f"{LOG_PREFIX}hint: "
    lines = [ln.rstrip("\r\n") for ln in output.splitlines()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith(error):
            message = lines[i][len(error) :]
            if message.startswith("the build failed: "):
                return None
            follow = lines[i + 1] if i + 1 < len(lines) else ""
            return message, (follow[len(hint) :] if follow.startswith(hint) else None)
    return None
