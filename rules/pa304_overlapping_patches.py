from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, cast

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

SECOND_SAME_LINE = """\
--- a/python/sglang/srt/managers/tokenizer_manager.py
+++ b/python/sglang/srt/managers/tokenizer_manager.py
@@ -10,6 +10,6 @@ class TokenizerManager:
     def _tokenize(self, obj):
         if obj.input_ids is not None:
-            input_ids = obj.input_ids
+            input_ids = tuple(obj.input_ids)
         else:
             input_ids = self.tokenizer.encode(obj.text)
         return input_ids
"""

DOCKERFILE = """\
FROM lmsysorg/sglang:v0.5.15.post1
COPY *.patch /sgl-workspace/sglang/
RUN cd /sgl-workspace/sglang && git apply 0001-keep-ids.patch && git apply 0002-tuple-ids.patch
"""
SERIES_ASSERT = "0001-keep-ids.patch\n0002-assert.patch\n"

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


@dataclass(frozen=True)
class Edit:
    """A run of a hunk that removes (or replaces) lines of the file it is written on: the
    pre-image lines it spans, the texts it removes and adds, its first patch line."""

    lo: int
    hi: int
    removed: frozenset[str]
    added: frozenset[str]
    patch_line: int


def _edits(hunk) -> list[Edit]:
    """The runs of `hunk` that remove lines (pure insertions are not edits: either order
    of two insertions at one place applies, with an offset)."""
    out: list[Edit] = []
    run: list = []

    def close() -> None:
        removed = [l for l in run if l.kind == "-" and l.source_line is not None]
        if removed:
            anchor = next((l.patch_line for l in run if l.kind == "+"), run[0].patch_line)
            out.append(
                Edit(
                    min(l.source_line for l in removed),
                    max(l.source_line for l in removed),
                    frozenset(l.text.strip() for l in removed if l.text.strip()),
                    frozenset(l.text.strip() for l in run if l.kind == "+" and l.text.strip()),
                    anchor,
                )
            )
        run.clear()

    for l in hunk.lines:
        if l.kind == " ":
            close()
        else:
            run.append(l)
    close()
    return out


def _written_without(ha, hb, b: Change, pad: int) -> bool:
    """Whether run `b` of hunk `hb` (a later patch) meets lines hunk `ha` (an earlier
    patch) wrote, and `hb` shows none of those lines: `hb` was written on a file without
    `ha`'s change."""
    for a in _runs(ha, "post"):
        if not (a.lo - pad <= b.hi and b.lo <= a.hi + pad):
            continue
        wrote = {
            l.text.strip()
            for l in ha.lines
            if l.kind == "+" and l.target_line is not None and a.lo <= 2 * l.target_line <= a.hi and l.text.strip()
        }
        shown = {l.text.strip() for l in hb.lines if l.kind != "+"}
        if wrote and not wrote & shown:
            return True
    return False


def _needs_later(ha, hb) -> bool:
    """Whether hunk `ha` (an earlier patch) shows, as context at the place, lines that hunk
    `hb` (a later patch) adds: `ha` was written on the later patch's result."""
    lo, hi = ha.source_start, ha.source_start + max(ha.source_length, 1) - 1
    context = {l.text.strip() for l in ha.lines if l.kind == " " and l.text.strip()}
    removed_b = {l.text.strip() for l in hb.lines if l.kind == "-" and l.text.strip()}
    for l in hb.lines:
        text = l.text.strip()
        if l.kind == "+" and l.target_line is not None and lo <= l.target_line <= hi and text:
            if text in context and text not in removed_b:
                return True
    return False


def conflict_in_every_order(a: Edit, b: Edit) -> frozenset[str]:
    """The lines two edits of one file, written on the same text, both remove and neither
    puts back (empty: no conflict in every order).  Applied in either order, the second
    patch's pre-image has lost those lines where it expects them, so it fails (git apply)
    or lands elsewhere (GNU patch with fuzz); an edit written on the other's result
    removes lines the other added, and applies in that order."""
    if a.lo > b.hi or b.lo > a.hi:
        return frozenset()
    return (a.removed & b.removed) - a.added - b.added


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
    Looks at every patch set of the run in the order the build applies it:
    the order of a recipe (a Dockerfile's or build script's `git apply`/`patch`
    commands, one set per checkout, or a quilt `series` file: `patchaudit
    plan` shows it).  For each pair of patches that change the same target
    file, where the later patch changes lines the earlier one wrote (or the
    line right next to them), the later patch must show what the earlier one
    wrote there (in its context or removed lines: it was written on the
    earlier patch's result).  When it shows none of it, it was written without
    the earlier patch, and the build's order breaks it: the later patch is
    reported at its hunk, naming the earlier patch and its hunk.

    Patches no recipe or series file orders (one set per folder) have no known
    order, so an overlap is reported only when the two conflict in every
    order: both remove the same line of the file they are written on, at
    overlapping places, and neither adds it back.  Applied in either order,
    the second patch then misses a line of its pre-image (git apply refuses
    it, GNU patch fuzzes it elsewhere).  A patch that rewrites lines the other
    one added is written on the other's result and applies in that order; two
    insertions at the same place apply in either order: neither is reported.

    Option `touching` (default `true`): set it to `false` to compare only
    changes of the very same lines or insertions at the same place.

    ## Why is this bad?
    The later patch was written against a file without the earlier one's
    change: in the build's order it fails (git apply stops the build) or,
    worse, applies with fuzz somewhere else, and a fix in the first patch is
    silently overwritten by the second.  Reviewers reading one patch do not
    see that another one rewrites the same lines.

    ## Example
    `0001-keep-ids.patch` rewrites `input_ids = obj.input_ids` to
    `input_ids = list(obj.input_ids)`; `0002-tuple-ids.patch`, applied after it
    by the Dockerfile, rewrites the same original line to
    `input_ids = tuple(obj.input_ids)`.

    ## Use instead
    Fold the two changes into one patch, or make the patches touch disjoint
    lines; if the order is intended, keep them in a quilt `series` file and
    suppress the finding on the later patch's line with
    `# patchaudit: ignore[PA304]`.

    ## Incident
    RL frameworks carry stacks of engine patches per version
    (slime's `docker/patch/<version>/`, verl's and AReaL's SGLang patches);
    the token-id preservation of sgl-project/sglang#26555 was undone by a patch
    that rewrote the same call (THUDM/slime#2388), which is the kind of
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
            files={"0001-keep-ids.patch": FIRST, "series": SERIES_ASSERT},
            options={"touching": False},
            title="an insertion next to the other change, touching = false",
        ),
        Example(
            SECOND_OVERLAPPING,
            kind="patch",
            filename="0002-log-lengths.patch",
            files={"0001-keep-ids.patch": FIRST},
            title="no recipe or series: the later patch is written on the earlier one (one order works)",
        ),
        Example(
            SECOND_INSERT_AFTER,
            kind="patch",
            filename="0002-assert.patch",
            files={"0001-keep-ids.patch": FIRST, "series": SERIES_ASSERT},
            title="the series order is the one the later patch was written for (it shows the earlier lines)",
        ),
        Example(
            SECOND_OVERLAPPING,
            kind="patch",
            filename="a-log-lengths.patch",
            files={"b-keep-ids.patch": FIRST, "series": "# quilt\nb-keep-ids.patch -p1\na-log-lengths.patch\n"},
            title="the quilt series file gives the order (not the file names)",
        ),
        Example(FIRST, kind="patch", title="a patch alone"),
    ]
    INVALID = [
        Example(
            SECOND_SAME_LINE,
            kind="patch",
            filename="0002-tuple-ids.patch",
            files={"0001-keep-ids.patch": FIRST, "series": "0001-keep-ids.patch\n0002-tuple-ids.patch\n"},
            line=7,
            contains="written without",
            title="the series applies a patch written without the earlier one's change",
        ),
        Example(
            SECOND_SAME_LINE,
            kind="patch",
            filename="0002-tuple-ids.patch",
            files={"0001-keep-ids.patch": FIRST, "Dockerfile": DOCKERFILE},
            line=7,
            contains="applied earlier by the recipe",
            title="a Dockerfile's `git apply` order",
        ),
        Example(
            SECOND_SAME_LINE,
            kind="patch",
            filename="0002-tuple-ids.patch",
            files={"0001-keep-ids.patch": FIRST},
            line=7,
            contains="in either order",
            title="no recipe or series: both rewrite the same original line (conflict in every order)",
        ),
    ]

    #: earlier patches named one by one for each file a later patch changes; the rest
    #: are counted in one more finding (3,000 patches of the same lines gave 4.5 million
    #: findings, one per pair and hunk)
    MAX_PAIRS = 2
    #: runs of changed lines of one file a set's patches may leave before the later ones
    #: are no longer compared (memory: a bit per patch on each node of the file's tree)
    MAX_CHANGES_PER_FILE = 10_000
    #: patches of one recipe-ordered or unordered set a later patch is compared with, per file
    #: (pairwise: the pairs grow quadratically; the later patches are still compared with them)
    MAX_PATCHES_PER_FILE = 200

    def check_patch_set(self, units) -> None:
        touching = bool(self.opts.get("touching", True))
        pad = 1 if touching else 0
        sets: dict[str, list] = defaultdict(list)
        for u in units:
            sets[u.set_name or os.path.dirname(u.path)].append(u)
        for members in sets.values():
            order = {u.set_ordered for u in members}
            if False in order:
                self._unordered(members)
                continue
            if order == {"recipe"}:
                self._recipe_order(members)
                continue
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

    def _recipe_order(self, members) -> None:
        """A set a recipe applies in a known order: report a later patch whose change meets
        lines an earlier one wrote without showing them (it was written without the
        earlier patch, and the build's order breaks it); one written on the earlier
        patch's result is what the order means, and is not reported."""
        pad = 1 if bool(self.opts.get("touching", True)) else 0
        by_file: dict[str, list[tuple[Any, list]]] = defaultdict(list)
        for u in members:
            for section in u.patch.sections:
                if not section.is_binary and section.hunks:
                    by_file[section.path].append((u, section.hunks))
        for path, entries in by_file.items():
            for j, (ub, hunks_b) in enumerate(entries):
                hits = []
                for ua, hunks_a in self._kept(entries, j, path, hunks_b[0].header_line):
                    hit = self._recipe_hit(path, ua, hunks_a, hunks_b, pad)
                    if hit is not None:
                        hits.append(hit)
                self._report_pairs(ub, path, hits, "applied earlier by the recipe")

    def _recipe_hit(self, path: str, ua, hunks_a, hunks_b, pad: int):
        """(line, message, related) of a later patch (`hunks_b`) against an earlier one, or None."""
        hit = next(
            ((ha, b) for hb in hunks_b for b in _runs(hb, "pre") for ha in hunks_a if _written_without(ha, hb, b, pad)),
            None,
        )
        if hit is not None:
            ha, b = hit
            return (
                b.patch_line,
                f"changes {b.lines()} of {path}, where {ua.path} (applied earlier by the recipe) "
                f"wrote lines this patch does not show: it was written without that patch, and the "
                f"build's order breaks it; rebase it on the earlier patch or change the order",
                (ua.path, ha.header_line, f"the earlier change of {path}"),
            )
        back = next(((ha, hb) for hb in hunks_b for ha in hunks_a if _needs_later(ha, hb)), None)
        if back is None:
            return None
        ha, hb = back
        return (
            next((l.patch_line for l in hb.lines if l.kind == "+"), hb.header_line),
            f"writes lines of {path} that {ua.path} (applied earlier by the recipe) "
            f"already shows as context: that patch was written on this one's result, "
            f"and the build's order breaks it; apply this patch first",
            (ua.path, ha.header_line, f"the earlier patch's context in {path}"),
        )

    def _kept(self, entries: list, j: int, path: str, line: int) -> list:
        """The earlier patches of `path` the `j`th is compared with, most recent first: at most
        the first MAX_PATCHES_PER_FILE of the set (pairs grow quadratically); the patch past
        that limit says so once."""
        limit = self.MAX_PATCHES_PER_FILE
        if j == limit:
            self.report_in(
                entries[j][0],
                line,
                0,
                f"the patches of this set change {path} in more than {limit:,} patches: this patch and "
                f"the later ones are compared only with the first {limit:,} (PA304's limit)",
            )
        return list(reversed(entries[: min(j, limit)]))

    def _report_pairs(self, unit, path: str, hits: list, how: str) -> None:
        """Report `unit`'s overlaps with earlier patches (`hits`: (line, message, related), the
        most recent first): the MAX_PAIRS most recent named, the others in one finding."""
        for line, message, related in hits[: self.MAX_PAIRS]:
            self.report_in(unit, line, 0, message, related=[related])
        rest = hits[self.MAX_PAIRS :]
        if not rest:
            return
        line, _, (first, first_line, _) = rest[-1]  # the earliest of the others
        many = f"{len(rest):,} more patches {how} also change" if len(rest) > 1 else f"1 more patch {how} also changes"
        self.report_in(
            unit,
            line,
            0,
            f"{many} lines of {path} this patch changes (the first: {first} at its line {first_line}): the "
            f"patches depend on their order; merge them or make them change separate lines",
            related=[(first, first_line, f"the first earlier change of {path}")],
        )

    def _unordered(self, members) -> None:
        """A set no recipe or series file orders: report a patch only where it and another
        of the set conflict in every order (`conflict_in_every_order`), each pair once."""
        by_file: dict[str, list[tuple[Any, list[Edit]]]] = defaultdict(list)
        for u in sorted(members, key=lambda u: (os.path.basename(u.path), u.path)):
            for section in u.patch.sections:
                if section.is_binary or not section.hunks:
                    continue
                edits = [e for h in section.hunks for e in _edits(h)]
                if edits:
                    by_file[section.path].append((u, edits))
        for path, entries in by_file.items():
            for j, (ub, edits_b) in enumerate(entries):
                hits = []
                for ua, edits_a in self._kept(entries, j, path, edits_b[0].patch_line):
                    hit = next(
                        ((a, b, lost) for b in edits_b for a in edits_a if (lost := conflict_in_every_order(a, b))),
                        None,
                    )
                    if hit is None:
                        continue
                    a, b, lost = hit
                    hits.append(
                        (
                            b.patch_line,
                            f"changes lines {b.lo}-{b.hi} of {path}, which {ua.path} also changes at its line "
                            f"{a.patch_line}: both remove `{sorted(lost)[0][:60]}` and neither puts it back, so "
                            f"in either order the second patch fails (no recipe or series file orders them); "
                            f"merge them or rebase one on the other",
                            (ua.path, a.patch_line, f"the other change of {path}"),
                        )
                    )
                self._report_pairs(ub, path, hits, "of the set")

    @staticmethod
    def _earlier_change(entry, b: Change, touching: bool):
        other, changes = entry
        return other, next((a for a in changes if _overlap(a, b, touching)), changes[0])
