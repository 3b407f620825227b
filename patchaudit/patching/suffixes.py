"""A suffix array of the file's line ids and a merge-sort tree over it (see `costs`)."""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from typing import Optional


class Suffixes:
    """Suffix array of a sequence of ints, sorted by the first ``depth`` items only (or
    more), and a merge-sort tree over it whose nodes are sorted when first asked for.

    ``interval(pat)`` (``len(pat) <= depth``): the rows whose suffixes start with
    ``pat``; ``first_at_or_after(lo, hi, x)`` / ``last_at_or_before(lo, hi, x)``: the
    smallest (largest) start among rows ``lo:hi`` that is >= x (<= x), or None.
    ``work`` counts the steps: about N per doubling round (log2 depth of them), the
    size of every tree node sorted, and one per binary-search or bisect step.
    """

    def __init__(self, seq: list[int], depth: int) -> None:
        n = len(seq)
        self.seq = seq
        self.n = n
        self.work = n
        # prefix doubling: sort by (rank of the first k items, rank of the next k)
        rank = [v + 1 for v in seq]  # 0 = past the end (sorts first: a shorter suffix is smaller)
        sa = sorted(range(n), key=rank.__getitem__)
        k = 1  # the ranks tell apart the first k items
        while k < depth:
            second = rank[k:] + [0] * min(k, n)
            width = n + 2
            keys = [f * width + s for f, s in zip(rank, second)]
            sa.sort(key=keys.__getitem__)
            new = [0] * n
            r = 0
            prev = -1
            for i in sa:
                key = keys[i]
                if key != prev:
                    r += 1
                    prev = key
                new[i] = r
            rank = new
            self.work += 3 * n
            k *= 2
            if r == n:  # all suffixes told apart: sorted for any depth
                k = max(k, n + 1)
                break
        self.depth = k
        self.sa = array("i" if n < (1 << 31) else "q", sa)
        self._nodes: dict[tuple[int, int], list[int]] = {}

    def _node(self, k: int, j: int) -> list[int]:
        """Rows j * 2**k .. (j + 1) * 2**k - 1, sorted by start."""
        node = self._nodes.get((k, j))
        if node is None:
            node = sorted(self.sa[j << k : (j + 1) << k])
            self._nodes[(k, j)] = node
            self.work += len(node)
        return node

    def interval(self, pat: list[int]) -> tuple[int, int]:
        """rows lo:hi are the suffixes that start with pat (len(pat) <= depth)."""
        seq, sa, m = self.seq, self.sa, len(pat)
        lo, hi = 0, self.n
        while lo < hi:
            mid = (lo + hi) // 2
            s = sa[mid]
            self.work += m
            if seq[s : s + m] < pat:
                lo = mid + 1
            else:
                hi = mid
        first = lo
        hi = self.n
        while lo < hi:
            mid = (lo + hi) // 2
            s = sa[mid]
            self.work += m
            if seq[s : s + m] <= pat:
                lo = mid + 1
            else:
                hi = mid
        return first, lo

    def _blocks(self, lo: int, hi: int):
        """The tree nodes (k, j) that exactly cover rows lo:hi (at most two per level)."""
        k = 0
        while lo < hi:
            if lo & 1:
                yield k, lo
                lo += 1
            if hi & 1:
                hi -= 1
                yield k, hi
            lo >>= 1
            hi >>= 1
            k += 1

    def first_at_or_after(self, lo: int, hi: int, x: int) -> Optional[int]:
        best: Optional[int] = None
        for k, j in self._blocks(lo, hi):
            node = self._node(k, j)
            i = bisect_left(node, x)
            self.work += 1
            if i < len(node) and (best is None or node[i] < best):
                best = node[i]
        return best

    def last_at_or_before(self, lo: int, hi: int, x: int) -> Optional[int]:
        best: Optional[int] = None
        for k, j in self._blocks(lo, hi):
            node = self._node(k, j)
            i = bisect_right(node, x) - 1
            self.work += 1
            if i >= 0 and (best is None or node[i] > best):
                best = node[i]
        return best
