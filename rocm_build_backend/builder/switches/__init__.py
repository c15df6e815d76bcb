"""A project's own GPU switches, found before the build by reading its build files (never running them).

Real projects often decide by themselves whether GPU code is built and for which targets: an
environment variable (``FORCE_CUDA``, ``CAUSAL_CONV1D_FORCE_BUILD``, ``FLASH_ATTN_CUDA_ARCHS``),
a CMake ``option(GGML_CUDA ... OFF)``, a guard on ``torch.cuda.is_available()``, a download of a
prebuilt wheel instead of a build, a hard-coded ``-gencode``/``--offload-arch`` list. ``scan``
reads ``setup.py`` (Python's ``ast``), ``setup.cfg``, ``pyproject.toml`` and ``CMakeLists.txt``
with the CMake files it includes inside the project (bounded: files, bytes) and returns one
``Finding`` per switch, with its file and line; ``resolve`` (pure) says for each what the build
does about it: set by a profile or by the shim, already set by the user, enforced at the
compiler, or the exact variable / ``-C`` setting the user should give. The plan lists them, and
a build that comes out without device code names them in its hint.

Sub-modules: ``findings`` (the data), ``names`` (which names are switches, of what kind and of
which vendor: the vendors' ``BuildVendor.switches`` say), ``python`` and ``cmake`` (the
readers), ``actions`` (``resolve``).
"""

from __future__ import annotations

from pathlib import Path

from rocm_build_backend.builder.switches.cmake import cmake_source_dir, scan_cmake, scan_pyproject
from rocm_build_backend.builder.switches.findings import MAX_FILE, MAX_FILES, Budget, Finding, Switch, bounded
from rocm_build_backend.builder.switches.python import scan_python, scan_setup_cfg


def scan(source_dir: Path, *, cmake: bool | None = None) -> list[Finding]:
    """Every switch the project's build files show, in file order. Reads only; never fails on a
    file it cannot read or parse (that file gives nothing). ``cmake``: whether the build runs
    CMake (None: when ``setup.py`` names it, or there is no ``setup.py``); a ``CMakeLists.txt``
    beside a setuptools build that never runs CMake is someone else's build."""
    budget = Budget(root=source_dir.resolve())
    found: list[Finding] = []
    setup = budget.read(source_dir / "setup.py")
    if setup is not None:
        found += scan_python(setup, "setup.py")
    text = budget.read(source_dir / "setup.cfg")
    if text is not None:
        found += scan_setup_cfg(text, "setup.cfg")
    text = budget.read(source_dir / "pyproject.toml")
    subdir = ""
    if text is not None:
        found += scan_pyproject(text, "pyproject.toml")
        subdir = cmake_source_dir(text)
    if cmake is None:
        cmake = setup is None or "cmake" in setup.lower()
    if cmake:
        found += scan_cmake(source_dir, budget, subdir)
    return bounded(found)


__all__ = ["Finding", "Switch", "scan", "MAX_FILE", "MAX_FILES"]
