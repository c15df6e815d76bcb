"""Pack an installed distribution back into a wheel, from its RECORD (for a machine that
cannot download the wheel it was installed from).

    python repack_installed.py DIST OUTDIR      # e.g. cupy-cuda13x /tmp/fat

The members are the files RECORD lists (paths relative to the folder holding the
``.dist-info``), with their installed bytes; RECORD itself is copied (``thin`` rebuilds it).
Files outside that folder (scripts, headers) are left out. Prints the wheel's path.
"""

from __future__ import annotations

import sys
import zipfile
from importlib import metadata
from pathlib import Path


def main(dist: str, outdir: str) -> int:
    d = metadata.distribution(dist)
    root = Path(d.locate_file(""))
    wheel_meta = d.read_text("WHEEL") or ""
    tag = next(line.split(":", 1)[1].strip() for line in wheel_meta.splitlines() if line.startswith("Tag:"))
    name = d.metadata["Name"].replace("-", "_")
    out = Path(outdir) / f"{name}-{d.version}-{tag}.whl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in d.files or []:
            rel = f.as_posix()
            if rel.startswith("..") or rel.startswith("/") or "__pycache__" in rel:
                continue
            path = root / rel
            if path.is_file():
                zf.write(path, rel)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
