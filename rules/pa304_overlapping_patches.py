from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass
from typing import cast

from patchaudit.lint.rule import PATCH, Example, Rule
from patchaudit.model.findings import Severity

FIRST = """\
From: A <a@example.com>
Subject: [PATCH 1/2] keep token ids for pre-tokenized prompts

--- a/python/sglang/srt/managers/tokenizer_manager.py
+++ b/python/sglang/srt/managers/tokenizer_manager.py
@@ -10,6 +10,7 @@ class TokenizerManager:
     def _tokenize(self, obj):
         if obj.input_ids is not None:
-            input_ids = obj.input_ids
+            input_ids = list(obj.input_ids)
+            keep_ids = True
         else:
             input_ids = self.tokenizer.encode(obj.text)
         return input_ids
"""

SECOND_OVERLAPPING = """\
Subject: [PATCH 2/2] log prompt lengths

--- a/python/sglang/srt/managers/tokenizer_manager.py
+++ b/python/sglang/srt/managers/tokenizer_manager.py
@@ -10,7 +10,7 @@ class TokenizerManager:
     def _tokenize(self, obj):
         if obj.input_ids is not None:
             input_ids = list(obj.input_ids)
-            keep_ids = True
+            keep_ids = self.server_args.keep_ids
         else:
             input_ids = self.tokenizer.encode(obj.text)
         return input_ids
"""

SECOND_ELSEWHERE = """\
Subject: [PATCH 2/2] log prompt lengths

--- a/python/sglang/srt/managers/tokenizer_manager.py
+++ b/python/sglang/srt/managers/tokenizer_manager.py
@@ -80,6 +80,7 @@ class TokenizerManager:
     def _log(self, obj):
         n = len(obj.input_ids)
         logger.info("prompt of %d tokens", n)
+        logger.debug("request %s", obj.rid)
         return n
 
     def _other(self):
"""

SECOND_INSERT_AFTER = """\
--- a/python/sglang/srt/managers/tokenizer_manager.py
+++ b/python/sglang/srt/managers/tokenizer_manager.py
@@ -12,5 +12,6 @@ class TokenizerManager:
             input_ids = list(obj.input_ids)
             keep_ids = True
+            assert all(isinstance(t, int) for t in input_ids)
         else:
             input_ids = self.tokenizer.encode(obj.text)
         return input_ids
"""


@dataclass(frozen=True)
class Change:
    """A run of changed lines of one hunk, on a doubled line axis.

    Line L is point 2L; the gap between lines L and L+1 is 2L+1.  A run that
    replaces or adds lines spans [2*first, 2*last]; a pure insertion (or, on
    the post-image side, a pure removal) is the gap where it happens.
    """

    lo: int
    hi: int
    patch_line: int  # first added line of the run in the patch file (else its first line)
    header_line: int  # the hunk's "@@" line

    def lines(self) -> str:
        a, b = (self.lo + 1) // 2, self.hi // 2
        if self.lo % 2 and self.lo == self.hi:
            return f"the gap after line {self.lo // 2}"
        return f"line {a}" if a >= b else f"lines {a}-{b}"


def _runs(hunk, side: str) -> list[Change]:
    """Changed runs of a hunk: side "pre" in pre-image lines, "post" in post-image lines."""
    out: list[Change] = []
    own, other = ("-", "+") if side == "pre" else ("+", "-")
    start = hunk.source_start if side == "pre" else hunk.target_start
    length = hunk.source_length if side == "pre" else hunk.target_length
    last = start - 1 if length else start  # the line before the current position
    run: list = []

    def close():
        if not run:
            return
        mine = [(l.source_line if side == "pre" else l.target_line) for l in run if l.kind == own]
        mine = [x for x in mine if x is not None]
        if mine:
            lo, hi = 2 * min(mine), 2 * max(mine)
        else:
            lo = hi = 2 * run_before[0] + 1
        # anchor at the first added line: where a suppression comment can go
        anchor = next((l.patch_line for l in run if l.kind == "+"), run[0].patch_line)
        out.append(Change(lo, hi, anchor, hunk.header_line))
        run.clear()

    run_before = [last]
    for l in hunk.lines:
        if l.kind == " ":
            close()
            last = (l.source_line if side == "pre" else l.target_line) or last
            run_before[0] = last
            continue
        if not run:
            run_before[0] = last
        run.append(l)
        if l.kind == own:
            last = (l.source_line if side == "pre" else l.target_line) or last
    close()
    return out


def _overlap(a: Change, b: Change, touching: bool) -> bool:
    pad = 1 if touching else 0
    return a.lo - pad <= b.hi and b.lo <= a.hi + pad


class _Coverage:
    """The changes the earlier patches of a set leave in one file, by position.

    A segment tree over the positions where those changes start and end (all known
    before the set is walked); a change of patch k puts bit k on the O(log n) nodes its
    range decomposes into (`tag`) and on their ancestors (`agg`, what the subtree
    holds).  A query ORs the `agg` of the nodes a later change decomposes into and the
    `tag` of their ancestors: the bit mask of the earlier patches it overlaps, whose
    count, most recent and earliest come from the mask, in O(log n) big-integer ORs,
    never comparing the change with every earlier one (3,000 patches of the same lines
    were 4.5 million comparisons and as many findings).
    """

    def __init__(self, points: list[int]) -> None:
        self.xs = sorted(set(points))  # elementary segment i is [xs[i], xs[i + 1])
        self.size = 1
        while self.size < max(len(self.xs), 1):
            self.size *= 2
        self.tag = [0] * (2 * self.size)
        self.agg = [0] * (2 * self.size)

    def add(self, lo: int, hi: int, bit: int) -> None:
        """Patch `bit` changes [lo, hi] (both ends are among the points given)."""
        l = bisect_left(self.xs, lo) + self.size
        r = bisect_left(self.xs, hi + 1) + self.size
        if l >= r:
            return
        first, last = l, r - 1
        tag, agg = self.tag, self.agg
        while l < r:
            if l & 1:
                tag[l] |= bit
                agg[l] |= bit
                l += 1
            if r & 1:
                r -= 1
                tag[r] |= bit
                agg[r] |= bit
            l >>= 1
            r >>= 1
        for i in (first >> 1, last >> 1):
            while i:
                agg[i] |= bit
                i >>= 1

    def query(self, lo: int, hi: int) -> int:
        """The bits of the patches whose changes cover a position in [lo, hi]."""
        l = max(bisect_right(self.xs, lo) - 1, 0)
        r = min(bisect_right(self.xs, hi), len(self.xs))
        if l >= r:
            return 0
        l += self.size
        r += self.size
        first, last = l, r - 1
        mask = 0
        tag, agg = self.tag, self.agg
        while l < r:
            if l & 1:
                mask |= agg[l]
                l += 1
            if r & 1:
                r -= 1
                mask |= agg[r]
            l >>= 1
            r >>= 1
        for i in (first >> 1, last >> 1):
            while i:
                mask |= tag[i]
                i >>= 1
        return mask


def _bits_high_first(mask: int):
    while mask:
        top = mask.bit_length() - 1
        yield top
        mask &= ~(1 << top)


class OverlappingPatches(Rule):
    """
    Flags two patches of one set that change overlapping lines of the same file.

    ## What it does
    Looks at every patch set of the run (the patches of one folder, in the
    order of its quilt `series` file when there is one, else in file name
    order: `0001-...`, `0002-...`) and, for each pair of patches that change
    the same target file, compares the lines the earlier patch leaves changed
    with the lines the later one changes.  When they overlap (or touch: the
    later patch changes the line right next to one the earlier patch wrote),
    the later patch is reported at its hunk, naming the earlier patch and its
    hunk.

    Option `touching` (default `true`): set it to `false` to report only
    changes of the very same lines or insertions at the same place.

    ## Why is this bad?
    The later patch was written against the earlier one's result: applied in
    another order, or after the earlier one is dropped at an engine bump, it
    fails or, worse, applies with fuzz somewhere else.  Nothing in the set says
    so.  Reviewers reading one patch do not see that another one rewrites the
    same lines, and a fix in the first patch is silently overwritten by the
    second.

    ## Example
    `0001-keep-ids.patch` adds `keep_ids = True` to `_tokenize`;
    `0002-log-lengths.patch` rewrites that line to
    `keep_ids = self.server_args.keep_ids`.

    ## Use instead
    Fold the two changes into one patch, or make the patches touch disjoint
    lines; if the order is intended, keep them in a quilt `series` file and
    suppress the finding on the later patch's line with
    `# patchaudit: ignore[PA304]`.

    ## Incident
    RL frameworks carry stacks of engine patches per version
    (slime's `docker/patch/<version>/`, verl's and AReaL's SGLang patches);
    the token-id preservation of sgl-project/sglang#26555 was undone by a patch
    that rewrote the same call (seed report 002), which is the kind of
    interaction a stack of independently edited patches hides.
    """

    code = "PA304"
    name = "overlapping-patches"
    severity = Severity.WARNING
    kinds = frozenset({PATCH})
    options = {"touching": True}

    VALID = [
        Example(
            SECOND_ELSEWHERE,
            kind="patch",
            filename="0002-log-lengths.patch",
            files={"0001-keep-ids.patch": FIRST},
            title="the patches change distant lines",
        ),
        Example(
            SECOND_OVERLAPPING,
            kind="patch",
            filename="0002-log-lengths.patch",
            files={"other/0001-keep-ids.patch": FIRST},
            title="patches of different sets (folders)",
        ),
        Example(
            SECOND_INSERT_AFTER,
            kind="patch",
            filename="0002-assert.patch",
            files={"0001-keep-ids.patch": FIRST},
            options={"touching": False},
            title="an insertion next to the other change, touching = false",
        ),
        Example(FIRST, kind="patch", title="a patch alone"),
    ]
    INVALID = [
        Example(
            SECOND_OVERLAPPING,
            kind="patch",
            filename="0002-log-lengths.patch",
            files={"0001-keep-ids.patch": FIRST},
            line=10,
            contains="0001-keep-ids.patch",
            title="the later patch rewrites a line the earlier one added",
        ),
        Example(
            SECOND_INSERT_AFTER,
            kind="patch",
            filename="0002-assert.patch",
            files={"0001-keep-ids.patch": FIRST},
            line=6,
            contains="0001-keep-ids.patch",
            title="an insertion right after a line the earlier patch wrote",
        ),
        Example(
            SECOND_OVERLAPPING,
            kind="patch",
            filename="a-log-lengths.patch",
            files={"b-keep-ids.patch": FIRST, "series": "# quilt\nb-keep-ids.patch -p1\na-log-lengths.patch\n"},
            line=10,
            contains="b-keep-ids.patch",
            title="the quilt series file gives the order (not the file names)",
        ),
    ]

    #: earlier patches named one by one for each file a later patch changes; the rest
    #: are counted in one more finding (3,000 patches of the same lines gave 4.5 million
    #: findings, one per pair and hunk)
    MAX_PAIRS = 2
    #: runs of changed lines of one file a set's patches may leave before the later ones
    #: are no longer compared (memory: a bit per patch on each node of the file's tree)
    MAX_CHANGES_PER_FILE = 10_000

    def check_patch_set(self, units) -> None:
        touching = bool(self.opts.get("touching", True))
        pad = 1 if touching else 0
        sets: dict[str, list] = defaultdict(list)
        for u in units:
            sets[u.set_name or os.path.dirname(u.path)].append(u)
        for members in sets.values():
            # per patch and target file: the lines it changes (pre-image) and leaves changed (post)
            walked = []
            for u in members:
                mine: dict[str, list[Change]] = defaultdict(list)
                posts: dict[str, list[Change]] = defaultdict(list)
                for section in u.patch.sections:
                    if section.is_binary or not section.hunks:
                        continue
                    for hunk in section.hunks:
                        mine[section.path].extend(_runs(hunk, "pre"))
                        posts[section.path].extend(_runs(hunk, "post"))
                walked.append((u, mine, posts))
            # per target file: the changes later patches are compared with, the first
            # MAX_CHANGES_PER_FILE of them (the tree's positions are known before the walk)
            points: dict[str, list[int]] = defaultdict(list)
            kept: dict[str, int] = defaultdict(int)
            full_at: dict[str, object] = {}  # the first patch whose changes are not kept
            for u, _, posts in walked:
                for path, changes in posts.items():
                    if path in full_at:
                        continue
                    if kept[path] + len(changes) > self.MAX_CHANGES_PER_FILE:
                        full_at[path] = u
                        continue
                    kept[path] += len(changes)
                    for c in changes:
                        points[path] += (c.lo - pad, c.hi + pad + 1)
            coverage = {path: _Coverage(pts) for path, pts in points.items()}
            earlier: dict[str, list[tuple[object, list[Change]]]] = defaultdict(list)
            full: set[str] = set()
            for u, mine, posts in walked:
                for path, changes in mine.items():
                    if earlier[path]:
                        self._compare(u, path, changes, coverage[path], earlier[path], touching)
                for path, changes in posts.items():
                    if full_at.get(path) is u:
                        full.add(path)
                        anchor = (mine.get(path) or changes or [cast(Change, None)])[0]
                        self.report_in(
                            u,
                            anchor.patch_line if anchor else 1,
                            0,
                            f"the patches of this set change {path} in more than "
                            f"{self.MAX_CHANGES_PER_FILE:,} runs of lines: the changes of this patch and of "
                            f"the later ones are not compared with the patches after them (PA304's limit)",
                        )
                    if path in full:
                        continue
                    bit = 1 << len(earlier[path])
                    earlier[path].append((u, changes))
                    for c in changes:
                        coverage[path].add(c.lo - pad, c.hi + pad, bit)

    def _compare(
        self,
        unit,
        path: str,
        changes: list[Change],
        coverage: _Coverage,
        earlier: list[tuple[object, list[Change]]],
        touching: bool,
    ) -> None:
        """Report `unit`'s changes of `path` that overlap earlier patches: each earlier
        patch once, the MAX_PAIRS most recent by name, the others in one finding."""
        masks = [coverage.query(b.lo, b.hi) for b in changes]
        union = 0
        for m in masks:
            union |= m
        if not union:
            return
        named = 0
        for b, m in zip(changes, masks):
            for k in _bits_high_first(m & ~named):
                if named.bit_count() >= self.MAX_PAIRS:
                    break
                named |= 1 << k
                other, a = self._earlier_change(earlier[k], b, touching)
                self.report_in(
                    unit,
                    b.patch_line,
                    0,
                    f"changes {b.lines()} of {path}, which {other.path} (applied earlier) also changes "
                    f"at its line {a.patch_line}: the two patches depend on their order; merge them or "
                    f"make them change separate lines",
                    related=[(other.path, a.patch_line, f"the earlier change of {path}")],
                )
        rest = union & ~named
        if not rest:
            return
        first = (rest & -rest).bit_length() - 1  # the earliest of the others
        count = rest.bit_count()
        b = next(b for b, m in zip(changes, masks) if m >> first & 1)
        other, a = self._earlier_change(earlier[first], b, touching)
        many = (
            f"{count:,} more patches applied earlier also change"
            if count > 1
            else "1 more patch applied earlier also changes"
        )
        self.report_in(
            unit,
            b.patch_line,
            0,
            f"changes {b.lines()} of {path}, which {many} (the first: {other.path} at its line "
            f"{a.patch_line}): the patches depend on their order; merge them or make them change "
            f"separate lines",
            related=[(other.path, a.patch_line, f"the first earlier change of {path}")],
        )

    @staticmethod
    def _earlier_change(entry, b: Change, touching: bool):
        other, changes = entry
        return other, next((a for a in changes if _overlap(a, b, touching)), changes[0])
