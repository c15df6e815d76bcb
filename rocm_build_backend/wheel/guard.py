"""The optional import guard (``guard = true``): a wheel that refuses to import on the wrong GPU.

A wheel built for gfx90a and installed on a gfx942 machine (a reused pip cache, a copied
virtualenv) imports and then dies in the HIP runtime, often with a core dump. With the guard,
the top-level package's ``__init__.py`` starts with one import of a small generated module
that reads the KFD topology in sysfs (AMD code) or the GPUs' compute capability through NVML
with ``ctypes`` (NVIDIA code; no program runs) and raises ImportError naming the GPU it found
(``gfx90a``, ``sm_90``), the targets the wheel holds, and the command that rebuilds it.

The generated module is self-contained (standard library ``os`` and ``ctypes`` only) and
conservative: it passes when it cannot tell (no KFD, unreadable nodes, no NVIDIA driver
library, no GPU code in the wheel), when any
GPU of the machine is among the targets (features such as xnack are not compared; a generic
target counts for every processor it covers), and it honours ``HSA_OVERRIDE_GFX_VERSION``
(and the per-node ``HSA_OVERRIDE_GFX_VERSION_<n>`` values, each counted as a GPU).
``ROCM_BUILD_BACKEND_GUARD_OFF=1`` turns it off; ``ROCM_BUILD_BACKEND_SYSFS_ROOT`` points it at
another root holding ``sys/class/kfd/...`` (tests, containers).

This module writes the guard's source and edits ``__init__.py`` bytes; it must not decide
which targets a wheel holds (the build's audit does) nor touch a wheel on disk.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable, Iterable, Mapping

from rocm_build_backend.errors import WheelError
from rocm_build_backend.gpu.nvidia import loader
from rocm_build_backend.gpu.targets import parse_targets, sort_targets, table

GUARD_MODULE = "_rocm_build_guard"
GUARD_ENV = "ROCM_BUILD_BACKEND_GUARD_OFF"
SYSFS_ENV = "ROCM_BUILD_BACKEND_SYSFS_ROOT"
GUARD_MARK = "# rocm-build-backend import guard"
GUARD_LINE = f"from . import {GUARD_MODULE}  {GUARD_MARK} ({GUARD_ENV}=1 turns it off)"

_TEMPLATE = '''\
"""Import guard written by rocm-build-backend: stops this package from importing on a machine
whose GPUs it has no device code for. {guard_env}=1 turns it off."""

DIST = {dist!r}
TARGETS = {targets!r}
LOADS_ON = frozenset({loads_on!r})
CUDA_LOADS_ON = frozenset({cuda_loads_on!r})
PTX_FROM = {ptx_from!r}


def _gfx(major, minor, stepping):
    if major <= 0 or not 0 <= minor <= 15 or not 0 <= stepping <= 15:
        return None
    return "gfx%d%x%x" % (major, minor, stepping)


def _override(value):
    parts = value.strip().split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return _gfx(int(parts[0]), int(parts[1]), int(parts[2]))


def gpus(root=None, env=None):
    """[(processor, note)] for each GPU node KFD lists; [] when it cannot tell."""
    import os

    env = os.environ if env is None else env
    root = root or env.get({sysfs_env!r}) or "/"
    nodes = os.path.join(root, "sys/class/kfd/kfd/topology/nodes")
    try:
        names = sorted(os.listdir(nodes))
    except OSError:
        return []
    forced = _override(env.get("HSA_OVERRIDE_GFX_VERSION", ""))
    found = []
    for node in names:
        try:
            with open(os.path.join(nodes, node, "properties"), "rb") as fh:
                data = fh.read(65536)
        except OSError:
            continue
        start = data.find(b"gfx_target_version ")
        if start < 0:
            continue
        fields = data[start:start + 40].split(None, 2)
        try:
            value = int(fields[1])
        except (IndexError, ValueError):
            continue
        if value <= 0:
            continue  # a CPU node
        real = _gfx(value // 10000, value // 100 % 100, value % 100)
        if forced:
            found.append((forced, "KFD node %s, HSA_OVERRIDE_GFX_VERSION; the chip is %s" % (node, real)))
        elif real:
            found.append((real, "KFD node %s" % node))
    if found:
        for key, value in env.items():
            if key.startswith("HSA_OVERRIDE_GFX_VERSION_") and _override(value):
                found.append((_override(value), key))
    return found


def cuda_gpus(load=None):
    """[(sm_XY, note)] for each GPU NVML lists, read in this process through ctypes (no
    program runs); [] when it cannot tell (no NVIDIA driver library, NVML fails)."""
    import ctypes

    try:
        lib = (load or ctypes.CDLL)("libnvidia-ml.so.1")
    except OSError:
        return []
    if lib.nvmlInit_v2() != 0:
        return []
    found = []
    try:
        count = ctypes.c_uint(0)
        if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return []
        for i in range(min(count.value, 256)):
            handle, major, minor = ctypes.c_void_p(), ctypes.c_int(0), ctypes.c_int(0)
            if lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(i), ctypes.byref(handle)) != 0:
                continue
            if lib.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major), ctypes.byref(minor)) != 0:
                continue
            if 0 < major.value < 100 and 0 <= minor.value <= 9:
                found.append(("sm_%d%d" % (major.value, minor.value), "NVIDIA GPU %d" % i))
    finally:
        try:
            lib.nvmlShutdown()
        except Exception:
            pass
    return found


def _cuda_loads(device):
    if device in CUDA_LOADS_ON:
        return True
    return PTX_FROM is not None and device[3:].isdigit() and int(device[3:]) >= PTX_FROM


def check(root=None, env=None, load=None):
    """Raise ImportError when no GPU of this machine is among TARGETS; pass when unsure."""
    import os

    env = os.environ if env is None else env
    if env.get({guard_env!r}, "").strip().lower() in ("1", "true", "yes", "on"):
        return
    if not LOADS_ON and not CUDA_LOADS_ON and PTX_FROM is None:
        return
    found = gpus(root, env) if LOADS_ON else []
    if CUDA_LOADS_ON or PTX_FROM is not None:
        found += cuda_gpus(load)
    if not found or any(processor in LOADS_ON or _cuda_loads(processor) for processor, _ in found):
        return
    seen = ", ".join("%s (%s)" % item for item in found)
    raise ImportError(
        "%s was built for the GPU targets %s, and this machine has %s: its device code "
        "will not load here.\\n"
        "Rebuild it for this machine's GPU:\\n"
        "    pip install --no-cache-dir --force-reinstall --no-deps --no-binary %s %s\\n"
        "or: uv pip install --reinstall --no-cache --no-deps --no-binary-package %s %s\\n"
        "To import anyway, set {guard_env}=1."
        % (DIST, ", ".join(TARGETS), seen, DIST, DIST, DIST, DIST),
        name=__name__.rpartition(".")[0] or None,
    )

check()
'''


def guard_source(targets: Iterable[str], dist_name: str) -> str:
    """The source of the guard module for a wheel holding code for ``targets``.

    AMD: a generic target is expanded to the processors it covers, from the target table.
    NVIDIA: the devices of the target table the code loads on (``gpu.nvidia.loader``), and the
    oldest plain PTX (``compute_XY``), which the driver compiles for any newer device too.
    Both computed at build time, so the guard holds no rules of its own.
    """
    every = parse_targets(list(targets))
    parsed = [t for t in every if t.vendor == "amd"]
    cuda = [str(t) for t in every if t.vendor == "nvidia"]
    loads_on: set[str] = set()
    for t in parsed:
        if t.is_generic:
            loads_on.update(name for name, row in table().items() if row.get("generic") == t.processor)
        else:
            loads_on.add(t.processor)
    cuda_loads_on, ptx_from = _cuda_devices(cuda, table())
    return _TEMPLATE.format(
        dist=str(dist_name),
        targets=tuple(str(t) for t in sort_targets([t for t in every if t.vendor in ("amd", "nvidia")])),
        loads_on=sorted(loads_on),
        cuda_loads_on=sorted(cuda_loads_on),
        ptx_from=ptx_from,
        guard_env=GUARD_ENV,
        sysfs_env=SYSFS_ENV,
    )


def _cuda_devices(code: list[str], rows: Mapping[str, object]) -> tuple[set[str], int | None]:
    """The NVIDIA devices (``sm_XY`` rows of the target table) that ``code`` loads on, and the
    SM number of the oldest plain PTX target (None without one)."""
    if not code:
        return set(), None

    devices = [name for name in rows if name.startswith("sm_") and name[3:].isdigit()]
    loads = {d for d in devices if any(loader.loads_on(c, d) for c in code)}
    plain_ptx = [int(c[8:]) for c in code if c.startswith("compute_") and c[8:].isdigit()]
    return loads, min(plain_ptx) if plain_ptx else None


def insert_guard_import(source: bytes) -> bytes:
    """``__init__.py`` bytes with GUARD_LINE added as its first statement.

    It goes after an encoding line, the module docstring and ``from __future__`` imports (which
    must stay first), keeps the file's encoding and line endings, and is added only once.
    """
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(source).readline)[0]
        text = source.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        raise WheelError("cannot add the import guard: the package's __init__.py cannot be decoded",
                         hint='set guard = false') from None
    if GUARD_MARK in text:
        return source
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    after = 0
    try:
        body = ast.parse(text).body
    except (SyntaxError, ValueError):
        body = []
    i = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        after, i = body[0].end_lineno or 0, 1
    while i < len(body):
        stmt = body[i]
        if not (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"):
            break
        after, i = stmt.end_lineno or after, i + 1
    if after == 0:
        while after < min(2, len(lines)) and re.match(r"[ \t\f]*#(!|.*coding[:=])", lines[after]):
            after += 1
    head = lines[:after]
    if head and not head[-1].endswith(("\n", "\r")):
        head[-1] += newline
    return "".join(head + [GUARD_LINE + newline] + lines[after:]).encode(encoding)


def guard_patch(wheel_member_names: Iterable[str], top_level: str) -> tuple[str, Callable[[bytes], bytes]]:
    """(the guard module's member name, the patch for ``<top_level>/__init__.py``).

    Raises WheelError when ``top_level`` is not a package in the wheel (a namespace package or
    a single module has no ``__init__.py`` to start from).
    """
    names = set(wheel_member_names)
    if not top_level.isidentifier():
        raise WheelError(f"cannot add the import guard: {top_level!r} is not a package name")
    init = f"{top_level}/__init__.py"
    if init not in names:
        raise WheelError(
            f"cannot add the import guard: the wheel has no {init}",
            hint="the guard needs a regular top-level package; set guard = false",
        )
    return f"{top_level}/{GUARD_MODULE}.py", insert_guard_import


def top_level_packages(wheel_member_names: Iterable[str]) -> list[str]:
    """The regular packages at the top of a wheel (folders with an ``__init__.py``)."""
    out = set()
    for name in wheel_member_names:
        top, _, rest = name.partition("/")
        if rest == "__init__.py" and top.isidentifier():
            out.add(top)
    return sorted(out)


def guard_files(
    wheel_member_names: Iterable[str],
    targets: Iterable[str],
    dist_name: str,
    top_level: Iterable[str] | None = None,
) -> tuple[dict[str, bytes], dict[str, Callable[[bytes], bytes]]]:
    """``(extra_files, patch_files)`` for ``rewrite_wheel``: a guard in each top-level package.

    ``top_level`` defaults to every regular top-level package in the wheel.
    """
    names = list(wheel_member_names)
    packages = list(top_level) if top_level is not None else top_level_packages(names)
    if not packages:
        raise WheelError(
            "cannot add the import guard: the wheel has no top-level package with an __init__.py",
            hint="set guard = false",
        )
    source = guard_source(list(targets), dist_name).encode("utf-8")
    extra, patches = {}, {}
    for package in packages:
        member, patch = guard_patch(names, package)
        extra[member] = source
        patches[f"{package}/__init__.py"] = patch
    return extra, patches
