"""The package's own import graph, read from the source with ``ast`` (nothing is imported).

    python3 tools/import_graph.py            # the numbers, the cycles, the function-level imports
    python3 tools/import_graph.py --json     # the same as one JSON document
    python3 tools/import_graph.py --root DIR # the package under DIR instead of this checkout's

An edge is one pair (importing module, imported module) inside ``rocm_build_backend``; an
import of ``pkg.mod`` or ``from pkg import mod`` counts as an edge to the module, ``from pkg
import name`` as one to the package. Imports under ``if TYPE_CHECKING:`` are not run and are
left out. An edge is *made inside a function* when every statement that makes it sits in a
function body. Cycles are the strongly connected components of the run-time graph (any size
above one, or a module that imports itself); ``type_only_cycles`` are those that the type
checker's imports (``if TYPE_CHECKING:``) close.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "rocm_build_backend"


def module_names(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    out: dict[str, Path] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module, type_only: bool = False) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every run-time import statement with whether it sits in a function body; with
    ``type_only`` the ``if TYPE_CHECKING:`` imports too."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child) and not type_only:
                for other in child.orelse:
                    visit(other, in_function)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, in_function))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def _targets(stmt: ast.Import | ast.ImportFrom, here: str, is_package: bool, modules: dict[str, Path]) -> list[str]:
    if isinstance(stmt, ast.Import):
        names = [a.name for a in stmt.names]
        return [_nearest(n, modules) for n in names if n.split(".")[0] == PACKAGE]
    base = stmt.module or ""
    if stmt.level:
        parts = here.split(".") if is_package else here.split(".")[:-1]
        parts = parts[: len(parts) - (stmt.level - 1)]
        base = ".".join(parts + ([base] if base else []))
    if base.split(".")[0] != PACKAGE:
        return []
    out = []
    for alias in stmt.names:
        sub = f"{base}.{alias.name}"
        out.append(sub if sub in modules else _nearest(base, modules))
    return out


def _nearest(name: str, modules: dict[str, Path]) -> str:
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def graph(root: Path = ROOT) -> dict[str, object]:
    modules = module_names(root)
    top: set[tuple[str, str]] = set()
    inner: dict[tuple[str, str], list[int]] = {}
    typed: set[tuple[str, str]] = set()  # every edge, the type checker's imports included
    lines = 0
    for name, path in modules.items():
        text = path.read_text(encoding="utf-8")
        lines += len(text.splitlines())
        tree = ast.parse(text)
        for stmt, _ in _imports(tree, type_only=True):
            typed.update((name, t) for t in _targets(stmt, name, path.name == "__init__.py", modules) if t != name)
        for stmt, in_function in _imports(tree):
            for target in _targets(stmt, name, path.name == "__init__.py", modules):
                if target == name:
                    continue
                if in_function:
                    inner.setdefault((name, target), []).append(stmt.lineno)
                else:
                    top.add((name, target))
    edges = top | set(inner)
    only_inner = {e: ln for e, ln in inner.items() if e not in top}
    return {
        "modules": len(modules),
        "lines": lines,
        "edges": len(edges),
        "edges_inside_functions": len(only_inner),
        "percent_inside_functions": round(100 * len(only_inner) / max(len(edges), 1), 1),
        "function_level_imports": sorted(f"{a} -> {b} (line {min(ln)})" for (a, b), ln in only_inner.items()),
        "cycles": cycles(edges),
        "type_only_cycles": [c for c in cycles(typed) if c not in cycles(edges)],
        "edge_list": sorted(f"{a} -> {b}" for a, b in edges),
    }


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    succ: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for start in succ:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on.add(node)
            if i < len(succ[node]):
                work.append((node, i + 1))
                nxt = succ[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--root", type=Path, default=ROOT, help="the folder that holds rocm_build_backend/")
    args = parser.parse_args(argv)
    doc = graph(args.root)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    for key in ("modules", "lines", "edges", "edges_inside_functions", "percent_inside_functions"):
        print(f"{key}: {doc[key]}")
    print(f"cycles: {len(doc['cycles'])}")  # type: ignore[arg-type]
    for comp in doc["cycles"]:  # type: ignore[attr-defined]
        print("  " + " <-> ".join(comp))
    print("function-level imports:")
    for line in doc["function_level_imports"]:  # type: ignore[attr-defined]
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
