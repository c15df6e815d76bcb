"""A wheel's RECORD held against its members, for the commands that rewrite wheels (``thin``,
``split``): a wheel whose RECORD does not list a member, lists one it does not hold, or gives
another hash or size is refused (``RecordMismatch``), never written out with a clean RECORD.

The one model of RECORD: ``parse_rows`` reads it, ``hash_field`` and ``record_bytes`` write it.
``RecordCheck`` parses RECORD (bounded by the caller's read), hands out a digest per member
that hashes with the algorithm RECORD names (and sha256 for the new RECORD, in one pass), and
compares. Nothing here opens a file or a zip.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
from typing import Any

from rocm_build_backend.errors import WheelError

#: RECORD of a wheel with ~500,000 members; the most any command reads of one.
MAX_RECORD = 64 << 20
_ALGORITHMS = frozenset(
    a for a in hashlib.algorithms_guaranteed if a not in ("md5", "sha1") and not a.startswith("shake")
)


def parse_rows(text: str) -> list[list[str]]:
    """RECORD's rows (csv, as pip and installer write it); rows without a path are dropped.
    Raises csv.Error for text that is not csv."""
    return [row for row in csv.reader(io.StringIO(text)) if row and row[0]]


def hash_field(digest: Any) -> str:
    """A RECORD hash field: ``sha256=`` and the urlsafe base64 digest without padding."""
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")


def record_bytes(rows: list[tuple[str, str, str]]) -> bytes:
    """RECORD's bytes for ``rows`` (path, hash field, size): csv with ``\n`` line ends."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode("utf-8")


class RecordMismatch(WheelError):
    """The wheel's RECORD does not describe its members; such a wheel is not rewritten."""


class Digest:
    """sha256 of a member (for the new RECORD) and, when RECORD uses another algorithm, that
    one too; one ``update`` feeds both."""

    def __init__(self, algorithm: str | None) -> None:
        self.new = hashlib.sha256()
        self.old = hashlib.new(algorithm) if algorithm not in (None, "sha256") else None
        self.size = 0

    def update(self, data: Any, /) -> None:
        self.new.update(data)
        if self.old is not None:
            self.old.update(data)
        self.size += len(data)

    def digest(self) -> bytes:
        return self.new.digest()

    def original(self) -> bytes:
        return (self.old or self.new).digest()


class RecordCheck:
    """The rows of one RECORD, checked off member by member."""

    def __init__(self, data: bytes, wheel: str, record: str) -> None:
        self.wheel, self.record = wheel, record
        self.rows: dict[str, tuple[str, str, int | None]] = {}
        self.seen: set[str] = set()
        try:
            text = data.decode("utf-8")
            rows = parse_rows(text)
        except (UnicodeDecodeError, csv.Error) as exc:
            raise self._error(f"its RECORD cannot be read ({exc})") from None
        for row in rows:
            self._add(row)

    def _error(self, why: str) -> RecordMismatch:
        return RecordMismatch(
            f"{self.wheel}: {why}",
            hint="the wheel's RECORD must list every member with its hash and size; "
            "rebuild the wheel (nothing was written)",
        )

    def _add(self, row: list[str]) -> None:
        path, hashed, size = (row + ["", ""])[:3]
        if path in self.rows:
            raise self._error(f"its RECORD lists {path} twice")
        if path == self.record:
            self.rows[path] = ("", "", None)
            return
        algorithm, _, value = hashed.partition("=")
        if not value or algorithm not in _ALGORITHMS:
            raise self._error(f"its RECORD gives {path} no usable hash ({hashed or 'none'})")
        try:
            length = int(size) if size else None
        except ValueError:
            raise self._error(f"its RECORD gives {path} a size that is not a number") from None
        self.rows[path] = (algorithm, value, length)

    def digest_for(self, name: str) -> Digest:
        """The digest to feed ``name``'s bytes (as they are in the wheel)."""
        row = self.rows.get(name)
        if row is None:
            raise self._error(f"{name} is not listed in its RECORD")
        return Digest(row[0] or None)

    def verify(self, name: str, digest: Digest) -> None:
        """``name``'s bytes went through ``digest``: they must be what RECORD says."""
        algorithm, value, size = self.rows[name]
        self.seen.add(name)
        got = base64.urlsafe_b64encode(digest.original()).rstrip(b"=").decode("ascii")
        if size is not None and size != digest.size:
            raise self._error(f"{name} is {digest.size} bytes; its RECORD says {size}")
        if got != value.rstrip("="):
            raise self._error(f"{name} does not match the {algorithm} hash its RECORD gives")

    def verify_bytes(self, name: str, data: Any) -> None:
        digest = self.digest_for(name)
        view = memoryview(data)
        for pos in range(0, len(view), 1 << 20):
            digest.update(view[pos : pos + (1 << 20)])
        view.release()
        self.verify(name, digest)

    def finish(self) -> None:
        """Every row was a member (RECORD itself aside)."""
        missing = sorted(set(self.rows) - self.seen - {self.record})
        if missing:
            raise self._error(f"its RECORD lists {missing[0]}, which the wheel does not hold")
