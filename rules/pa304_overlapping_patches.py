from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass

from patchaudit.findings import Severity
from patchaudit.rule import PATCH, Example, Rule

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
    patch_line: int          # first added line of the run in the patch file (else its first line)
    header_line: int         # the hunk's "@@" line

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
    last = start - 1 if length else start      # the line before the current position
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
        Example(SECOND_ELSEWHERE, kind="patch", filename="0002-log-lengths.patch",
                files={"0001-keep-ids.patch": FIRST}, title="the patches change distant lines"),
        Example(SECOND_OVERLAPPING, kind="patch", filename="0002-log-lengths.patch",
                files={"other/0001-keep-ids.patch": FIRST}, title="patches of different sets (folders)"),
        Example(SECOND_INSERT_AFTER, kind="patch", filename="0002-assert.patch",
                files={"0001-keep-ids.patch": FIRST}, options={"touching": False},
                title="an insertion next to the other change, touching = false"),
        Example(FIRST, kind="patch", title="a patch alone"),
    ]
    INVALID = [
        Example(SECOND_OVERLAPPING, kind="patch", filename="0002-log-lengths.patch",
                files={"0001-keep-ids.patch": FIRST}, line=10, contains="0001-keep-ids.patch",
                title="the later patch rewrites a line the earlier one added"),
        Example(SECOND_INSERT_AFTER, kind="patch", filename="0002-assert.patch",
                files={"0001-keep-ids.patch": FIRST}, line=6, contains="0001-keep-ids.patch",
                title="an insertion right after a line the earlier patch wrote"),
        Example(SECOND_OVERLAPPING, kind="patch", filename="a-log-lengths.patch",
                files={"b-keep-ids.patch": FIRST,
                       "series": "# quilt\nb-keep-ids.patch -p1\na-log-lengths.patch\n"},
                line=10, contains="b-keep-ids.patch",
                title="the quilt series file gives the order (not the file names)"),
    ]

    def check_patch_set(self, units) -> None:
        touching = bool(self.opts.get("touching", True))
        sets: dict[str, list] = defaultdict(list)
        for u in units:
            sets[getattr(u, "set_name", None) or os.path.dirname(u.path)].append(u)
        for members in sets.values():
            # post-image changes of the earlier patches, per target file
            seen: dict[str, list[tuple[object, Change]]] = defaultdict(list)
            for u in members:
                mine: dict[str, list[Change]] = defaultdict(list)
                posts: dict[str, list[Change]] = defaultdict(list)
                for section in u.patch.sections:
                    if section.is_binary or not section.hunks:
                        continue
                    for hunk in section.hunks:
                        mine[section.path].extend(_runs(hunk, "pre"))
                        posts[section.path].extend(_runs(hunk, "post"))
                for path, changes in mine.items():
                    self._compare(u, path, changes, seen.get(path, []), touching)
                for path, changes in posts.items():
                    seen[path].extend((u, c) for c in changes)

    def _compare(self, unit, path: str, changes: list[Change], earlier, touching: bool) -> None:
        reported: set[tuple[int, str]] = set()
        for b in changes:
            for other, a in earlier:
                key = (b.header_line, other.path)
                if key in reported or not _overlap(a, b, touching):
                    continue
                reported.add(key)
                self.report_in(
                    unit, b.patch_line, 0,
                    f"changes {b.lines()} of {path}, which {other.path} (applied earlier) also changes "
                    f"at its line {a.patch_line}: the two patches depend on their order; merge them or "
                    f"make them change separate lines",
                    related=[(other.path, a.patch_line, f"the earlier change of {path}")],
                )
