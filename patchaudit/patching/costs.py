"""The applier's search costs: how it keeps GNU's search order at near-linear cost,
and the tunables (read at run time as ``costs.NAME``: the tests change them)."""

from __future__ import annotations

import math
import random

# --------------------------------------------------------------------------
# Search cost (SECURITY.md, promise 7).  GNU's locate_hunk tries every position of
# the file, nearest first, and compares the pattern at each: O(file x hunk) per hunk
# and fuzz level, quadratic on a file of repeated lines.  Here exactly the same
# positions are tried in exactly the same order, but only where the pattern can match:
#
# * the file's lines are numbered once per apply_hunks call (text -> id, and all line
#   numbers sorted by id, so that the lines of one id are a sorted run);
# * a search anchors on the pattern's *rarest* line (of the lines compared at this
#   fuzz): only positions that put that line on one of its occurrences are
#   candidates.  If it does not occur, there is no candidate and the search ends at
#   once.  The forward candidates (upwards from the expected line) and the backward
#   ones (downwards) are two bisected runs of its occurrences, merged in GNU's order;
#   the first that matches wins, as in GNU.  The first costs.SLICE_CHECKS candidates are
#   compared line by line (usually the first one matches), later ones by a window
#   hash of the line ids (prefix hashes, built on first use; a hit is then compared
#   line by line, so the hash never decides anything);
# * when costs.SCAN_LIMIT candidates of one search have failed (a line repeated all over
#   the file, but never the whole pattern), a suffix array of the line ids is built,
#   once per file: prefix doubling sorted as deep as the longest hunk,
#   O(N log hunk).  From then on a search that fails costs.SCAN_LIMIT_WITH_SA candidates
#   asks it for the first occurrence of the whole pattern after (before) the next
#   candidate: a binary search for the pattern's rows, then a range-successor query
#   in a merge-sort tree over the rows (nodes sorted when first used, at most
#   N log N in all).
#
# So one search costs O(hunk + min(candidates, limit) + hunk x log N), and a file's
# searches O(N log hunk + N log N + patch x log N) in the worst case, O(N + patch)
# when each search's first candidates decide it.  Windows that stick out of the file
# (only "" matches the lines outside it: a pattern line without its newline) are
# checked one by one, at most one per such pattern line.
#
# The near-match of a failed hunk (HunkResult.nearest: most lines equal, anywhere) is
# counted from the occurrence runs, rarest lines first, stopping as soon as the lines
# left cannot change the answer; that reads few occurrences unless all the hunk's
# lines are frequent in the file.  A file gets costs.NEAREST_BUDGET_PER_LINE x (file +
# patch lines) + costs.NEAREST_BUDGET_MIN such reads; a hunk that would go over it
# (hostile input: thousands of failing hunks made of lines the file repeats
# everywhere) gets the best near-match among the lines within costs.NEAREST_WINDOW of its
# expected place and the costs.NEAREST_ANCHORS places its rarer lines point to: its line
# counts are true ones, but a better place further away is not looked for.
#
# Each step is counted in Matcher.work (see apply.work_done()); tests/test_security_apply.py
# bounds the count on hostile input and checks every decision against GNU's plain scan.

# over spans of positions narrower than this, locate_hunk scans them one by one
INDEX_MIN_SPAN = 64
SCAN_LIMIT = 64
SCAN_LIMIT_WITH_SA = 8
SLICE_CHECKS = 4  # candidates compared line by line before the file is hashed
NEAREST_BUDGET_PER_LINE = 4
NEAREST_BUDGET_MIN = 50_000
NEAREST_WINDOW = 4
NEAREST_ANCHORS = 8
NEAREST_SMALL = 256  # positions x pattern lines up to which the near-match is counted everywhere

MOD = (1 << 61) - 1
# any base works (a hash hit is always checked line by line), so results never depend on it;
# a random one keeps a hostile file from forcing collisions
BASE = random.SystemRandom().randrange(1 << 32, MOD - 1)
NEVER = math.inf  # a key larger than any search key
