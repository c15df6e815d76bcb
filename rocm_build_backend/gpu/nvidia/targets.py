"""NVIDIA code targets and the spellings users write for them.

A code target is machine code (SASS, a cubin) for ``sm_XY``, or PTX for ``compute_XY``; either
may carry the architecture-specific suffix ``a`` (``sm_90a``, CUDA 12.0+) or the family suffix
``f`` (``sm_100f``, CUDA 12.9+). Users write them three ways, all parsed here:

- our own names: ``sm_90``, ``sm_90a``, ``sm_100f``, ``compute_90``;
- PyTorch's ``TORCH_CUDA_ARCH_LIST``: ``"8.0;9.0+PTX"``, ``"9.0a"``, ``"8.6 9.0"`` and the
  family names ``Ampere``, ``Hopper``, ... that ``torch.utils.cpp_extension._get_cuda_arch_flags``
  expands by plain string replacement before it splits on ``;`` (pytorch/pytorch@0011ec5c,
  ``torch/utils/cpp_extension.py``, ``named_arches``); each ``X.Y`` means
  ``-gencode=arch=compute_XY,code=sm_XY`` and ``+PTX`` adds ``code=compute_XY``;
- CMake's ``CMAKE_CUDA_ARCHITECTURES`` / ``CUDAARCHS``: ``90`` (SASS and PTX), ``90-real``
  (SASS), ``90-virtual`` (PTX), ``90a``, and the special values ``native``, ``all`` and
  ``all-major`` (cmake.org/cmake/help/latest/prop_tgt/CUDA_ARCHITECTURES.html), which need the
  detected GPUs or nvcc's list and are passed in by the caller.

Pure: no probes, no environment. Unknown entries raise UnknownTargetError naming every one.
"""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple, Sequence

from rocm_build_backend.errors import ConfigError, UnknownTargetError

CUDA_TARGET_NAME = re.compile(r"(sm|compute)_([0-9]{2,3})([af]?)")
_TORCH_ITEM = re.compile(r"([0-9]{1,2})\.([0-9])([af]?)(\+PTX)?")
_CMAKE_ITEM = re.compile(r"([0-9]{2,3})([af]?)(?:-(real|virtual))?")
_HINT = "write sm_XY, sm_XYa, sm_XYf or compute_XY (for example sm_90 or compute_90)"

# torch.utils.cpp_extension named_arches (newest order; combined names first, as torch keeps
# them, so "Ampere+Tegra" is replaced before "Ampere").
TORCH_NAMED_ARCHES: tuple[tuple[str, str], ...] = (
    ("Kepler+Tesla", "3.7"),
    ("Kepler", "3.5+PTX"),
    ("Maxwell+Tegra", "5.3"),
    ("Maxwell", "5.0;5.2+PTX"),
    ("Pascal", "6.0;6.1+PTX"),
    ("Volta+Tegra", "7.2"),
    ("Volta", "7.0+PTX"),
    ("Turing", "7.5+PTX"),
    ("Ampere+Tegra", "8.7"),
    ("Ampere", "8.0;8.6+PTX"),
    ("Ada", "8.9+PTX"),
    ("Hopper", "9.0+PTX"),
    ("Blackwell+Tegra", "11.0"),
    ("Blackwell", "10.0;10.3;12.0;12.1+PTX"),
)

# Compute capabilities NVIDIA has shipped (the SM numbers of the target table).
KNOWN_SM = frozenset({50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121})


class CudaTarget(NamedTuple):  # ordered by (number, suffix, ptx), as the dataclass it was
    """One code target: ``number`` is the SM number (90, 100, 120), ``ptx`` False for SASS."""

    number: int
    suffix: str = ""  # "", "a" or "f"
    ptx: bool = False

    def __str__(self) -> str:
        return f"{'compute' if self.ptx else 'sm'}_{self.number}{self.suffix}"

    @property
    def major(self) -> int:
        return self.number // 10

    @property
    def minor(self) -> int:
        return self.number % 10

    @property
    def virtual(self) -> str:
        """The PTX architecture this code is compiled from: ``compute_90a`` for ``sm_90a``."""
        return f"compute_{self.number}{self.suffix}"

    @property
    def cc(self) -> str:
        """PyTorch's spelling: ``9.0``, ``9.0a``, ``10.0f``."""
        return f"{self.major}.{self.minor}{self.suffix}"

    def gencode(self) -> str:
        """nvcc's flag for exactly this code: ``-gencode=arch=compute_90,code=sm_90``."""
        return f"-gencode=arch={self.virtual},code={self}"

    def as_sass(self) -> CudaTarget:
        return CudaTarget(self.number, self.suffix, False)

    def as_ptx(self) -> CudaTarget:
        return CudaTarget(self.number, self.suffix, True)


def _problem(number: int, suffix: str, text: str) -> str | None:
    if number not in KNOWN_SM:
        return f"unknown NVIDIA compute capability in '{text}'"
    if suffix == "a" and number < 90:
        return f"'{text}': architecture-specific ('a') targets start at sm_90"
    if suffix == "f" and number < 100:
        return f"'{text}': family ('f') targets start at sm_100"
    return None


def _parse_name(text: str) -> CudaTarget | str:
    m = CUDA_TARGET_NAME.fullmatch(text.strip().lower())
    if not m:
        return f"'{text}' is not an NVIDIA target"
    number, suffix = int(m.group(2)), m.group(3)
    problem = _problem(number, suffix, text)
    return problem or CudaTarget(number, suffix, m.group(1) == "compute")


def _raise(problems: list[str], hint: str) -> None:
    if problems:
        raise UnknownTargetError("; ".join(problems), hint=hint)


def sort_cuda(targets: Iterable[CudaTarget]) -> list[CudaTarget]:
    """Stable order: by SM number, SASS before PTX, plain before ``a`` before ``f``."""
    return sorted(set(targets), key=lambda t: (t.number, t.ptx, "_af".index(t.suffix or "_")))


def parse_cuda_target(text: str) -> CudaTarget:
    """One of our names (``sm_90a``, ``compute_90``); UnknownTargetError otherwise."""
    got = _parse_name(text)
    if isinstance(got, str):
        raise UnknownTargetError(got, hint=_HINT)
    return got


def parse_cuda_targets(items: str | Sequence[str]) -> list[CudaTarget]:
    """A list of our names (``;``, ``,`` or space separated); every bad entry reported at once."""
    parts = [items] if isinstance(items, str) else list(items)
    words = [w for p in parts for w in re.split(r"[;,\s]+", p.strip()) if w]
    found: list[CudaTarget] = []
    problems: list[str] = []
    for word in words:
        got = _parse_name(word)
        if isinstance(got, str):
            problems.append(got)
        else:
            found.append(got)
    _raise(problems, _HINT)
    return sort_cuda(found)


def parse_torch_arch_list(value: str) -> list[CudaTarget]:
    """``TORCH_CUDA_ARCH_LIST`` exactly as PyTorch 2.11 reads it: spaces become ``;``, family
    names are replaced, then every ``;``-separated entry must be ``X.Y``, ``X.Ya`` or either with
    ``+PTX``. Like PyTorch, an empty entry (``"9.0;"``) and a family target (``10.0f``) are
    refused; checked against torch 2.11's own parser on the H200 (``bench/h200``).
    """
    text = value.replace(" ", ";")
    for name, arches in TORCH_NAMED_ARCHES:
        text = text.replace(name, arches)
    found: list[CudaTarget] = []
    problems: list[str] = []
    for item in text.split(";"):
        m = _TORCH_ITEM.fullmatch(item)
        if not m:
            problems.append(f"'{item}' in TORCH_CUDA_ARCH_LIST is not X.Y, X.Ya or X.Y+PTX")
            continue
        number = int(m.group(1)) * 10 + int(m.group(2))
        if m.group(3) == "f":
            problems.append(f"'{item}': PyTorch (2.11) does not accept family targets in TORCH_CUDA_ARCH_LIST")
            continue
        problem = _problem(number, m.group(3), item)
        if problem:
            problems.append(problem)
            continue
        found.append(CudaTarget(number, m.group(3)))
        if m.group(4):
            found.append(CudaTarget(number, m.group(3), True))
    _raise(problems, "PyTorch reads entries like 8.0, 9.0a or 9.0+PTX, separated by ';' or one space")
    return sort_cuda(found)


def parse_cmake_architectures(
    value: str,
    *,
    native: Sequence[CudaTarget] | None = None,
    nvcc_codes: Sequence[CudaTarget] | None = None,
) -> list[CudaTarget]:
    """``CMAKE_CUDA_ARCHITECTURES`` / ``CUDAARCHS`` as CMake reads it.

    ``native`` needs the detected GPUs (``native``: their SASS); ``all`` and ``all-major``
    need nvcc's SASS list (``nvcc_codes``): every (major) SASS target plus PTX for the highest,
    as CMake documents them. A special value without its input is a ConfigError, never a guess.
    """
    text = value.strip()
    low = text.lower()
    if low in ("off", "false", "0", ""):
        raise ConfigError(
            [f"CMAKE_CUDA_ARCHITECTURES={value!r} builds for no architecture"],
            hint="give the architectures, e.g. 90 or 90-real",
        )
    if low == "native":
        if not native:
            raise ConfigError(
                ["CMAKE_CUDA_ARCHITECTURES=native needs a detected NVIDIA GPU"],
                hint="give the architectures, e.g. 90-real",
            )
        return sort_cuda(t.as_sass() for t in native)
    if low in ("all", "all-major"):
        if not nvcc_codes:
            raise ConfigError(
                [f"CMAKE_CUDA_ARCHITECTURES={low} needs nvcc's list of targets"],
                hint="give the architectures, e.g. 90-real",
            )
        sass = [t for t in nvcc_codes if not t.ptx and not t.suffix]
        if low == "all-major":
            sass = [t for t in sass if t.minor == 0]
        top = max(sass, key=lambda t: t.number)
        return sort_cuda([*sass, top.as_ptx()])
    found: list[CudaTarget] = []
    problems: list[str] = []
    for item in (i.strip() for i in text.split(";") if i.strip()):
        m = _CMAKE_ITEM.fullmatch(item.lower())
        if not m:
            problems.append(f"'{item}' in CMAKE_CUDA_ARCHITECTURES is not NN, NN-real or NN-virtual")
            continue
        number, suffix, kind = int(m.group(1)), m.group(2), m.group(3)
        problem = _problem(number, suffix, item)
        if problem:
            problems.append(problem)
            continue
        if kind in (None, "real"):
            found.append(CudaTarget(number, suffix))
        if kind in (None, "virtual"):
            found.append(CudaTarget(number, suffix, True))
    _raise(problems, "CMake reads entries like 90, 90a, 80-real or 90-virtual, separated by ';'")
    return sort_cuda(found)


def sm_of_cc(major: int, minor: int) -> CudaTarget:
    """The SASS target of a device's compute capability (9, 0) -> ``sm_90``."""
    return CudaTarget(major * 10 + minor)
