"""The near-match of a failed hunk (`HunkResult.nearest`): where most of its lines
equal the file's, counted within a per-file budget (see `costs`)."""

from __future__ import annotations

import heapq
from typing import Optional

from patchaudit.patching import costs
from patchaudit.patching.lineindex import LineIndex
from patchaudit.patching.sides import Side


class NearMatch(LineIndex):
    """`nearest()`, on the line index."""

    # -- near-match of a failed hunk ----------------------------------------
    def nearest(self, side: Side, first_guess: int) -> Optional[tuple[int, int, int]]:
        """The position (1 .. max(1, lines - n + 1)) where most pattern lines equal the
        file's, ties broken by distance to first_guess, then by position; lines past the
        end read as "".  (pos, count, n), or None if no line matches anywhere."""
        texts = side.texts
        n = len(texts)
        if n == 0:
            return None
        n_lines = self.input_lines
        last = max(1, n_lines - n + 1)
        if n_lines < n or last * n <= costs.NEAREST_SMALL:  # a small file: try every position
            return self._nearest_of(side, range(1, last + 1), first_guess)
        self._build()
        tid, start, by_id = self._tid, self._start, self._order
        groups: dict[int, list[int]] = {}  # line id -> the pattern lines that have it
        for j, t in enumerate(texts):
            i = tid.get(t)
            if i is not None:
                groups.setdefault(i, []).append(j)
        self.work += n
        if not groups:
            return None
        order = sorted(groups.items(), key=lambda g: ((start[g[0] + 1] - start[g[0]]) * len(g[1]), g[0]))
        left = sum(len(js) for js in groups.values())  # pattern lines not counted yet
        counts: dict[int, int] = {}  # position -> lines equal among those counted
        top = 0
        allowance = self.nearest_budget + 4 * n
        spent = 0
        try:
            for g, (gid, js) in enumerate(order):
                lo, hi = start[gid], start[gid + 1]
                cost = (hi - lo) * len(js)
                if counts and len(counts) * left <= cost and spent + len(counts) * left <= allowance:
                    # cheaper than reading the next line's occurrences: finish counting
                    # where some line matched; that is the answer if it beats every
                    # position no counted line matches (at most `left` lines equal there)
                    spent += len(counts) * left
                    exact = self._finish_counts(texts, counts, order[g:])
                    if max(exact.values()) > left:
                        return self._best(exact, first_guess, n)
                if spent + cost > allowance:
                    return self._nearest_fallback(side, counts, first_guess)
                spent += cost
                for q in by_id[lo:hi]:
                    for j in js:
                        p = q - j
                        if 0 < p <= last:
                            c = counts.get(p, 0) + 1
                            counts[p] = c
                            if c > top:
                                top = c
                left -= len(js)
                if left == 0:
                    return self._best(counts, first_guess, n) if counts else None
                if top > left:
                    # no position that no counted line matches can reach `top`
                    close = {p: c for p, c in counts.items() if c + left >= top}
                    spent += len(counts)
                    if spent + len(close) * left > allowance:
                        return self._nearest_fallback(side, counts, first_guess)
                    spent += len(close) * left
                    return self._best(self._finish_counts(texts, close, order[g + 1 :]), first_guess, n)
            return self._best(counts, first_guess, n) if counts else None  # pragma: no cover
        finally:
            self.work += spent
            self.nearest_budget = max(0, self.nearest_budget - spent)

    def _finish_counts(
        self, texts: list[str], counts: dict[int, int], rest: list[tuple[int, list[int]]]
    ) -> dict[int, int]:
        """counts plus the pattern lines of the groups `rest` that match at each position."""
        inp = self.inp
        js = [j for _, group in rest for j in group]
        return {p: c + sum(1 for j in js if inp[p - 1 + j] == texts[j]) for p, c in counts.items()}

    @staticmethod
    def _best(counts: dict[int, int], first_guess: int, n: int) -> tuple[int, int, int]:
        pos = min(counts, key=lambda p: (-counts[p], abs(p - first_guess), p))
        return pos, counts[pos], n

    def _nearest_of(self, side: Side, positions, first_guess: int) -> Optional[tuple[int, int, int]]:
        """The best of these positions, each counted line by line."""
        texts = side.texts
        n = len(texts)
        inp = self.inp
        best: Optional[tuple[int, int, int]] = None
        best_key: Optional[tuple[int, int, int]] = None
        for pos in positions:
            window = inp[pos - 1 : pos - 1 + n]
            count = sum(map(str.__eq__, window, texts))
            if len(window) < n:  # past the end of the file every line reads as ""
                count += texts[len(window) :].count("")
            self.work += n
            key = (-count, abs(pos - first_guess), pos)
            if best_key is None or key < best_key:
                best_key, best = key, (pos, count, n)
        if best is None or best[1] == 0:
            return None
        return best

    def _nearest_fallback(self, side: Side, counts: dict[int, int], first_guess: int):
        """Over budget: the best of the positions around first_guess and of those where
        the most of the rarer lines counted so far match."""
        last = max(1, self.input_lines - len(side.texts) + 1)
        around = range(max(1, first_guess - costs.NEAREST_WINDOW), min(last, first_guess + costs.NEAREST_WINDOW) + 1)
        rare = heapq.nsmallest(costs.NEAREST_ANCHORS, counts, key=lambda p: (-counts[p], abs(p - first_guess), p))
        self.work += len(counts)
        return self._nearest_of(side, sorted(set(around) | set(rare)), first_guess)
