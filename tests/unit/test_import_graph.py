"""The import graph is what docs/architecture.md says: no cycles; imports at the top of every
module, except where an entry point loads what it runs when it is called (the one lazy
mechanism) and optional dependencies probed where they are used; the layer contracts of
pyproject.toml's ``[tool.importlinter]`` kept (``lint-imports``); and the lazy loading does what
it is there for, measured in fresh interpreters against the modules each had at its start.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rocm_build_backend"
HOOKS = "__init__.py"


def entry_point_may_import(rel: str, name: str) -> bool:
    """The one lazy mechanism: an entry point imports what it runs when it is called. The hooks
    (each imports its module of the build layer), the command line's verbs (each imports the
    library module it runs) and a GPU vendor's registry object (its probes, when detection runs)."""
    if rel == HOOKS:
        return name.startswith("rocm_build_backend.builder.")
    if rel.startswith("cli/"):
        return not name.startswith(("rocm_build_backend.cli", "."))
    parts = rel.split("/")
    if len(parts) == 3 and parts[0] == "gpu" and parts[2] == "vendor.py":
        return name.startswith(f"rocm_build_backend.gpu.{parts[1]}.")
    return False


# where a module is imported by a name known only at run time
DYNAMIC = {
    "api.py": "the public API loads each name from its home on first use",
    "builder/backend.py": "the wrapped backend, named in the project's pyproject.toml",
    "gpu/vendor.py": "the vendor registry, which names each vendor by module:attribute",
}


# ----------------------------------------------------------------------------- the AST check


def _catches_import_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(isinstance(t, ast.Name) and t.id in ("ImportError", "ModuleNotFoundError") for t in types):
            return True
    return False


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return ["." * node.level + (node.module or "")]


def late_imports(source: str, rel: str) -> list[str]:
    """Imports made inside a function that the rules do not allow, as "path:line: module"."""
    bad: list[str] = []

    def visit(node: ast.AST, in_function: bool, optional: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING":
                continue  # never runs
            if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
                for name in _imported(child):
                    ours = name.startswith((".", "rocm_build_backend"))
                    if not (entry_point_may_import(rel, name) or (optional and not ours)):
                        bad.append(f"{rel}:{child.lineno}: {name}")
            visit(
                child,
                in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)),
                optional or (isinstance(child, ast.Try) and _catches_import_error(child)),
            )

    visit(ast.parse(source), False, False)
    return bad


def dynamic_imports(source: str) -> int:
    """Calls of importlib.import_module or __import__."""
    count = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            count += name in ("import_module", "__import__")
    return count


def _modules() -> dict[str, str]:
    return {p.relative_to(PACKAGE).as_posix(): p.read_text(encoding="utf-8") for p in sorted(PACKAGE.rglob("*.py"))}


def test_imports_are_at_the_top_except_at_entry_points_and_optional_dependencies():
    bad = [line for rel, text in _modules().items() for line in late_imports(text, rel)]
    assert bad == []


def test_the_check_finds_late_imports():
    assert late_imports("def f():\n    import json\n", "x.py") == ["x.py:2: json"]
    assert late_imports("def f():\n    from rocm_build_backend.gpu import targets\n", HOOKS) == [
        "__init__.py:2: rocm_build_backend.gpu"
    ]
    optional_ours = "def f():\n    try:\n        from . import x\n    except ImportError:\n        pass\n"
    assert late_imports(optional_ours, "x.py") == ["x.py:3: ."]
    optional = "def f():\n    try:\n        import zstandard\n    except ImportError:\n        return None\n"
    assert late_imports(optional, "x.py") == []
    assert late_imports("def f():\n    from rocm_build_backend.builder.flow import build\n", HOOKS) == []
    assert (
        late_imports("def f():\n    from rocm_build_backend.wheel.index.run import build_index\n", "cli/wheels.py")
        == []
    )
    assert late_imports("def f():\n    from rocm_build_backend.cli.common import Command\n", "cli/wheels.py") != []
    assert late_imports("def f():\n    from rocm_build_backend.gpu.amd.kfd import x\n", "gpu/amd/vendor.py") == []
    assert late_imports("def f():\n    from rocm_build_backend.gpu.nvidia import x\n", "gpu/amd/vendor.py") != []
    assert late_imports("def f():\n    from rocm_build_backend.gpu.amd import x\n", "gpu/amd/names.py") != []
    assert late_imports("import json\nif TYPE_CHECKING:\n    import zipfile\n", "x.py") == []


def test_modules_imported_by_a_run_time_name_are_the_named_ones():
    found = {rel for rel, text in _modules().items() if dynamic_imports(text)}
    assert found == set(DYNAMIC)


# ------------------------------------------------------------------------- cycles, contracts


def _graph(root: Path) -> dict:
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "import_graph.py"), "--json", "--root", str(root)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\nfrom importlinter.cli import lint_imports\n"
        "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))\n"
    )
    return subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(root)!r})\n" + code],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(PACKAGE, tree / "rocm_build_backend", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_no_import_cycles():
    assert _graph(ROOT)["cycles"] == []


def test_no_cycle_through_the_type_checkers_imports_either():
    assert _graph(ROOT)["type_only_cycles"] == []


def test_the_layer_contracts_are_kept():
    out = _lint(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


def test_a_broken_layer_or_a_cycle_is_found(tmp_path):
    tree = _copy(tmp_path)
    with open(tree / "rocm_build_backend" / "gpu" / "table.py", "a") as fh:  # gpu uses wheel: upward
        fh.write("\nfrom rocm_build_backend.wheel import stamp  # noqa\n")
    with open(tree / "rocm_build_backend" / "__init__.py", "a") as fh:  # the hooks module, eagerly
        fh.write("\nimport rocm_build_backend.gpu.targets  # noqa\n")
    with open(tree / "rocm_build_backend" / "errors.py", "a") as fh:  # errors <- gpu.targets: a cycle
        fh.write("\nfrom rocm_build_backend.gpu import targets  # noqa\n")
    out = _lint(tree)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "rocm_build_backend.gpu.table -> rocm_build_backend.wheel.stamp" in out.stdout
    assert "rocm_build_backend -> rocm_build_backend.gpu.targets" in out.stdout
    cycles = _graph(tree)["cycles"]
    assert any({"rocm_build_backend.errors", "rocm_build_backend.gpu.targets"} <= set(c) for c in cycles)


# --------------------------------------------------------- what the lazy mechanism is there for


def _fresh(code: str, *, cwd: Path, site: bool = True) -> list[str]:
    """The modules ``code`` loads in a fresh, isolated interpreter, beyond those it started with."""
    wrapped = (
        f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n_before = set(sys.modules)\n{code}\n"
        "print(__import__('json').dumps(sorted(set(sys.modules) - _before)))\n"
    )
    argv = [sys.executable, "-I", *([] if site else ["-S"]), "-c", wrapped]
    out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _ours(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] == "rocm_build_backend"]


def test_importing_the_backend_loads_the_hooks_module_and_the_version(tmp_path):
    assert _ours(_fresh("import rocm_build_backend", cwd=tmp_path, site=False)) == [
        "rocm_build_backend",
        "rocm_build_backend._version",
    ]


@pytest.mark.parametrize("eager", [False, True])
def test_the_requires_hook_loads_no_build_step(tmp_path, eager):
    project = tmp_path / "pure_python"
    shutil.copytree(
        ROOT / "sample_projects" / "pure_python",
        project,
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
    )
    code = (
        "import rocm_build_backend as b\n"
        + ("import rocm_build_backend.builder.flow\n" if eager else "")
        + "assert b.get_requires_for_build_wheel() == []\n"
    )
    loaded = _ours(_fresh(code, cwd=project))
    steps = [
        m
        for m in loaded
        if m.startswith(
            (
                "rocm_build_backend.binary",
                "rocm_build_backend.wheel",
                "rocm_build_backend.builder.flow",
                "rocm_build_backend.builder.plan",
            )
        )
        # the log's escaping of error lines: a leaf importing only re (its package init imports nothing)
        and m not in ("rocm_build_backend.binary", "rocm_build_backend.binary.printable")
    ]
    assert "rocm_build_backend.builder.delegate" in loaded
    if eager:  # what the hooks module would cost if it imported the flow at its top
        assert "rocm_build_backend.binary.audit" in steps and "rocm_build_backend.wheel.stamp" in steps
    else:
        assert steps == []


def test_the_command_line_parser_loads_no_verb(tmp_path):
    loaded = _ours(_fresh("from rocm_build_backend.cli import parser\nparser()", cwd=tmp_path, site=False))
    assert "rocm_build_backend.cli.wheels" in loaded
    # the renderer's one escaping function (binary/printable.py, standard library only) is the
    # one piece of a lower layer the parser may load
    escaping = {"rocm_build_backend.binary", "rocm_build_backend.binary.printable"}
    assert [
        m
        for m in loaded
        if m.startswith(("rocm_build_backend.builder", "rocm_build_backend.binary", "rocm_build_backend.wheel"))
        and m not in escaping
    ] == []


def test_naming_a_target_loads_no_probe(tmp_path):
    probes = ("rocm_build_backend.gpu.amd.detection", "rocm_build_backend.gpu.nvidia.probe")
    code = "from rocm_build_backend.gpu.targets import parse_targets\nparse_targets('gfx90a sm_90')\n"
    loaded = _ours(_fresh(code, cwd=tmp_path, site=False))
    assert "rocm_build_backend.gpu.amd.vendor" in loaded and "rocm_build_backend.gpu.nvidia.vendor" in loaded
    assert [m for m in probes if m in loaded] == []
    code += f"from rocm_build_backend.gpu.detect import detect\ndetect(root={str(tmp_path)!r}, env={{}})\n"
    assert [m for m in probes if m in _ours(_fresh(code, cwd=tmp_path, site=False))] == list(probes)
