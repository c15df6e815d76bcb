"""Switches in ``setup.py`` (read with ``ast``, never run) and ``setup.cfg``.

Found in ``setup.py``:

- environment reads: ``os.environ.get("X", d)``, ``os.getenv("X", d)``, ``os.environ["X"]``,
  ``"X" in os.environ`` (and ``environ``/``getenv`` imported from ``os``, a loop over a list of
  names, a function of the file that reads the variable its first parameter names), for the names
  ``names.role`` calls GPU switches; the values the read is compared with
  (``os.getenv("FORCE_CUDA", "0") == "1"``, ``.lower() in ("1", "true")``) say what turns it on;
- guards on ``torch.cuda.is_available()``;
- downloads (``urlretrieve``, ``urlopen``, ``requests.get``, ``wget``) in a ``bdist_wheel``
  command of the project's own, in a file that names a ``.whl``: a prebuilt wheel fetched instead
  of a build (flash-attention, causal-conv1d, mamba-ssm);
- hard-coded target lists: strings such as ``arch=compute_90,code=sm_90``, ``-arch=sm_80``,
  ``--offload-arch=gfx908``, one finding per file and vendor with every target they name.

A file that does not parse gives nothing. Pure: text in, findings out.
"""

from __future__ import annotations

import ast
import configparser
import re
from typing import Iterator

from rocm_build_backend.builder.switches.findings import Finding, first_lines
from rocm_build_backend.builder.switches.names import role, switch_like, vendor_switches
from rocm_build_backend.builder.switches.pygates import direct_reads, gating_reads

_ON = ("1", "TRUE", "ON", "YES", "Y")
_DOWNLOADS = frozenset({"urlretrieve", "urlopen", "download_url", "wget", "download"})
_TEXT = 160
_ONLY = re.compile(r"(^|_)ONLY(_|$)")


def _dotted(node: ast.AST) -> str:
    """``os.environ.get`` for the expression naming a function, ``""`` when it is not a name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _const(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool)) and node.value is not None:
        return str(node.value)
    return None


def _loop_values(name: ast.AST, node: ast.AST, parents: dict[ast.AST, ast.AST]) -> list[str]:
    """The constants a loop variable takes: ``for key in ["A", "B"]: os.environ.get(key)``."""
    if not isinstance(name, ast.Name):
        return []
    up = parents.get(node)
    while up is not None:
        if (
            isinstance(up, ast.For)
            and isinstance(up.target, ast.Name)
            and up.target.id == name.id
            and isinstance(up.iter, (ast.List, ast.Tuple))
        ):
            return [c for c in (_const(e) for e in up.iter.elts) if c is not None]
        up = parents.get(up)
    return []


def _in_wheel_command(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether ``node`` is inside a ``bdist_wheel`` command of the project's own (the "cached
    wheels" pattern: ``class CachedWheelsCommand(_bdist_wheel)``), or a function it calls from there
    is not followed: downloads elsewhere (opt-in precompiled builds) are not the default path."""
    here = node
    while here in parents:
        here = parents[here]
        if isinstance(here, ast.ClassDef):
            return any("bdist_wheel" in _dotted(b) for b in here.bases)
    return False


def _env_functions(tree: ast.AST) -> frozenset[str]:
    """Functions of the file that read the environment variable named by their first parameter
    (DeepSpeed's ``get_env_if_set(key, default)``): a call of one is an environment read."""
    names = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.args.args:
            first = fn.args.args[0].arg
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Call)
                    and node.args
                    and isinstance(node.args[0], ast.Name)
                    and node.args[0].id == first
                    and _dotted(node.func) in _READERS
                ):
                    names.add(fn.name)
    return frozenset(names)


_READERS = ("os.environ.get", "environ.get", "os.getenv", "getenv")


def _env_names(
    node: ast.AST, parents: dict[ast.AST, ast.AST], functions: frozenset[str] = frozenset()
) -> list[tuple[str, str | None]]:
    """(variable, default) for each variable ``node`` reads from the environment."""
    if isinstance(node, ast.Call) and node.args:
        func = _dotted(node.func)
        if func in _READERS or func in functions:
            default = _const(node.args[1]) if len(node.args) > 1 else None
            name = _const(node.args[0])
            names = [name] if name else _loop_values(node.args[0], node, parents)
            return [(n, default) for n in names]
    one = _env_name(node)
    return [one] if one else []


def _env_name(node: ast.AST) -> tuple[str, str | None] | None:
    """(variable, default) when ``node`` reads one constant name from the environment."""
    if isinstance(node, ast.Subscript) and _dotted(node.value) in ("os.environ", "environ"):
        name = _const(node.slice)
        return (name, None) if name else None
    if (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.In)
        and _dotted(node.comparators[0]) in ("os.environ", "environ")
    ):
        name = _const(node.left)
        return (name, None) if name else None
    return None


def _sign(test: ast.AST) -> tuple[str, int] | None:
    """(vendor, +1) when an ``if`` test asks for a vendor's toolchain (AMD's: ``IS_ROCM``,
    ``torch.version.hip``, ``BUILD_TARGET == "rocm"``; ``BuildVendor.switches.picks_toolchain``),
    (vendor, -1) when it asks for its absence (``not IS_ROCM``), else None."""
    parents = {child: node for node in ast.walk(test) for child in ast.iter_child_nodes(node)}
    vendors = vendor_switches()
    for node in ast.walk(test):
        text = _dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else _const(node) or ""
        if not text or isinstance(parents.get(node), ast.Attribute):
            continue
        picked = next((name for name, sw in vendors if sw.picks_toolchain(text)), None)
        if picked is None:
            continue
        sign, here = 1, node
        while here in parents:
            up = parents[here]
            if isinstance(up, ast.UnaryOp) and isinstance(up.op, ast.Not):
                sign = -sign
            if isinstance(up, ast.Compare) and any(isinstance(op, (ast.NotEq, ast.IsNot, ast.NotIn)) for op in up.ops):
                sign = -sign
            here = up
        return picked, sign
    return None


def _branch(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str | None:
    """The vendor (its registry name) whose builds alone take the branch ``node`` sits in: the
    one its test picks, or for the other branch the one other vendor there is."""
    here = node
    while here in parents:
        up = parents[here]
        if isinstance(up, (ast.If, ast.IfExp)):
            found = _sign(up.test)
            body = up.body if isinstance(up.body, list) else [up.body]
            if found and here is not up.test:
                picked, sign = found
                if (sign > 0) == (here in body):
                    return picked
                others = [name for name, _ in vendor_switches() if name != picked]
                return others[0] if len(others) == 1 else None
        here = up
    return None


def _compared(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> list[str]:
    """The constants the read at ``node`` is compared with, through ``.lower()``, ``int()`` and the like."""
    here = node
    for _ in range(4):
        up = parents.get(here)
        if isinstance(up, ast.Attribute) and up.attr in ("lower", "upper", "strip", "casefold"):
            here = parents.get(up, up)
            continue
        if isinstance(up, ast.Call) and _dotted(up.func) in ("int", "bool", "str", "float"):
            here = up
            continue
        if isinstance(up, ast.Compare):
            out: list[str] = []
            for side in [up.left, *up.comparators]:
                items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                out += [c for c in (_const(i) for i in items) if c is not None]
            return out
        break
    return []


def _turns_on(choices: list[str], default: str | None, switch_role: str) -> str | None:
    """The value to give a switch: the first "on" word it is compared with, else what it is compared
    with that is not its default, else 1."""
    for c in choices:
        if c.upper() in _ON:
            return c
    others = [c for c in choices if c != default]
    if others and switch_role != "gpu-off":
        return others[0]
    if not choices and default and default.upper() not in ("0", "FALSE", "OFF", "NO", "N", ""):
        return None  # compared elsewhere, with a default that is no "off": the value is the project's to say
    return "1"


def _line(lines: list[str], n: int) -> str:
    return lines[n - 1].strip()[:_TEXT] if 0 < n <= len(lines) else ""


def _strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every string constant but docstrings (words about flags are no flags)."""
    docs = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield getattr(node, "lineno", 0), node.value


def _number(target: str) -> tuple[int, str]:
    m = re.search(r"(\d+)", target)
    return (int(m.group(1)) if m else 0, target)


def _hard_coded(tree: ast.AST, file: str, lines: list[str]) -> list[Finding]:
    """One finding per vendor whose compilers' target options (``BuildVendor.switches.flag_targets``)
    the file's strings hold, with every target they name."""
    vendors = vendor_switches()
    found: dict[str, tuple[int, list[str]]] = {}
    for lineno, text in _strings(tree):
        for name, sw in vendors:
            targets = sw.flag_targets(text)
            if targets:
                first, have = found.get(name, (lineno, []))
                found[name] = (min(first, lineno), have + [t for t in targets if t not in have])
    flags = dict((name, sw.flag) for name, sw in vendors)
    return [
        Finding(
            file,
            line,
            "hard-coded",
            flags[name],
            "hard-coded",
            " ".join(sorted(targets, key=_number)),
            vendor=name,
            text=_line(lines, line),
        )
        for name, (line, targets) in found.items()
    ]


def scan_python(text: str, file: str) -> list[Finding]:
    """The switches of one ``setup.py``-like file."""
    try:
        tree = ast.parse(text, filename=file)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = text.splitlines()
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    wheel = any(".whl" in s for _, s in _strings(tree)) or any(
        isinstance(n, ast.JoinedStr) and ".whl" in ast.unparse(n) for n in ast.walk(tree)
    )
    found: list[Finding] = []
    seen: set[tuple[str, int]] = set()
    functions = _env_functions(tree)
    gates = gating_reads(tree, parents, file)
    direct = direct_reads(tree, parents) if gates else set()
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        reads = _env_names(node, parents, functions)
        for name, default in reads:
            kind = role(name)
            choices = _compared(node, parents)
            gating, serves = gates.get(id(node), ("", ()))
            if (
                kind is None
                and gating
                and id(node) in direct
                and (choices or default is not None)
                and switch_like(name)
            ):
                kind = "gpu-on"  # named like no switch, but it decides the CUDAExtension (MMCV_WITH_OPS)
            if kind is None or (name, line) in seen:
                continue
            seen.add((name, line))
            value = _turns_on(choices, default, kind) if kind in ("gpu-on", "prebuilt", "gpu-off") else None
            branch = _branch(node, parents)
            on = bool(gating) and kind == "gpu-on"
            only = on and bool(_ONLY.search(name.upper()))  # FORCE_ONLY_CUDA: the CPU build goes away
            on = on and not only
            found.append(
                Finding(
                    file,
                    line,
                    "env",
                    name,
                    kind,
                    value,
                    default,
                    tuple(choices),
                    vendor=branch,
                    text=_line(lines, line),
                    gates=((branch,) if branch else serves) if on else (),
                    evidence=gating if on else "",
                    left_off="it builds the GPU code only, dropping the CPU build" if only else "",
                )
            )
        if not reads and isinstance(node, ast.Call):
            func = _dotted(node.func)
            last = func.rsplit(".", 1)[-1]
            if func.endswith("cuda.is_available"):
                found.append(
                    Finding(file, line, "cuda-guard", "torch.cuda.is_available()", "guard", text=_line(lines, line))
                )
            elif (
                wheel
                and (last in _DOWNLOADS or func in ("requests.get", "httpx.get"))
                and _in_wheel_command(node, parents)
            ):
                found.append(Finding(file, line, "download", func, "prebuilt", text=_line(lines, line)))
    found += _hard_coded(tree, file, lines)
    return sorted(found, key=lambda f: (f.line, f.name))


def scan_setup_cfg(text: str, file: str) -> list[Finding]:
    """Keys of ``setup.cfg`` named like GPU switches (rare; a ``[build_ext]`` table is read by
    ``builder.parallel``)."""
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    lines = text.splitlines()
    first = first_lines(lines, lower=True)
    found = []
    for section in parser.sections():
        for key in parser[section]:
            kind = role(key)
            if kind in ("gpu-on", "gpu-off", "targets"):
                line = first.get(key.lower(), 0)
                found.append(
                    Finding(
                        file,
                        line,
                        "setup-cfg",
                        f"[{section}] {key}",
                        kind,
                        default=parser[section][key],
                        text=_line(lines, line),
                    )
                )
    return found
