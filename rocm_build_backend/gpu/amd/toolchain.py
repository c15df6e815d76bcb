"""Which HIP compiler will the build use, which version is it, and which targets can it emit?

The answer to "does it accept gfx942" comes from the compiler itself: one device-only
compile of an empty HIP file with every ``--offload-arch`` at once (and one per target
only when that fails, to name the culprit). Accepted targets are cached per compiler (path,
size, mtime) in ``$XDG_CACHE_HOME/rocm-build-backend/``, so the next hook call costs nothing;
rejections are asked again, so installing missing device libraries takes effect.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Sequence

from rocm_build_backend.errors import ToolchainError
from rocm_build_backend.gpu.targets import GpuTarget, parse_target, target_info, vendor_name

_CACHE_VERSION = 2
_REJECT = (  # compiled (and kept by ``re``) when a compiler refused a target
    r"invalid target ID '([^']+)'",
    r"cannot find ROCm device library for ([^\s;,]+)",
    r"[Uu]nsupported (?:CUDA|HIP|cuda|hip) gpu architecture:? '?([\w:+-]+)'?",
)


class Compiler(NamedTuple):
    name: str  # what the user would type: hipcc, amdclang++, clang-19
    path: str
    kind: str  # "hipcc" or "clang"
    version: str  # one line: "HIP 5.2.21153, clang 15.0.6"
    hip_version: str | None = None
    clang_version: str | None = None
    rocm_version: str | None = None

    def describe(self) -> str:
        return f"{self.name} ({self.version})" if self.version else self.name

    def to_json(self) -> dict[str, Any]:
        return {
            "compiler": self.name,
            "version": self.version,
            "hip_version": self.hip_version,
            "clang_version": self.clang_version,
            "rocm_version": self.rocm_version,
        }


def _candidates(setting: str, env: Mapping[str, str]) -> list[str]:
    if setting and setting != "auto":
        return [setting]
    out = []
    for var in ("HIP_PATH", "ROCM_PATH"):
        if env.get(var):
            out += [os.path.join(env[var], "bin", "hipcc"), os.path.join(env[var], "bin", "amdclang++")]
    out += ["hipcc", "amdclang++", "/opt/rocm/bin/hipcc", "/opt/rocm/bin/amdclang++"]
    out += ["clang++", "clang", *(f"clang-{v}" for v in range(22, 16, -1))]
    return out


def _which(name: str, env: Mapping[str, str]) -> str | None:
    if os.sep in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name, path=env.get("PATH"))


def _run(run: Callable[..., Any], argv: Sequence[str], env: Mapping[str, str], timeout: float = 60) -> tuple[int, str]:
    try:
        proc = run(list(argv), capture_output=True, text=True, env=dict(env), timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return proc.returncode, (proc.stdout or "") + (proc.stderr or "")


def _cache_file(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rocm-build-backend" / f"toolchain-v{_CACHE_VERSION}.json"


def _cache_key(path: str, env: Mapping[str, str]) -> str:
    st = os.stat(path)
    extra = "|".join(env.get(v, "") for v in ("HIP_CLANG_PATH", "ROCM_PATH", "HIP_PATH", "HIP_PLATFORM"))
    return f"{os.path.realpath(path)}|{st.st_size}|{st.st_mtime_ns}|{extra}"


class _Cache:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.file = _cache_file(env)
        try:
            self.data = json.loads(self.file.read_text(encoding="utf-8"))
            if not isinstance(self.data, dict):
                self.data = {}
        except (OSError, ValueError):
            self.data = {}
        self.dirty = False

    def entry(self, key: str) -> dict[str, Any]:
        got = self.data.get(key)
        if isinstance(got, dict):
            return got
        new: dict[str, Any] = {}
        self.data[key] = new
        return new

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.file.parent, prefix=".toolchain-")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self.data, fh)
            os.replace(tmp, self.file)
        except OSError:
            pass  # a cache we cannot write only costs time


def _compile_env(env: Mapping[str, str]) -> dict[str, str]:
    out = dict(env)
    out["HIP_PLATFORM"] = "amd"
    for var in ("HIPCC_COMPILE_FLAGS_APPEND", "HIPCC_LINK_FLAGS_APPEND", "HCC_AMDGPU_TARGET"):
        out.pop(var, None)
    return out


def _probe_version(name: str, path: str, run: Callable[..., Any], env: Mapping[str, str]) -> Compiler:
    base = os.path.basename(path)
    kind = "hipcc" if base.startswith("hipcc") else "clang"
    _, text = _run(run, [path, "--version"], _compile_env(env))
    hip = re.search(r"HIP version:\s*([0-9][\w.-]*)", text)
    clang = re.search(r"clang version\s+([0-9][\w.]*)", text)
    rocm = re.search(r"roc-([0-9][\w.]*)|/rocm-([0-9][0-9.]+)", text)
    hip_v = hip.group(1).removesuffix("-0") if hip else None
    clang_v = clang.group(1) if clang else None
    rocm_v = next((g for g in rocm.groups() if g), None) if rocm else None
    parts = [f"HIP {hip_v}" if hip_v else "", f"clang {clang_v}" if clang_v else ""]
    return Compiler(name, path, kind, ", ".join(p for p in parts if p), hip_v, clang_v, rocm_v)


def find_compiler(
    setting: str = "auto", *, env: Mapping[str, str] | None = None, run: Callable[..., Any] | None = None
) -> Compiler | None:
    """The HIP compiler a build here would use, or None when there is none.

    Order: the ``compiler`` setting; ``$HIP_PATH/bin``, ``$ROCM_PATH/bin``; ``hipcc``,
    ``amdclang++`` on PATH; ``/opt/rocm/bin``; a plain ``clang`` (``clang-NN``) on PATH.
    """
    env = os.environ if env is None else env
    run = run or subprocess.run
    for name in _candidates(setting, env):
        path = _which(name, env)
        if path:
            cache = _Cache(env)
            entry = cache.entry(_cache_key(path, env))
            if "compiler" not in entry:
                entry["compiler"] = _probe_version(os.path.basename(name), path, run, env)._asdict()
                cache.dirty = True
                cache.save()
            return Compiler(**entry["compiler"])
        if setting and setting != "auto":
            raise ToolchainError(
                f"compiler '{setting}' not found",
                hint="set compiler to a name on PATH or a path, or leave it as 'auto'",
            )
    return None


def _check_argv(compiler: Compiler, targets: Sequence[str], out_dir: str) -> list[str]:
    src = os.path.join(out_dir, "empty.hip")
    if not os.path.exists(src):
        Path(src).write_text("// rocm-build-backend target check\n", encoding="utf-8")
    argv = [compiler.path, "-x", "hip", *(f"--offload-arch={t}" for t in targets)]
    if compiler.kind == "hipcc":
        argv += ["-c", src, "-o", os.path.join(out_dir, "empty.o")]
    else:
        argv += ["-nogpuinc", "--cuda-device-only", "-c", src, "-o", os.path.join(out_dir, "empty.o")]
        if "amdclang" not in compiler.name:
            argv.insert(3, "-nogpulib")
    return argv


def _reason(text: str, target: str) -> str:
    for pattern in _REJECT:
        for m in re.finditer(pattern, text):
            if m.group(1).split(":")[0] == target.split(":")[0]:
                return m.group(0)
    lines = [ln.strip() for ln in text.splitlines() if "error" in ln.lower()]
    return lines[0] if lines else (text.strip().splitlines() or ["the compile failed"])[0]


def check_targets(
    compiler: Compiler,
    targets: Sequence[GpuTarget],
    *,
    env: Mapping[str, str] | None = None,
    run: Callable[..., Any] | None = None,
) -> dict[str, str | None]:
    """target -> None when the compiler emits code for it, else the compiler's reason."""
    env = os.environ if env is None else env
    run = run or subprocess.run
    wanted = [str(t) for t in targets if vendor_name(t) == "amd"]
    cache = _Cache(env)
    accepted = cache.entry(_cache_key(compiler.path, env)).setdefault("accepted", [])
    verdict: dict[str, str | None] = {t: None for t in wanted if t in accepted}
    todo = [t for t in wanted if t not in verdict]
    if todo:
        # only what the compiler accepts is remembered: a rejection (missing device libraries,
        # a timeout) is asked again next time, so installing what was missing takes effect
        cenv = _compile_env(env)
        with tempfile.TemporaryDirectory(prefix="rocm-build-backend-") as tmp:
            rc, text = _run(run, _check_argv(compiler, todo, tmp), cenv)
            for t in todo:
                if len(todo) > 1 and rc != 0:
                    rc1, text1 = _run(run, _check_argv(compiler, [t], tmp), cenv)
                else:
                    rc1, text1 = rc, text
                verdict[t] = None if rc1 == 0 else _reason(text1, t)
        new = [t for t in todo if verdict[t] is None]
        if new:
            accepted.extend(new)
            cache.dirty = True
            cache.save()
    return {t: verdict[t] for t in wanted}


def _installed_others(compiler: Compiler, env: Mapping[str, str], run: Callable[..., Any]) -> Iterator[Compiler]:
    """The other HIP compilers installed here (``amdclang++``, ``clang++-NN`` on PATH), newest
    first: what the user could point the ``compiler`` setting at."""
    seen = {os.path.realpath(compiler.path)}
    names = ["amdclang++", "/opt/rocm/bin/amdclang++", *(f"clang++-{v}" for v in range(30, 13, -1)), "clang++"]
    for name in names:
        path = _which(name, env)
        if path is None or os.path.realpath(path) in seen:
            continue
        seen.add(os.path.realpath(path))
        yield _probe_version(name, path, run, env)


def able_compiler(
    compiler: Compiler,
    targets: Sequence[GpuTarget],
    *,
    env: Mapping[str, str] | None = None,
    run: Callable[..., Any] | None = None,
) -> Compiler | None:
    """An installed compiler other than ``compiler`` that emits code for every one of ``targets``."""
    env = os.environ if env is None else env
    run = run or subprocess.run
    for other in _installed_others(compiler, env, run):
        if not any(check_targets(other, targets, env=env, run=run).values()):
            return other
    return None


def require_supported(compiler: Compiler, targets: Sequence[GpuTarget], **kw: Any) -> None:
    """Raise ToolchainError naming the compiler, its version and every target it rejects; the
    hint names an installed compiler that accepts them all, when there is one."""
    verdict = check_targets(compiler, targets, **kw)
    bad = {t: why for t, why in verdict.items() if why}
    if not bad:
        return

    needs = []
    for t in bad:
        llvm = target_info(parse_target(t)).get("first_llvm", "")
        if llvm and llvm[0].isdigit():
            needs.append(f"{t} needs LLVM {llvm} or newer")
    names = ", ".join(bad)
    first = next(iter(bad.values()))
    able = able_compiler(compiler, targets, **kw)
    if able is not None:
        way = (
            f"{able.describe()}, installed here, accepts {' '.join(str(t) for t in targets)}: check with it "
            f"(ROCM_BUILD_BACKEND_COMPILER={able.name}) and build with it (the project's HIP compiler: "
            f"HIPCXX or CMAKE_HIP_COMPILER)"
        )
    else:
        way = (
            "install a newer ROCm, choose other targets, or point the compiler setting at one that can "
            "(ROCM_BUILD_BACKEND_COMPILER=/opt/rocm/bin/amdclang++)"
        )
    raise ToolchainError(
        f"{compiler.describe()} cannot emit code for {names}: {first}",
        hint=("; ".join(needs) + "; " if needs else "") + way,
    )
