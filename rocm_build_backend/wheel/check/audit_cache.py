"""The audit results of ``check --env``, kept between runs per file:
``$XDG_CACHE_HOME/rocm-build-backend/check-env.json``.

It audits a file only when its identity (size, mtime, ctime, inode) changed; it decides
nothing about what loads, and writes nothing but its own cache file (atomically).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from rocm_build_backend.binary.audit import audit_file
from rocm_build_backend.wheel.facts import modules_to_json

_MAX_CACHE = 64 << 20  # bytes: a larger cache file is read as an empty cache


class AuditCache:
    """What the audit found in each file, kept between runs, keyed by the file's path and its
    identity (size, mtime, ctime, inode): an environment that has not changed is not read again.
    A missing, damaged or oversized cache file is an empty cache; it is replaced atomically."""

    VERSION = 2  # 2: modules and unread modules per file
    MAX_ENTRIES = 200_000

    def __init__(self, path: Path | None) -> None:
        self.path, self.entries, self.hits, self.dirty = path, {}, 0, False
        if path is None:
            return
        try:
            if path.stat().st_size <= _MAX_CACHE:
                data = json.loads(path.read_text("utf-8"))
                if (
                    isinstance(data, dict)
                    and data.get("version") == self.VERSION
                    and isinstance(data.get("files"), dict)
                ):
                    self.entries = data["files"]
        except (OSError, ValueError):
            pass

    @staticmethod
    def _key(path: Path) -> list[int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]

    def audit(self, path: Path) -> dict[str, Any]:
        key = self._key(path)
        hit = self.entries.get(str(path))
        if key is not None and isinstance(hit, dict) and hit.get("key") == key and isinstance(hit.get("facts"), dict):
            self.hits += 1
            return dict(hit["facts"])
        report = audit_file(path)

        facts: dict[str, Any] = {
            "targets": list(report.targets),
            "complete": list(report.complete),
            "modules": modules_to_json(report.modules),
        }
        if report.unread:
            facts["unread"] = modules_to_json(report.unread)
        if report.problems:
            facts["problems"] = [str(p) for p in report.problems]
        elif key is not None and self.path is not None and len(self.entries) < self.MAX_ENTRIES:
            self.entries[str(path)], self.dirty = {"key": key, "facts": facts}, True
        return facts

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"version": self.VERSION, "files": self.entries}), "utf-8")
            os.replace(tmp, self.path)
        except OSError:
            pass  # a cache that cannot be written is only slower next time


def default_cache_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/rocm-build-backend/check-env.json`` (default ``~/.cache/...``)."""
    env = os.environ if env is None else env
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "rocm-build-backend" / "check-env.json"
