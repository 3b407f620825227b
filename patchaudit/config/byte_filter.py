"""The byte filter of the rule index and of the whole-repository pre-pass."""

from __future__ import annotations

from typing import Iterable

__all__ = ["ByteGroups"]


class ByteGroups:
    """Groups of byte strings, matched when every string of one group is in the data: what
    `Rule.requires` and the pre-pass's `export_requires` say.  Each distinct string is
    looked for at most once per data (the groups of a rule share most of them)."""

    __slots__ = ("needles", "groups")

    def __init__(self, groups: Iterable[Iterable[bytes]]):
        listed = [tuple(g) for g in groups]
        self.needles: tuple[bytes, ...] = tuple(dict.fromkeys(s for g in listed for s in g))
        self.groups = tuple(tuple(self.needles.index(s) for s in g) for g in listed)

    def match(self, data: bytes) -> bool:
        present: dict[int, bool] = {}
        for g in self.groups:
            for i in g:
                found = present.get(i)
                if found is None:
                    found = present[i] = self.needles[i] in data
                if not found:
                    break
            else:
                return True
        return False
