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

Sub-modules: ``names`` (which names are switches, and of what kind), ``python`` and ``cmake``
(the readers), ``actions`` (``resolve``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_FILE = 1 << 20  # bytes read of one build file
MAX_FILES = 64  # CMake files followed through include() and add_subdirectory()
MAX_TOTAL = 8 << 20  # bytes read in all


@dataclass(frozen=True)
class Finding:
    """One switch of the project's own, as its source shows it."""

    file: str  # relative to the project's folder
    line: int
    kind: str  # env | cmake-option | cmake-env | skbuild-define | cuda-guard | download | hard-coded
    name: str  # the variable or option; the call for a guard or a download
    role: str  # gpu-on | gpu-off | targets | prebuilt | jobs | flags | guard | hard-coded
    value: str | None = None  # what turns GPU code on (a switch); the targets named (hard-coded)
    default: str | None = None  # the project's default, when the source gives one
    choices: tuple[str, ...] = ()  # the values the source compares it with
    vendor: str | None = None  # "amd" or "nvidia" when the name is for one vendor only
    text: str = ""  # the source line, trimmed

    @property
    def where(self) -> str:
        return f"{self.file} L{self.line}"


@dataclass(frozen=True)
class Switch:
    """A finding and what the build does about it."""

    finding: Finding
    action: str  # set | kept | todo | enforced | warn | info
    detail: str  # in words, for the plan
    todo: str | None = None  # what the user should give, exactly (``FORCE_CUDA=1``, ``-C cmake.define.X=ON``)

    def to_json(self) -> dict[str, Any]:
        f = self.finding
        return {"file": f.file, "line": f.line, "kind": f.kind, "name": f.name, "role": f.role,
                "value": f.value, "default": f.default, "action": self.action, "detail": self.detail,
                "todo": self.todo}

    def line(self) -> str:
        f = self.finding
        return f"switch {f.where} {f.name} ({f.role}): {self.detail}"


@dataclass
class Budget:
    """What is left to read."""

    files: int = MAX_FILES
    total: int = MAX_TOTAL
    notes: list[str] = field(default_factory=list)

    def read(self, path: Path) -> str | None:
        """The file's text (its first MAX_FILE bytes), or None when it is not a regular file or the
        budget is spent."""
        if self.files <= 0 or self.total <= 0:
            if not self.notes:
                self.notes.append(f"stopped reading build files at {path.name}: read budget spent")
            return None
        try:
            if not path.is_file() or path.is_symlink():
                return None
            with open(path, "rb") as fh:
                data = fh.read(min(MAX_FILE, self.total))
        except OSError:
            return None
        self.files -= 1
        self.total -= len(data)
        return data.decode("utf-8", "replace")


def scan(source_dir: Path, *, cmake: bool | None = None) -> list[Finding]:
    """Every switch the project's build files show, in file order. Reads only; never fails on a
    file it cannot read or parse (that file gives nothing). ``cmake``: whether the build runs
    CMake (None: when ``setup.py`` names it, or there is no ``setup.py``); a ``CMakeLists.txt``
    beside a setuptools build that never runs CMake is someone else's build."""
    from rocm_build_backend.builder.switches.cmake import scan_cmake, scan_pyproject
    from rocm_build_backend.builder.switches.python import scan_python, scan_setup_cfg

    budget = Budget()
    found: list[Finding] = []
    setup = budget.read(source_dir / "setup.py")
    if setup is not None:
        found += scan_python(setup, "setup.py")
    text = budget.read(source_dir / "setup.cfg")
    if text is not None:
        found += scan_setup_cfg(text, "setup.cfg")
    text = budget.read(source_dir / "pyproject.toml")
    if text is not None:
        found += scan_pyproject(text, "pyproject.toml")
    if cmake is None:
        cmake = setup is None or "cmake" in setup.lower()
    if cmake:
        found += scan_cmake(source_dir, budget)
    return found


__all__ = ["Finding", "Switch", "scan", "MAX_FILE", "MAX_FILES"]
