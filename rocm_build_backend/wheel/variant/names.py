"""The file names of wheel variants (variantlib 0.2.2 ``constants.py``): a variant wheel's name
ends in a label ``[0-9a-z._]+`` (line 29) before ``.whl``; an index serves
``<name>-<version>-variants.json``, both normalized as in wheel file names (PEP 825).

Pure: names in, names out; it reads no file.
"""

from __future__ import annotations

import re

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from rocm_build_backend.errors import WheelError

LABEL_RE = re.compile(r"[0-9a-z._]+")  # variantlib constants.py:29


def split_variant_name(filename: str) -> tuple[str, str | None]:
    """(the file name without its label, the label or None) of a wheel file name."""
    if not filename.endswith(".whl"):
        raise WheelError(f"'{filename}' is not a wheel file name")
    parts = filename[: -len(".whl")].split("-")
    if len(parts) == 7 or (len(parts) == 6 and not parts[2][:1].isdigit()):
        if LABEL_RE.fullmatch(parts[-1]):
            return "-".join(parts[:-1]) + ".whl", parts[-1]
    if len(parts) not in (5, 6):
        raise WheelError(f"'{filename}' is not a valid wheel file name")
    return filename, None


def variant_filename(filename: str, label: str) -> str:
    """``foo-1.0-cp312-cp312-linux_x86_64.whl`` + ``gfx942`` -> ``...-linux_x86_64-gfx942.whl``."""
    base, old = split_variant_name(filename)
    if old is not None:
        raise WheelError(f"{filename} is already a variant wheel (label {old!r})")
    if not LABEL_RE.fullmatch(label):
        raise WheelError(f"variant label {label!r} is not valid")
    return base[: -len(".whl")] + f"-{label}.whl"


def variants_json_name(name: str, version: str) -> str:
    """``<name>-<version>-variants.json``, both normalized as in wheel file names (PEP 825)."""
    try:
        normal = str(Version(version))
    except InvalidVersion:
        raise WheelError(f"version {version!r} is not a valid PEP 440 version") from None
    return f"{canonicalize_name(name).replace('-', '_')}-{normal}-variants.json"
