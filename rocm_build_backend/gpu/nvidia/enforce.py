"""Enforcement for NVIDIA builds: the pinned ``nvcc`` and the toolkit view every build path reaches.

Projects find nvcc four ways, and each gets the pinned one (``pinned_nvcc.py``, a program that
keeps every compile to the chosen targets):

- ``PYTORCH_NVCC``: ``torch.utils.cpp_extension``'s ninja builds run it instead of
  ``$CUDA_HOME/bin/nvcc`` (``_write_ninja_file``); a user's ``PYTORCH_NVCC`` whose last word is an
  nvcc (``ccache /usr/local/cuda/bin/nvcc``) keeps its launcher and gets ours for that word;
- ``CUDA_HOME`` and ``CUDA_PATH``: torch without ninja (``_join_cuda_home('bin', 'nvcc')``), CuPy
  and Makefile-style ``setup.py`` files build the path themselves, so they point at a *view* of
  the toolkit: a folder whose ``bin/nvcc`` is ours and whose other entries link to the real
  toolkit (headers and libraries resolve through it);
- ``CUDACXX``: CMake's CUDA language (first configure);
- ``PATH``: the view's ``bin`` first, for ``nvcc`` called by name.

``contents`` says what the folder holds: the program, its ``sh`` starter and the view (the folder
is named by everything it holds, so a build tree that cached the path finds it again on the next
build with the same targets; ``builder/enforcedir.py`` writes it); ``variables`` the build's
variables. Pure apart from reading the toolkit's folders; the real toolkit is found the way
PyTorch's ``_find_cuda_home`` does, skipping views of ours.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

from rocm_build_backend.data import path as data_path
from rocm_build_backend.gpu.build import FolderEntry
from rocm_build_backend.gpu.nvidia import nvcc_line, pinned_nvcc
from rocm_build_backend.gpu.nvidia.knobs import with_ptx

MARKER = ".rocm-build-backend-view.json"
DEFAULT_ROOT = "/usr/local/cuda"  # the last place PyTorch's _find_cuda_home looks
VARIABLES = ("PYTORCH_NVCC", "CUDA_HOME", "CUDA_PATH", "CUDACXX", "PATH")
#: the lines of ``pinned_nvcc.py`` between which its import of ``nvcc_line`` stands
_READER = ("# <nvcc_line>\n", "# </nvcc_line>\n")
_FUTURE = "from __future__ import annotations\n"


def config(targets: Sequence[str], ptx: str, nvcc: str) -> dict[str, Any]:
    """What the pinned nvcc needs: the chosen SASS and PTX targets, their ``-gencode`` options and
    which PTX the ``ptx`` setting adds with each SASS target; the real nvcc's path."""
    code = with_ptx(list(targets), ptx)
    sass = [t for t in code if not t.ptx]
    ptx_targets = [t for t in code if t.ptx]
    pairs: dict[str, str] = {}
    for s in sass:
        for p in ptx_targets:
            if p.number == s.number and p.suffix == ("" if s.suffix == "a" else s.suffix):
                pairs[str(s)] = str(p)
    return {
        "nvcc": nvcc,
        "sass": [str(t) for t in sass],
        "ptx": [str(t) for t in ptx_targets],
        "gencode": {str(t): t.gencode() for t in code},
        "ptx_for": pairs,
        "options": _nvcc_options(),
    }


def _nvcc_options() -> dict[str, str]:
    """nvcc's options, for the pinned nvcc to read command lines with (``data/nvcc_options.json``),
    each list as one string of words (one literal compiles faster than hundreds, once per compile)."""
    with open(data_path("nvcc_options.json"), encoding="utf-8") as fh:
        table = json.load(fh)
    return {k: " ".join(str(x) for x in table[k]) for k in ("value", "flag", "joined")}


def describe(targets: Sequence[str], ptx: str) -> list[str]:
    """The plan's words for what enforcement does (pure)."""
    code = " ".join(str(t) for t in with_ptx(list(targets), ptx))
    return [
        f"enforce: a pinned nvcc (PYTORCH_NVCC, CUDA_HOME, CUDACXX, PATH) keeps each compile to {code}: "
        "other targets it lists are dropped, a compile listing none of them is left whole and logged"
    ]


def outcome(listed: Sequence[str], targets: Sequence[str]) -> str:
    """What the pinned nvcc makes of a compile that lists ``listed`` (for the plan's words)."""
    chosen = [t for t in targets if t in listed]
    if chosen:
        return f"its compiles keep {' '.join(chosen)}"
    return (
        f"it names none of {' '.join(targets)}: such a compile is left whole (a file built for one "
        "architecture on purpose) and the audit judges the result"
    )


def _is_toolkit(root: Path) -> bool:
    return (root / "bin" / "nvcc").is_file() and (root / "include" / "cuda_runtime.h").is_file()


def toolkit_root(env: Mapping[str, str]) -> Path | None:
    """The real CUDA toolkit: ``CUDA_HOME``, ``CUDA_PATH``, the folder above ``nvcc`` on PATH (or
    above the file it resolves to), ``/usr/local/cuda``; the first with ``bin/nvcc`` and
    ``include/cuda_runtime.h``. A view of ours stands for the toolkit it was made from."""
    found = shutil.which("nvcc", path=env.get("PATH", os.defpath))
    candidates = [env.get("CUDA_HOME", ""), env.get("CUDA_PATH", "")]
    if found:
        candidates += [str(Path(found).parent.parent), str(Path(os.path.realpath(found)).parent.parent)]
    candidates.append(DEFAULT_ROOT)
    for c in candidates:
        if not c:
            continue
        root = Path(c)
        marker = root / MARKER
        if marker.is_file():
            try:
                root = Path(json.loads(marker.read_text(encoding="utf-8"))["root"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
        if _is_toolkit(root):
            return root
    return None


def _listing(root: Path) -> list[str]:
    try:
        return sorted(os.listdir(root)) + ["bin/" + n for n in sorted(os.listdir(root / "bin"))]
    except OSError:
        return []


def program_text(cfg: Mapping[str, Any]) -> str:
    """The pinned nvcc program, one file (``python -I -S`` cannot import this package):
    ``pinned_nvcc.py``'s source with ``nvcc_line.py``'s in place of its import of it, and its
    configuration. ValueError when ``pinned_nvcc.py`` has lost its markers."""
    source = Path(pinned_nvcc.__file__).read_text(encoding="utf-8")
    head, found, rest = source.partition(_READER[0])
    _, end, tail = rest.partition(_READER[1])
    reader = Path(nvcc_line.__file__).read_text(encoding="utf-8")
    if not (found and end and reader.count(_FUTURE) == 1):
        raise ValueError("pinned_nvcc.py has no '# <nvcc_line>' block to put nvcc_line.py in")
    program = head + reader.replace(_FUTURE, "", 1) + tail  # one __future__ import, at the top
    return (
        program + "\n\nCONFIG = " + repr(dict(sorted(cfg.items()))) + '\nif __name__ == "__main__":\n    main(CONFIG)\n'
    )


def starter(python: str, program: Path) -> str:
    return (
        "#!/bin/sh\n"
        "# nvcc written by rocm-build-backend: it keeps each compile to the targets chosen for the\n"
        "# build, then runs the real nvcc (see the program it starts).\n"
        f"py={shlex.quote(python)}\n"
        '[ -x "$py" ] || py=python3  # the interpreter of the build that wrote this is gone\n'
        f'exec "$py" -I -S {shlex.quote(str(program))} "$@"\n'
    )


def _parts(targets: Sequence[str], ptx: str, env: Mapping[str, str]) -> tuple[Path, dict[str, Any]]:
    root = toolkit_root(env)
    if root is None:
        raise FileNotFoundError("no CUDA toolkit found (CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda)")
    return root, config(targets, ptx, str(root / "bin" / "nvcc"))


def plan_env(targets: Sequence[str], ptx: str, planned: Mapping[str, str]) -> dict[str, str]:
    """Variables enforcement changes at plan time: none for NVIDIA (the pinned nvcc's paths are
    known only when it is written)."""
    return {}


def identity(targets: Sequence[str], ptx: str, env: Mapping[str, str], python: str) -> str:
    """Everything the folder will hold, as text (its hash names the folder); ``FileNotFoundError``
    without a CUDA toolkit."""
    root, cfg = _parts(targets, ptx, env)
    return program_text(cfg) + starter(python, Path("x")) + "\n".join(_listing(root))


def contents(
    home: Path, targets: Sequence[str], ptx: str, env: Mapping[str, str], python: str
) -> dict[str, FolderEntry]:
    """What the folder at ``home`` holds: the program, the view of the real toolkit and its
    ``bin/nvcc`` starter (which names the program there); nothing is written."""
    root, cfg = _parts(targets, ptx, env)
    out: dict[str, FolderEntry] = {
        "pinned_nvcc.py": ("file", program_text(cfg).encode(), 0),
        "cuda": ("dir", "", 0),
        "cuda/bin": ("dir", "", 0),
    }
    top, bin_ = str(root), str(root / "bin")  # os.path.join: as str(root / name), at hundreds of names
    for name in os.listdir(top):
        if name != "bin":
            out[f"cuda/{name}"] = ("link", os.path.join(top, name), 0)
    for name in os.listdir(bin_):
        if name != "nvcc":
            out[f"cuda/bin/{name}"] = ("link", os.path.join(bin_, name), 0)
    out["cuda/bin/nvcc"] = ("file", starter(python, home / "pinned_nvcc.py").encode(), 0o111)
    out[f"cuda/{MARKER}"] = ("file", (json.dumps({"root": str(root)}) + "\n").encode(), 0)
    return out


def variables(directory: Path, env: Mapping[str, str]) -> dict[str, str]:
    """The build's variables for a filled ``directory``: every path to nvcc leads to ours."""
    view = directory / "cuda"
    nvcc = str(view / "bin" / "nvcc")
    out = {
        "CUDA_HOME": str(view),
        "CUDA_PATH": str(view),
        "CUDACXX": nvcc,
        "PATH": str(view / "bin") + os.pathsep + env.get("PATH", os.defpath),
    }
    user = env.get("PYTORCH_NVCC", "")
    words = shlex.split(user) if user.strip() else []
    if words and os.path.basename(words[-1]) == "nvcc":
        out["PYTORCH_NVCC"] = shlex.join(words[:-1] + [nvcc])
    elif not words:
        out["PYTORCH_NVCC"] = nvcc
    cxx = env.get("CUDACXX", "")
    if cxx and os.path.basename(cxx) != "nvcc":
        del out["CUDACXX"]  # the user's CUDA compiler is not nvcc (clang): theirs stays
    return out


class NvidiaEnforcer:
    """NVIDIA's ``gpu.build.Enforcer`` (``BuildVendor.enforce``): the functions above, for the code
    targets of a plan (the ``ptx`` choice is already applied: its PTX targets are among them)."""

    uncounted = ""

    def describe(self, targets: Sequence[str]) -> list[str]:
        return describe(targets, "none")

    def outcome(self, listed: Sequence[str], targets: Sequence[str]) -> str:
        return outcome(listed, targets)

    def plan_env(self, targets: Sequence[str], planned: Mapping[str, str]) -> dict[str, str]:
        return plan_env(targets, "none", planned)

    def identity(self, targets: Sequence[str], env: Mapping[str, str], python: str) -> str:
        return identity(targets, "none", env, python)

    def contents(
        self, home: Path, targets: Sequence[str], env: Mapping[str, str], python: str
    ) -> dict[str, FolderEntry]:
        return contents(home, targets, "none", env, python)

    def variables(self, directory: Path, env: Mapping[str, str]) -> dict[str, str]:
        return variables(directory, env)
