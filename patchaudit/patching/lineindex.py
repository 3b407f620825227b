"""The file being patched, as the applier holds it: its lines, and an index of them
(text -> id, the lines of each id, prefix hashes) built on first use."""

from __future__ import annotations

from collections import Counter
from itertools import accumulate
from typing import Optional

from patchaudit.patching import costs
from patchaudit.patching.sides import Side
from patchaudit.patching.suffixes import Suffixes


class LineIndex:
    """The input lines of one apply_hunks call and their index; the applier's state."""

    def __init__(self, original: list[str], ends_with_newline: bool) -> None:
        inp = [s + "\n" for s in original]
        if inp and not ends_with_newline:
            inp[-1] = inp[-1][:-1]
        self.inp = inp
        self.input_lines = len(inp)
        self.last_frozen_line = 0
        self.out_offset = 0
        self.chunks: list[str] = []
        self.after_newline = True
        self.nl_count = 0  # newlines written so far
        self.out_line_of_input: dict[int, int] = {}
        self.work = 0
        # the line index, built on first use (see _build)
        self._ids: Optional[list[int]] = None
        self._tid: dict[str, int] = {}
        self._order: list[int] = []  # line numbers sorted by (id, line)
        self._start: list[int] = []  # id -> where its lines start in _order (and id + 1: end)
        self._hash: Optional[list[int]] = None  # prefix hashes of the ids, built on first use
        self._pow: list[int] = [1]
        self._sa: Optional[Suffixes] = None
        self._sa_rows: dict[tuple[int, ...], tuple[int, int]] = {}
        self.max_pattern = 1  # the longest hunk of the apply_hunks call: how deep to sort suffixes
        self.nearest_budget = costs.NEAREST_BUDGET_PER_LINE * len(inp) + costs.NEAREST_BUDGET_MIN

    # -- input -------------------------------------------------------------
    def ifetch(self, line: int) -> str:
        if line < 1 or line > self.input_lines:
            return ""
        return self.inp[line - 1]

    def _build(self) -> None:
        """Number the input lines: text -> id, and the lines of each id, in order."""
        if self._ids is not None:
            return
        tid: dict[str, int] = {}
        ids = [tid.setdefault(text, len(tid)) for text in self.inp]
        one_based = [0] + ids
        self._order = sorted(range(1, len(ids) + 1), key=one_based.__getitem__)
        counts = Counter(ids)
        self._start = list(accumulate((counts[i] for i in range(len(tid))), initial=0))
        self._ids, self._tid = ids, tid
        self.work += 2 * len(ids)

    def _occ(self, i: int) -> tuple[int, int]:
        """The lines of id i are _order[lo:hi]."""
        return self._start[i], self._start[i + 1]

    def _hashes(self, m: int) -> list[int]:
        """Prefix hashes of the line ids (built on first use), with _pow long enough for m."""
        if self._hash is None:
            assert self._ids is not None
            base, mod = costs.BASE, costs.MOD
            self._hash = list(accumulate(self._ids, lambda h, i: (h * base + i + 1) % mod, initial=0))
            self.work += len(self._ids)
        pw = self._pow
        while len(pw) <= m:
            pw.append(pw[-1] * costs.BASE % costs.MOD)
        return self._hash

    def _pattern(self, side: Side) -> tuple[list[int], list[int]]:
        """The pattern's line ids (-1: not in the file) and how often each occurs in the file."""
        cached = side.index
        if cached is not None and cached[0] is self:
            return cached[1], cached[2]
        self._build()
        tid, start = self._tid, self._start
        ids = [tid.get(t, -1) for t in side.texts]
        counts = [start[i + 1] - start[i] if i >= 0 else 0 for i in ids]
        self.work += len(ids)
        side.index = (self, ids, counts, None)
        return ids, counts

    def _pattern_hash(self, side: Side, i0: int, i1: int) -> int:
        """Hash of the pattern's ids i0:i1 (as _hashes hashes the file's)."""
        assert side.index is not None and side.index[0] is self
        phash = side.index[3]
        if phash is None:
            base, mod = costs.BASE, costs.MOD
            phash = list(accumulate(side.index[1], lambda h, i: (h * base + i + 1) % mod, initial=0))
            side.index = side.index[:3] + (phash,)
            self.work += len(phash)
        self._hashes(i1 - i0)
        return (phash[i1] - phash[i0] * self._pow[i1 - i0]) % costs.MOD

    def _window_hash(self, x: int, m: int) -> int:
        """Hash of file lines x .. x + m - 1."""
        h = self._hashes(m)
        return (h[x - 1 + m] - h[x - 1] * self._pow[m]) % costs.MOD
