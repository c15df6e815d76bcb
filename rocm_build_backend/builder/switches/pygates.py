"""Which environment reads of a ``setup.py`` decide whether it builds a torch ``CUDAExtension``
(``ast``, never run): ``gating_reads``.

Names flow backwards from the places that choose a ``CUDAExtension`` (or ``.cu`` sources): the
test of an ``if`` or a conditional expression with one in a branch, an ``if`` that returns early
before one in the same body; then every name assigned (``=``, ``+=``, ``.append``, a ``for``
target) where a deciding name is assigned, and the tests of the ``if`` blocks those assignments
sit in, until nothing changes. An environment read in any of those expressions gates the
extension. A ROCm torch hipifies a ``CUDAExtension``: such a read serves both vendors.
"""

from __future__ import annotations

import ast
import re
from typing import Iterable

_CUDA_NAMES = frozenset({"CUDAExtension"})
#: a CMake definition a setup.py passes that names the GPU build: "-DNATTEN_WITH_CUDA=1", "-DGGML_CUDA=ON"
_DEFINE = r"(?i)^-D[A-Z0-9_]*(CUDA|HIP|ROCM|CUBLAS)[A-Z0-9_]*(:BOOL)?=(1|ON|TRUE|YES)$"  # compiled on first use
_ROUNDS = 12


def _is_cuda(node: ast.AST) -> bool:
    if isinstance(node, ast.Name) and node.id in _CUDA_NAMES:
        return True
    if isinstance(node, ast.Attribute) and node.attr in _CUDA_NAMES:
        return True
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (node.value.endswith(".cu") or bool(re.match(_DEFINE, node.value)))
    )


def cuda_inside(tree: ast.AST, parents: dict[ast.AST, ast.AST]) -> set[int]:
    """id() of every node whose subtree builds CUDA code, in one pass (each ancestor once)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if _is_cuda(node):
            here: ast.AST | None = node
            while here is not None and id(here) not in inside:
                inside.add(id(here))
                here = parents.get(here)
    return inside


def _has_cuda(nodes: Iterable[ast.AST], inside: set[int]) -> bool:
    return any(id(n) in inside for n in nodes)


def _names(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _targets(node: ast.AST) -> tuple[set[str], ast.AST | None]:
    """(names assigned, the value) of an assignment-like statement, else (empty, None)."""
    if isinstance(node, ast.Assign):
        return set().union(*(_names(t) for t in node.targets)), node.value
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return _names(node.target), node.value
    if isinstance(node, (ast.For, ast.comprehension)):
        return _names(node.target), node.iter
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("append", "extend", "insert", "add", "update")
        and isinstance(node.func.value, ast.Name)
    ):
        return {node.func.value.id}, node
    return set(), None


def _early_returns(tree: ast.AST, inside: set[int]) -> list[ast.If]:
    """``if`` statements that return (or continue) at once, followed in their body by a CUDAExtension."""
    out = []
    for block in ast.walk(tree):
        for field in ("body", "orelse"):
            stmts = getattr(block, field, None)
            if not isinstance(stmts, list):
                continue
            for i, st in enumerate(stmts):
                if (
                    isinstance(st, ast.If)
                    and st.body
                    and isinstance(st.body[-1], (ast.Return, ast.Continue))
                    and _has_cuda(stmts[i + 1 :], inside)
                ):
                    out.append(st)
    return out


def _deciders(tree: ast.AST, parents: dict[ast.AST, ast.AST], inside: set[int]) -> list[ast.AST]:
    """The expressions whose value decides whether a CUDAExtension is built."""
    exprs: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            branches = node.body if isinstance(node.body, list) else [node.body]
            other = node.orelse if isinstance(node.orelse, list) else [node.orelse]
            if _has_cuda(branches, inside) or _has_cuda(other, inside):
                exprs.append(node.test)
    exprs += [st.test for st in _early_returns(tree, inside)]
    names = set().union(*(_names(e) for e in exprs)) if exprs else set()
    assigns = [n for n in ast.walk(tree) if _targets(n)[1] is not None]
    for _ in range(_ROUNDS):
        grown = False
        for node in assigns:
            assigned, value = _targets(node)
            if not assigned & names:
                continue
            new = [value] if value is not None else []
            up = parents.get(node)
            while up is not None:  # the if blocks the assignment sits in
                if isinstance(up, ast.If):
                    new.append(up.test)
                up = parents.get(up)
            for e in new:
                if all(e is not x for x in exprs):
                    exprs.append(e)
                    more = _names(e) - names
                    if more:
                        names |= more
                        grown = True
        if not grown:
            break
    return exprs


def _first(tree: ast.AST, file: str) -> tuple[str, tuple[str, ...]] | None:
    """What the file builds for a GPU, in words, and the vendors it serves: a CUDAExtension (both:
    a ROCm torch hipifies it), else ``.cu`` sources (both, through torch), else a CMake definition."""
    hits = [n for n in ast.walk(tree) if _is_cuda(n)]
    for n in hits:
        if not isinstance(n, ast.Constant):
            return f"a torch CUDAExtension ({file} L{getattr(n, 'lineno', 0)}; a ROCm torch hipifies it)", (
                "amd",
                "nvidia",
            )
    texts = [(str(n.value), n.lineno) for n in hits if isinstance(n, ast.Constant)]
    for text, line in texts:
        if text.endswith(".cu"):
            return f"CUDA sources ({text[-60:]}, {file} L{line})", ("amd", "nvidia")
    for text, line in texts:
        amd = bool(re.search(r"HIP|ROCM", text, re.I))
        return f"{text} for CMake ({file} L{line})", ("amd",) if amd else ("nvidia",)
    return None


def gating_reads(
    tree: ast.AST, parents: dict[ast.AST, ast.AST], file: str = "setup.py"
) -> dict[int, tuple[str, tuple[str, ...]]]:
    """id(node) -> (what it decides, in words; the vendors whose build that is), for every node
    inside a deciding expression (an environment read among them gates the GPU build)."""
    first = _first(tree, file)
    if first is None:
        return {}
    found: dict[int, tuple[str, tuple[str, ...]]] = {}
    for expr in _deciders(tree, parents, cuda_inside(tree, parents)):
        for n in ast.walk(expr):
            found[id(n)] = first
    return found


def _negated(node: ast.AST, top: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether ``node`` sits under a ``not`` (or a ``!=``) inside the expression ``top``."""
    flips, here = 0, node
    while here is not top and here in parents:
        up = parents[here]
        if isinstance(up, ast.UnaryOp) and isinstance(up.op, ast.Not):
            flips += 1
        if isinstance(up, ast.Compare) and any(isinstance(op, (ast.NotEq, ast.IsNot, ast.NotIn)) for op in up.ops):
            flips += 1
        here = up
    return flips % 2 == 1


def _off_compared(node: ast.AST, top: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether ``node`` is compared (``==``) with an "off" word inside ``top``: ``getenv(X, "0") == "0"``."""
    here = node
    while here is not top and here in parents:
        up = parents[here]
        if isinstance(up, ast.Compare) and all(isinstance(op, ast.Eq) for op in up.ops):
            return any(
                isinstance(c, ast.Constant) and str(c.value).upper() in ("0", "FALSE", "OFF", "NO", "")
                for c in [up.left, *up.comparators]
            )
        here = up
    return False


def direct_reads(tree: ast.AST, parents: dict[ast.AST, ast.AST]) -> set[int]:
    """id(node) of every node that turns a CUDA build on directly, the way a switch named like
    none must before it counts as one: in the test of an ``if`` whose body builds it (not under a
    ``not``), in a test that returns early when compared with an "off" word, or assigned to a name
    such a test uses. Sign-aware where the backward flow of ``gating_reads`` is not."""
    inside = cuda_inside(tree, parents)
    out: set[int] = set()
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp)):
            body = node.body if isinstance(node.body, list) else [node.body]
            if _has_cuda(body, inside):
                for n in ast.walk(node.test):
                    if not _negated(n, node.test, parents):
                        out.add(id(n))
                        if isinstance(n, ast.Name):
                            used.add(n.id)
    for st in _early_returns(tree, inside):
        for n in ast.walk(st.test):
            if _off_compared(n, st.test, parents) != _negated(n, st.test, parents):
                out.add(id(n))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _names(node.targets[0]) & used and len(node.targets) == 1:
            out.update(id(n) for n in ast.walk(node.value) if not _negated(n, node.value, parents))
    return out
