"""The import guard: a generated module that refuses to import on a GPU the wheel has no code for."""

from __future__ import annotations

import ast

import pytest

from rocm_build_backend.errors import WheelError
from rocm_build_backend.wheel.guard import (
    GUARD_LINE,
    GUARD_MODULE,
    guard_files,
    guard_patch,
    guard_source,
    insert_guard_import,
    top_level_packages,
)
from helpers import guard_root, nvml


def load_guard(targets, dist="tiny-gpu-pkg") -> dict:
    """The generated module's namespace, without running its import-time check."""
    source = guard_source(targets, dist)
    tree = ast.parse(source)
    assert isinstance(tree.body[-1], ast.Expr)  # the final check() call
    tree.body = tree.body[:-1]
    ns = {"__name__": "pkg." + GUARD_MODULE}
    exec(compile(tree, "<guard>", "exec"), ns)
    return ns


def test_generated_module_is_self_contained():
    source = guard_source(["gfx90a", "gfx11-generic"], "tiny-gpu-pkg")
    tree = ast.parse(source)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or ".")
    assert imported == {"os", "ctypes"}
    assert "rocm_build_backend" not in source.replace("rocm-build-backend", "")
    assert ast.get_docstring(tree)


def test_hostile_dist_name_is_a_literal():
    ns = load_guard(["gfx90a"], dist="x'); import shutil; ('")
    assert ns["DIST"] == "x'); import shutil; ('"


@pytest.mark.parametrize(
    "targets,nodes,env,raises",
    [
        (["gfx90a"], [90010], {}, False),
        (["gfx90a"], [90400], {}, True),  # gfx940
        (["gfx90a:sramecc+:xnack-"], [90010], {}, False),  # features are not compared
        (["gfx90a"], [90400, 90010], {}, False),  # one GPU of the machine is enough
        (["gfx90a", "gfx942"], [90402] * 8, {}, False),
        (["gfx942"], [], {}, False),  # KFD lists only the CPU: cannot tell
        (["gfx1030"], [100301], {}, True),  # an RX 6700 XT without the override ...
        (["gfx1030"], [100301], {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}, False),  # ... and with it
        (["gfx90a"], [90010], {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}, True),  # a stale override
        (["gfx90a"], [90010], {"HSA_OVERRIDE_GFX_VERSION": "bogus"}, False),  # ignored
        (["gfx1030"], [110000], {"HSA_OVERRIDE_GFX_VERSION_1": "10.3.0"}, False),  # per-node
        (["gfx11-generic"], [110001], {}, False),  # generic target covers gfx1101
        (["gfx11-generic"], [90402], {}, True),
        (["sm_90"], [90402], {}, False),  # no AMD code: nothing to say
        (["gfx90a"], [90400], {"ROCM_BUILD_BACKEND_GUARD_OFF": "1"}, False),
        (["gfx90a"], [90400], {"ROCM_BUILD_BACKEND_GUARD_OFF": "yes"}, False),
    ],
)
def test_check(tmp_path, targets, nodes, env, raises):
    ns = load_guard(targets)
    root = guard_root(tmp_path, *nodes)
    if raises:
        with pytest.raises(ImportError):
            ns["check"](str(root), env)
    else:
        ns["check"](str(root), env)


@pytest.mark.parametrize(
    "targets, caps, raises",
    [
        (["sm_90"], ["9.0"], False),
        (["sm_80", "sm_90"], ["8.6"], False),  # sm_80 cubins load on sm_86
        (["sm_80"], ["9.0"], True),  # ... not on another major version
        (["sm_80"], ["8.0", "9.0"], False),  # any GPU of the machine counts
        (["sm_90a"], ["10.0"], True),
        (["sm_80", "compute_80"], ["12.0"], False),  # PTX is compiled for newer devices
        (["sm_90", "compute_90"], ["99.9"], False),  # ... even ones the target table does not know yet
        (["compute_90a"], ["10.0"], True),
        (["sm_100f"], ["10.3"], False),
        (["sm_100f"], ["12.0"], True),
        (["sm_90"], [], False),  # NVML lists no GPU: cannot tell
        (["gfx90a"], ["8.0"], False),  # AMD code: NVML is not asked
    ],
)
def test_check_nvidia(tmp_path, targets, caps, raises):
    ns = load_guard(targets)
    if raises:
        with pytest.raises(ImportError):
            ns["check"](str(tmp_path), {}, nvml(*caps))
    else:
        ns["check"](str(tmp_path), {}, nvml(*caps))


def test_nvidia_message_names_the_targets_and_the_gpu(tmp_path):
    ns = load_guard(["sm_80"], dist="tiny-cuda-pkg")
    with pytest.raises(ImportError) as err:
        ns["check"](str(tmp_path), {}, nvml("9.0"))
    text = str(err.value)
    assert "built for the GPU targets sm_80" in text and "sm_90 (NVIDIA GPU 0)" in text
    assert "ROCM_BUILD_BACKEND_GUARD_OFF=1" in text
    ns["check"](str(tmp_path), {"ROCM_BUILD_BACKEND_GUARD_OFF": "1"}, nvml("9.0"))


def test_nvidia_guard_without_a_driver_library_passes(tmp_path):
    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    ns = load_guard(["sm_80"])
    ns["check"](str(tmp_path), {}, missing)
    assert ns["cuda_gpus"](missing) == []


def test_message_names_the_gpu_the_targets_and_the_fix(tmp_path):
    ns = load_guard(["gfx90a"], dist="tiny-gpu-pkg")
    with pytest.raises(ImportError) as exc:
        ns["check"](str(guard_root(tmp_path, 90400)), {})
    text = str(exc.value)
    assert "gfx90a" in text and "gfx940 (KFD node 1)" in text
    assert "pip install --no-cache-dir --force-reinstall --no-deps --no-binary tiny-gpu-pkg tiny-gpu-pkg" in text
    assert "ROCM_BUILD_BACKEND_GUARD_OFF=1" in text
    assert exc.value.name == "pkg"


def test_message_shows_an_override(tmp_path):
    ns = load_guard(["gfx90a"])
    with pytest.raises(ImportError) as exc:
        ns["check"](str(guard_root(tmp_path, 90010)), {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"})
    assert "gfx1030 (KFD node 1, HSA_OVERRIDE_GFX_VERSION; the chip is gfx90a)" in str(exc.value)


def test_no_kfd_and_unreadable_nodes_pass(tmp_path):
    ns = load_guard(["gfx90a"])
    ns["check"](str(tmp_path / "nothing-here"), {})
    ns["check"](str(guard_root(tmp_path / "r", unreadable=3)), {})
    assert ns["gpus"](str(guard_root(tmp_path / "m", 90402, unreadable=1)), {}) == [("gfx942", "KFD node 1")]


def test_sysfs_root_from_the_environment(tmp_path):
    ns = load_guard(["gfx90a"])
    root = guard_root(tmp_path, 90400)
    with pytest.raises(ImportError):
        ns["check"](None, {"ROCM_BUILD_BACKEND_SYSFS_ROOT": str(root)})


def test_damaged_properties_are_skipped(tmp_path):
    root = guard_root(tmp_path, 90400)
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    (nodes / "1" / "properties").write_bytes(b"gfx_target_version \xff\xff\nsimd_count 4\n")
    (nodes / "2").mkdir()
    (nodes / "2" / "properties").write_bytes(b"\x00" * 100)
    load_guard(["gfx90a"])["check"](str(root), {})  # nothing readable: pass


IMPORT = GUARD_LINE


@pytest.mark.parametrize(
    "source,expected",
    [
        ("", f"{IMPORT}\n"),
        ("import os\n", f"{IMPORT}\nimport os\n"),
        ('"""Doc."""\nimport os\n', f'"""Doc."""\n{IMPORT}\nimport os\n'),
        (
            '"""Doc\nmore."""\nfrom __future__ import annotations\nfrom __future__ import division\nX = 1\n',
            f'"""Doc\nmore."""\nfrom __future__ import annotations\nfrom __future__ import division\n{IMPORT}\nX = 1\n',
        ),
        (
            "#!/usr/bin/env python\n# -*- coding: utf-8 -*-\nX = 1\n",
            f"#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n{IMPORT}\nX = 1\n",
        ),
        ("# Copyright\nX = 1\n", f"{IMPORT}\n# Copyright\nX = 1\n"),
        ('"""Doc."""', f'"""Doc."""\n{IMPORT}\n'),
        ("import os\r\nX = 1\r\n", f"{IMPORT}\r\nimport os\r\nX = 1\r\n"),
        ("def broken(:\n", f"{IMPORT}\ndef broken(:\n"),
    ],
)
def test_insert_guard_import(source, expected):
    out = insert_guard_import(source.encode()).decode()
    assert out == expected
    assert insert_guard_import(out.encode()).decode() == out  # only once
    if "broken" not in source:
        ast.parse(out)


def test_insert_keeps_a_declared_encoding():
    source = "# -*- coding: latin-1 -*-\nNAME = 'caf\xe9'\n".encode("latin-1")
    out = insert_guard_import(source)
    assert out.decode("latin-1").splitlines()[1] == IMPORT
    assert "café" in out.decode("latin-1")


def test_guard_patch_and_files():
    names = [
        "pkg/__init__.py",
        "pkg/sub/__init__.py",
        "other/__init__.py",
        "mod.py",
        "pkg-1.0.dist-info/METADATA",
        "pkg-1.0.data/purelib/x/__init__.py",
    ]
    assert top_level_packages(names) == ["other", "pkg"]
    member, patch = guard_patch(names, "pkg")
    assert member == f"pkg/{GUARD_MODULE}.py" and patch is insert_guard_import
    with pytest.raises(WheelError, match="no mod/__init__.py"):
        guard_patch(names, "mod")
    with pytest.raises(WheelError, match="not a package name"):
        guard_patch(names, "../pkg")
    extra, patches = guard_files(names, ["gfx90a"], "pkg", top_level=["pkg"])
    assert list(extra) == [f"pkg/{GUARD_MODULE}.py"] and list(patches) == ["pkg/__init__.py"]
    extra, _ = guard_files(names, ["gfx90a"], "pkg")
    assert sorted(extra) == [f"other/{GUARD_MODULE}.py", f"pkg/{GUARD_MODULE}.py"]
    with pytest.raises(WheelError, match="no top-level package") as exc:
        guard_files(["mod.py"], ["gfx90a"], "mod")
    assert exc.value.hint == "set guard = false"
