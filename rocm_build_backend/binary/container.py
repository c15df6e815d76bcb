"""The record every reader returns: one device-code container and what was read from it.

Holds ``Container`` and the note helper; it reads no bytes and imports no reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

MAX_PROBLEMS = 100  # problems a container keeps; the rest are only counted


class ProblemList(list[str]):
    """A container's problems: the first ``MAX_PROBLEMS`` kept, the others counted in
    ``more`` (a hostile container can have one per entry)."""

    more = 0

    def append(self, item: str) -> None:
        if len(self) >= MAX_PROBLEMS:
            self.more += 1
            return
        super().append(item)

    def extend(self, items: Iterable[str]) -> None:
        for item in items:
            self.append(item)


@dataclass
class Container:
    """One device-code container: a bundle, a CCOB, a fatbin, a raw code object, ...

    ``kernels`` is False for a container that holds no kernels at all (an nvcc device-link
    stub); such a container does not count when deciding which targets cover every kernel.
    ``read`` is False when the targets could not be read (e.g. zstd not installed); ``note``
    then says why.
    """

    kind: str
    where: str
    offset: int
    targets: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=ProblemList)
    note: str = ""
    kernels: bool = True
    read: bool = True

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "where": self.where,
            "offset": self.offset,
            "targets": list(self.targets),
            "problems": list(self.problems),
        }
        if self.note:
            out["note"] = self.note
        if not self.kernels:
            out["kernels"] = False
        if not self.read:
            out["read"] = False
        return out


def add_note(c: Container, text: str) -> None:
    if text and text not in c.note:
        c.note = f"{c.note}; {text}" if c.note else text
