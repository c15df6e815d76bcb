"""The optional import guard (``guard = true``): a wheel that refuses to import on the wrong GPU.

A wheel built for gfx90a and installed on a gfx942 machine (a reused pip cache, a copied
virtualenv) imports and then dies in the GPU runtime, often with a core dump. With the guard,
the top-level package's ``__init__.py`` starts with one import of a small generated module
that asks each vendor's probe for the machine's GPUs (AMD: the KFD topology in sysfs; NVIDIA:
the compute capability through NVML with ``ctypes``; no program runs) and raises ImportError
naming the GPU it found (``gfx90a``, ``sm_90``), the targets the wheel holds, and the command
that rebuilds it. Each vendor writes its own part (``BuildVendor.guard_part``: a probe, a
"loads on" test and the data computed at build time); this module joins them.

The generated module is self-contained (standard library ``os`` and ``ctypes`` only) and
conservative: it passes when it cannot tell (no probe sees a GPU, no GPU code in the wheel)
and when any GPU of the machine runs the wheel's code. ``ROCM_BUILD_BACKEND_GUARD_OFF=1``
turns it off.

This module writes the guard's source and edits ``__init__.py`` bytes; it must not decide
which targets a wheel holds (the build's audit does) nor touch a wheel on disk.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable, Iterable

from rocm_build_backend.errors import WheelError
from rocm_build_backend.gpu.build import GuardPart
from rocm_build_backend.gpu.targets import parse_targets, sort_targets
from rocm_build_backend.gpu.build import build_side
from rocm_build_backend.gpu.vendor import vendors

GUARD_MODULE = "_rocm_build_guard"
GUARD_ENV = "ROCM_BUILD_BACKEND_GUARD_OFF"
GUARD_MARK = "# rocm-build-backend import guard"
GUARD_LINE = f"from . import {GUARD_MODULE}  {GUARD_MARK} ({GUARD_ENV}=1 turns it off)"

_HEAD = '''\
"""Import guard written by rocm-build-backend: stops this package from importing on a machine
whose GPUs it has no device code for. {guard_env}=1 turns it off."""

DIST = {dist!r}
TARGETS = {targets!r}
'''

_CHECK = '''

def check(root=None, env=None, load=None):
    """Raise ImportError when no GPU of this machine runs the wheel's code; pass when unsure."""
    import os

    env = os.environ if env is None else env
    if env.get({guard_env!r}, "").strip().lower() in ("1", "true", "yes", "on"):
        return
    found = []
    for probe, loads in PARTS:
        found += [(device, note, loads) for device, note in probe(root, env, load)]
    if not found or any(loads(device) for device, _, loads in found):
        return
    seen = ", ".join("%s (%s)" % (device, note) for device, note, _ in found)
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


def _literal(value: object) -> str:
    """A constant as Python source; sets sorted, so the same wheel gets the same bytes."""
    if isinstance(value, (set, frozenset)):
        return f"frozenset({sorted(value)!r})"
    return repr(value)


def guard_source(targets: Iterable[str], dist_name: str) -> str:
    """The source of the guard module for a wheel holding code for ``targets``.

    Every vendor's part is written (its probe runs only when the wheel holds its code); each
    part's data is computed at build time, so the guard holds no rules of its own.
    """
    every = parse_targets(list(targets))
    parts: list[GuardPart] = []
    for vendor in vendors():
        part = build_side(vendor).guard_part(every)
        if part is not None:
            parts.append(part)
    out = [_HEAD.format(dist=str(dist_name), targets=tuple(str(t) for t in sort_targets(every)), guard_env=GUARD_ENV)]
    for part in parts:
        out += [f"{name} = {_literal(value)}\n" for name, value in part.constants.items()]
    for part in parts:
        out.append("\n" + part.source)
    active = [f"({p.probe}, {p.loads})" for p in parts if p.active]
    out.append("\n\nPARTS = (" + "".join(a + ", " for a in active).rstrip(" ") + ")\n")
    out.append(_CHECK.format(guard_env=GUARD_ENV))
    return "".join(out)


def insert_guard_import(source: bytes) -> bytes:
    """``__init__.py`` bytes with GUARD_LINE added as its first statement.

    It goes after an encoding line, the module docstring and ``from __future__`` imports (which
    must stay first), keeps the file's encoding and line endings, and is added only once.
    """
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(source).readline)[0]
        text = source.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        raise WheelError(
            "cannot add the import guard: the package's __init__.py cannot be decoded", hint="set guard = false"
        ) from None
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
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
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
