"""In-memory unified-diff hunk applier whose decisions agree with GNU ``patch`` 2.7.6.

Pure standard library, no I/O.  :func:`apply_hunks` takes the lines of one file
and the hunks of one file's diff and decides, hunk by hunk, what GNU ``patch``
(default options, i.e. ``-F2``, no ``-l``, no ``--merge``) would decide: where
the hunk goes, with which offset and fuzz, or that it fails.  The matching code
is a transcription of ``locate_hunk``/``patch_match``/``apply_hunk``/
``copy_till`` from patch 2.7.6 (``src/patch.c``), including its quirks, and is
checked against ``/usr/bin/patch`` by ``tests/test_apply_oracle.py``.  GNU's search
tries every position of the file one by one; here the same positions are tried in the
same order through an index of the file's lines, so that hostile input (files of
repeated lines, thousands of failing hunks) costs near-linear time, not quadratic: see
"Search cost" below and ``tests/test_security_apply.py``.

How GNU patch decides (and so how this module decides)
------------------------------------------------------
* Each hunk has a *pre-image* (context and ``-`` lines) and a *post-image*
  (context and ``+`` lines).  ``pch_first`` is the ``-a`` of ``@@ -a,b``, plus
  one when ``b == 0`` ("append rather than insert"); the expected position is
  ``pch_first + in_offset`` where ``in_offset`` is the offset at which the
  previous hunk was found (it carries over: if hunk 1 was found 3 lines
  further down, hunk 2 is first looked for 3 lines further down too).
* Search order at one fuzz level: the expected line, then one line further
  down, one line up, two down, two up, ...  Positions must start after
  ``last_frozen_line``: the last input line that an earlier hunk consumed,
  which is the line of its last change, *not* its trailing context, so a hunk's
  leading context may re-use the previous hunk's trailing context.
* Fuzz: all positions are tried at fuzz 0, then all at fuzz 1, then at fuzz 2
  (never more than ``max(prefix context, suffix context)``).  At fuzz N,
  N context lines are ignored on the side (leading/trailing) that has more
  context, and N minus the difference on the other side.  When that is negative on the
  leading side and the hunk says it starts at line 1 or 0, the hunk can only
  match at the start of the file; when it is negative on the trailing side it
  can only match at the end of the file (wherever the hunk says it is).
* Lines are compared byte-exactly *including* the line terminator: a pattern
  line that is followed by ``\\ No newline at end of file`` only matches the
  last line of a file that lacks its final newline, and vice versa.  Context
  lines are never written from the patch: the file's own lines are kept, so
  with fuzz the file's version of a fuzzed-away context line survives.
* A hunk whose pre-image is empty (``@@ -a,0 ...``, e.g. ``@@ -0,0 +1,3 @@``
  or an insertion from a ``-U0`` diff) "matches" unconditionally at the
  expected position, even past the end of the file.
* Reported numbers: ``offset`` is the cumulative ``in_offset`` (so two hunks
  that both sit 3 lines lower both say "offset 3 lines"), and ``line``
  (GNU's "succeeded at N" / "FAILED at N") is in the coordinates of the
  *patched output* file: the match line plus the net number of lines added by
  the hunks applied before it.  For a failed hunk it is the line the hunk
  header says plus that output shift (not plus ``in_offset``).  The position
  in the original file is in :attr:`HunkResult.source_line`.
* Quirks transcribed on purpose: when the expected line lies before
  ``last_frozen_line + 1`` the first few positions ``locate_hunk`` tries may lie
  inside the already-consumed region; if one of them matches, ``apply_hunk``
  reports "misordered hunks" and the hunk FAILS (with the output partially
  written, as GNU writes it).  An empty pre-image whose expected line is
  before the consumed region fails the same way.
* GNU patch 2.7.6 *aborts* in two corners that this module handles instead:
  a hunk line that is empty *and* marked "\\ No newline at end of file"
  ("write error" from fwrite of 0 bytes; such a line cannot come from a real
  file), and a hunk listed after one that ended the output without a newline
  but placed before it (``assert (outstate->after_newline)``); here the
  latter is the "misordered" failure a build without assertions reports.
* Line endings: GNU patch never touches ``\\r`` in the file being patched;
  :func:`split_lines` keeps them too.  It *does* strip a trailing ``\\r`` from
  every line of the *patch* when the patch's header lines end in CRLF (unless
  ``--binary``), so by default a CRLF patch against a CRLF file FAILS
  ("different line endings") while a CRLF patch against an LF file applies.
  Whoever builds :class:`HunkSpec` from patch text has to apply that rule;
  this module compares whatever text it is given.

Where this module differs from GNU patch (deliberately)
-------------------------------------------------------
* "Already applied", per hunk.  GNU patch only tries the reversed hunk for the
  *first* hunk of a file (and only without ``-f``/``-R``): at each fuzz level
  it first tries the hunk forward over all positions, then reversed (post-image
  as the pattern, searched from ``+c`` + ``in_offset``); if the reversed hunk
  is found it says "Reversed (or previously applied) patch detected!" and then
  treats the whole file's patch as reversed (``-N``: skips it, ``-t``: applies
  it with ``-R``).  Later hunks are never checked.  Here every hunk gets that
  check, in the same interleaved order (forward fuzz 0, reversed fuzz 0,
  forward fuzz 1, reversed fuzz 1, ...); a hunk found reversed gets the status
  ``"already-applied"`` and leaves the file unchanged there, and the next hunk
  continues from where it was found.  A post-image found inside the region
  earlier hunks consumed (possible only through the quirk above) is ignored,
  so such a hunk ends the way GNU's forward-only search ends.
  ``applied_max_fuzz`` limits the fuzz of
  that reversed check (``0`` = only an exact post-image counts); the default
  ``None`` is what GNU does for the first hunk.  ``check_applied=False`` gives
  GNU's ``-f`` behaviour (no reversed check at all).  Note that, like GNU, a
  pure deletion from a ``-U0`` diff whose lines are not there is reported as
  already applied: its post-image is empty and so always "present"; and a
  pure insertion from a ``-U0`` diff is never reported as already applied:
  its empty pre-image always matches forward.
* Two offsets are kept: the forward one (GNU's ``in_offset``) and the one for
  looking up post-images (GNU's ``in_offset`` of a ``-R`` run).  After a hunk
  is found either way both are re-derived from the place where it was found,
  so for a file where all hunks apply forward the numbers are GNU's forward
  numbers, and for a file where all hunks are already applied the reported
  ``offset``/``fuzz``/``source_line`` are those of ``patch -R`` (whose
  "succeeded at" differs only because ``patch -R`` changes the file).
* File-level checks are out of scope: "patch attempted to create file X, which
  already exists" (a ``@@ -0,0`` hunk whose header names ``/dev/null`` or an
  epoch timestamp, applied at line 1 of a non-empty file), file renames,
  modes, ``Prereq:``, and the interactive questions.
* A hunk without any ``+``/``-`` line, or whose line counts disagree with its
  header, is malformed for GNU patch; here it raises :class:`ValueError`.
"""

from __future__ import annotations

import heapq
import math
import random
from array import array
from collections import Counter
from itertools import accumulate
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Literal, Optional

__all__ = [
    "HunkLine",
    "HunkSpec",
    "HunkResult",
    "ApplyResult",
    "apply_hunks",
    "split_lines",
]


@dataclass(frozen=True)
class HunkLine:
    kind: Literal[" ", "-", "+"]
    text: str  # the line WITHOUT its line terminator
    no_newline: bool = False  # followed by "\ No newline at end of file"


@dataclass(frozen=True)
class HunkSpec:
    source_start: int  # the "-a" of "@@ -a,b +c,d @@" (1-based; 0 for an empty source)
    source_length: int
    target_start: int
    target_length: int
    lines: tuple[HunkLine, ...]


@dataclass(frozen=True)
class HunkResult:
    index: int  # 0-based hunk number
    status: Literal["clean", "offset", "fuzz", "failed", "already-applied"]
    offset: int = 0  # as GNU patch reports it ("offset N lines")
    fuzz: int = 0
    # GNU patch's "succeeded at N" / "FAILED at N".  NB: GNU reports this in
    # the coordinates of the patched (output) file; see source_line.
    line: Optional[int] = None
    # failed only: (line in original, matching lines, total pre-image lines)
    # of the best near-match anywhere in the file: most pre-image lines equal,
    # ties broken by distance to the expected line; None if no line matches.
    # (Past a per-file work budget, i.e. on hostile input, only the lines near the
    # expected one and the places the hunk's rarer lines point to are looked at;
    # see "Search cost" below.)
    nearest: Optional[tuple[int, int, int]] = None
    # (extra) 1-based line of the ORIGINAL file where the pre-image (or, for
    # "already-applied", the post-image) was found; for a failed hunk the line
    # where it was expected (header line + carried offset), or where it
    # matched when that match was refused as "misordered".
    source_line: Optional[int] = None


@dataclass
class ApplyResult:
    lines: list[str]  # patched file lines, without terminators
    ends_with_newline: bool
    hunks: list[HunkResult]
    # patched-file line number (1-based) -> (hunk index, index into
    # HunkSpec.lines) for lines that come from a hunk's context or added
    # lines (for "already-applied" hunks: its post-image lines in the file).
    origin: dict[int, tuple[int, int]] = field(default_factory=dict)


def split_lines(text: str) -> tuple[list[str], bool]:
    """Split file text into lines without terminators, as GNU patch reads it.

    Only ``"\\n"`` ends a line; a ``"\\r"`` before it stays part of the line
    (GNU patch never strips CRs from the file it patches).  Returns
    ``(lines, ends_with_newline)``; an empty text is ``([], True)``.
    """
    if not text:
        return [], True
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
        return parts, True
    return parts, False


# --------------------------------------------------------------------------
# internals


@dataclass
class _Side:
    """One direction of a hunk, as GNU's pch.c holds it (pch_swap'ed or not)."""

    first: int  # pch_first()
    # pattern (pre-image): (char ' ' or '-', text incl. terminator, HunkSpec.lines index)
    pat: list[tuple[str, str, int]]
    # replacement (post-image): (char ' ' or '+', text incl. terminator, index)
    repl: list[tuple[str, str, int]]
    prefix_context: int
    suffix_context: int
    texts: list[str] = field(default_factory=list)  # pattern texts, for matching
    # (engine, the pattern's line ids, their counts in the file, prefix hashes): _Engine._pattern
    index: Optional[tuple] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.texts = [body for _, body, _ in self.pat]


def _compile(index: int, hunk: HunkSpec) -> tuple[_Side, _Side]:
    old: list[tuple[str, str, int]] = []
    new: list[tuple[str, str, int]] = []
    prefix = -1
    run = 0
    for i, ln in enumerate(hunk.lines):
        body = ln.text if ln.no_newline else ln.text + "\n"
        if ln.kind == " ":
            old.append((" ", body, i))
            new.append((" ", body, i))
            run += 1
        elif ln.kind == "-":
            old.append(("-", body, i))
        elif ln.kind == "+":
            new.append(("+", body, i))
        else:
            raise ValueError(f"hunk {index}: bad line kind {ln.kind!r}")
        if ln.kind != " ":
            if prefix == -1:
                prefix = run
            run = 0
    if prefix == -1:
        raise ValueError(f"hunk {index}: no added or removed line (malformed for GNU patch)")
    suffix = run
    if len(old) != hunk.source_length or len(new) != hunk.target_length:
        raise ValueError(
            f"hunk {index}: header says -{hunk.source_start},{hunk.source_length} "
            f"+{hunk.target_start},{hunk.target_length} but has {len(old)} old and "
            f"{len(new)} new lines"
        )
    first = hunk.source_start + (1 if not old else 0)
    newfirst = hunk.target_start + (1 if not new else 0)
    fwd = _Side(first, old, new, prefix, suffix)
    # pch_swap: the post-image becomes the pattern ('+' -> '-') and vice versa;
    # the context counts stay as they are.
    rev = _Side(
        newfirst,
        [("-" if c == "+" else c, b, i) for c, b, i in new],
        [("+" if c == "-" else c, b, i) for c, b, i in old],
        prefix,
        suffix,
    )
    return fwd, rev


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
#   the first that matches wins, as in GNU.  The first _SLICE_CHECKS candidates are
#   compared line by line (usually the first one matches), later ones by a window
#   hash of the line ids (prefix hashes, built on first use; a hit is then compared
#   line by line, so the hash never decides anything);
# * when _SCAN_LIMIT candidates of one search have failed (a line repeated all over
#   the file, but never the whole pattern), a suffix array of the line ids is built,
#   once per file: prefix doubling sorted as deep as the longest hunk,
#   O(N log hunk).  From then on a search that fails _SCAN_LIMIT_WITH_SA candidates
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
# lines are frequent in the file.  A file gets _NEAREST_BUDGET_PER_LINE x (file +
# patch lines) + _NEAREST_BUDGET_MIN such reads; a hunk that would go over it
# (hostile input: thousands of failing hunks made of lines the file repeats
# everywhere) gets the best near-match among the lines within _NEAREST_WINDOW of its
# expected place and the _NEAREST_ANCHORS places its rarer lines point to: its line
# counts are true ones, but a better place further away is not looked for.
#
# Each step is counted in _Engine.work (see work_done()); tests/test_security_apply.py
# bounds the count on hostile input and checks every decision against GNU's plain scan.

# over spans of positions narrower than this, locate_hunk scans them one by one
_INDEX_MIN_SPAN = 64
_SCAN_LIMIT = 64
_SCAN_LIMIT_WITH_SA = 8
_SLICE_CHECKS = 4  # candidates compared line by line before the file is hashed
_NEAREST_BUDGET_PER_LINE = 4
_NEAREST_BUDGET_MIN = 50_000
_NEAREST_WINDOW = 4
_NEAREST_ANCHORS = 8
_NEAREST_SMALL = 256  # positions x pattern lines up to which the near-match is counted everywhere

_MOD = (1 << 61) - 1
# any base works (a hash hit is always checked line by line), so results never depend on it;
# a random one keeps a hostile file from forcing collisions
_BASE = random.SystemRandom().randrange(1 << 32, _MOD - 1)
_NEVER = math.inf  # a key larger than any search key


class _Misordered(Exception):
    pass


# Work counter, for tests (tests/test_security_apply.py): the units of work all apply_hunks
# calls of this process have done: lines compared, candidate positions tried, index and
# suffix-array entries built, occurrences read.
_work_total = 0


def work_done() -> int:
    """Units of work done by :func:`apply_hunks` so far in this process (never decreases)."""
    return _work_total


class _Suffixes:
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


class _Engine:
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
        self._sa: Optional[_Suffixes] = None
        self._sa_rows: dict[tuple[int, ...], tuple[int, int]] = {}
        self.max_pattern = 1  # the longest hunk of the apply_hunks call: how deep to sort suffixes
        self.nearest_budget = _NEAREST_BUDGET_PER_LINE * len(inp) + _NEAREST_BUDGET_MIN

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
            base, mod = _BASE, _MOD
            self._hash = list(accumulate(self._ids, lambda h, i: (h * base + i + 1) % mod, initial=0))
            self.work += len(self._ids)
        pw = self._pow
        while len(pw) <= m:
            pw.append(pw[-1] * _BASE % _MOD)
        return self._hash

    def _pattern(self, side: _Side) -> tuple[list[int], list[int]]:
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

    def _pattern_hash(self, side: _Side, i0: int, i1: int) -> int:
        """Hash of the pattern's ids i0:i1 (as _hashes hashes the file's)."""
        assert side.index is not None and side.index[0] is self
        phash = side.index[3]
        if phash is None:
            base, mod = _BASE, _MOD
            phash = list(accumulate(side.index[1], lambda h, i: (h * base + i + 1) % mod, initial=0))
            side.index = side.index[:3] + (phash,)
            self.work += len(phash)
        self._hashes(i1 - i0)
        return (phash[i1] - phash[i0] * self._pow[i1 - i0]) % _MOD

    def _window_hash(self, x: int, m: int) -> int:
        """Hash of file lines x .. x + m - 1."""
        h = self._hashes(m)
        return (h[x - 1 + m] - h[x - 1] * self._pow[m]) % _MOD

    # -- output ------------------------------------------------------------
    def _write(self, s: str) -> int:
        """Write raw text; return the output line number it lands on."""
        line_no = self.nl_count + 1
        if s:
            self.chunks.append(s)
            self.nl_count += s.count("\n")
        return line_no

    def _put_newline(self) -> None:
        self._write("\n")

    def copy_till(self, lastline: int) -> None:
        lfl = self.last_frozen_line
        if lfl > lastline:
            raise _Misordered
        while lfl < lastline:
            lfl += 1
            s = self.ifetch(lfl)
            if s:
                if not self.after_newline:
                    self._put_newline()
                self.out_line_of_input[lfl] = self._write(s)
                self.after_newline = s.endswith("\n")
        self.last_frozen_line = lfl

    # -- matching ----------------------------------------------------------
    def patch_match(self, side: _Side, base: int, offset: int, prefix_fuzz: int, suffix_fuzz: int) -> bool:
        texts = side.texts
        pline = 1 + prefix_fuzz
        pat_lines = len(texts) - suffix_fuzz
        iline = base + offset + prefix_fuzz
        if pline > pat_lines:
            return True
        self.work += pat_lines - pline + 1
        last = iline + pat_lines - pline
        if iline >= 1 and last <= self.input_lines:  # fast path: all lines exist
            return self.inp[iline - 1 : last] == texts[pline - 1 : pat_lines]
        while pline <= pat_lines:
            if self.ifetch(iline) != texts[pline - 1]:
                return False
            pline += 1
            iline += 1
        return True

    def locate_hunk(self, side: _Side, fuzz: int, in_offset: int) -> tuple[int, int]:
        """patch.c locate_hunk(); returns (where, new in_offset), where 0 = not found."""
        first_guess = side.first + in_offset
        pat_lines = len(side.pat)
        prefix_context = side.prefix_context
        suffix_context = side.suffix_context
        context = max(prefix_context, suffix_context)
        prefix_fuzz = fuzz + prefix_context - context
        suffix_fuzz = fuzz + suffix_context - context
        max_where = self.input_lines - (pat_lines - suffix_fuzz) + 1
        min_where = self.last_frozen_line + 1
        max_pos_offset = max_where - first_guess
        max_neg_offset = first_guess - min_where
        max_offset = max(max_pos_offset, max_neg_offset)

        if not pat_lines:  # null range matches always
            return first_guess, in_offset

        # Do not try lines <= 0.
        if first_guess <= max_neg_offset:
            max_neg_offset = first_guess - 1

        if prefix_fuzz < 0 and side.first <= 1:
            # Can only match start of file.
            if suffix_fuzz < 0:
                # Can only match entire file.
                if pat_lines != self.input_lines or prefix_context < self.last_frozen_line:
                    return 0, in_offset
            offset = 1 - first_guess
            if (
                self.last_frozen_line <= prefix_context
                and offset <= max_pos_offset
                and self.patch_match(side, first_guess, offset, 0, suffix_fuzz)
            ):
                return first_guess + offset, in_offset + offset
            return 0, in_offset
        elif prefix_fuzz < 0:
            prefix_fuzz = 0

        if suffix_fuzz < 0:
            # Can only match end of file.
            offset = first_guess - (self.input_lines - pat_lines + 1)
            if offset <= max_neg_offset and self.patch_match(side, first_guess, -offset, prefix_fuzz, 0):
                return first_guess - offset, in_offset - offset
            return 0, in_offset

        if max_pos_offset < 0:
            min_offset = first_guess - max_where
        elif max_neg_offset < 0:
            min_offset = first_guess - min_where
        else:
            min_offset = 0
        if max_offset - min_offset > _INDEX_MIN_SPAN:
            # The positions GNU tries, in its order: for offset = min_offset .. max_offset,
            # first_guess + offset (while offset <= max_pos_offset), then first_guess - offset
            # (while offset <= max_neg_offset); the first that matches wins.
            where = self._search(
                side, first_guess, prefix_fuzz, pat_lines - suffix_fuzz, min_offset,
                min(max_offset, max_pos_offset), min(max_offset, max_neg_offset),
            )
            if where is None:
                return 0, in_offset
            return where, in_offset + where - first_guess
        for offset in range(min_offset, max_offset + 1):
            if offset <= max_pos_offset and self.patch_match(side, first_guess, offset, prefix_fuzz, suffix_fuzz):
                return first_guess + offset, in_offset + offset
            if offset <= max_neg_offset and self.patch_match(side, first_guess, -offset, prefix_fuzz, suffix_fuzz):
                return first_guess - offset, in_offset - offset
        return 0, in_offset

    def _search(self, side: _Side, fg: int, a: int, b: int, min_offset: int, fmax: int, bmax: int) -> Optional[int]:
        """The first position, in GNU's order, where texts[a:b] matches (text a at the
        position + a): forward positions fg + o for o in [min_offset, fmax] (key
        2 (o - min_offset)), backward positions fg - o for o in [min_offset, bmax] (key
        2 (o - min_offset) + 1).  Lines outside the file read as "" (GNU's ifetch)."""
        has_f = min_offset <= fmax
        has_b = min_offset <= bmax
        flo, fhi = fg + min_offset, fg + fmax  # forward positions, visited upwards
        blo, bhi = fg - bmax, fg - min_offset  # backward positions, visited downwards
        m = b - a
        if m <= 0:  # nothing to compare: the first position matches
            return flo if has_f else (bhi if has_b else None)
        n_lines = self.input_lines
        texts = side.texts
        self.work += 1

        def key(pos: int) -> int:
            best = _NEVER
            if has_f and flo <= pos <= fhi:
                best = 2 * (pos - fg - min_offset)
            if has_b and blo <= pos <= bhi:
                best = min(best, 2 * (fg - pos - min_offset) + 1)
            return best

        lead = 0  # leading and trailing "" texts: they match the lines outside the file
        while lead < m and texts[a + lead] == "":
            lead += 1
        if lead == m:
            # Only "" to match: every window that has no line of the file but "" (only the
            # last line can be "", when it lacks its newline) matches: pos <= 1 - b, or
            # pos >= bad + 1 - a where lines 1..bad are not "".
            bad = n_lines - 1 if n_lines and self.inp[-1] == "" else n_lines
            if bad == 0:
                return flo if has_f else (bhi if has_b else None)
            low, high = 1 - b, bad + 1 - a
            found = []
            if has_f:
                if flo <= low:
                    found.append(flo)
                elif max(flo, high) <= fhi:
                    found.append(max(flo, high))
            if has_b:
                if bhi >= high:
                    found.append(bhi)
                elif min(bhi, low) >= blo:
                    found.append(min(bhi, low))
            return min(found, key=key) if found else None
        trail = 0
        while texts[b - 1 - trail] == "":
            trail += 1

        ids, counts = self._pattern(side)
        best_key, best_pos = _NEVER, None
        # windows that stick out of the file: only their "" texts may lie outside
        for pos in list(range(1 - a - lead, 1 - a)) + list(range(n_lines - b + 2, n_lines - b + 2 + trail)):
            k = key(pos)
            if k < best_key and self._match_outside(side, pos, a, b, lead, trail):
                best_key, best_pos = k, pos
        if m > n_lines:
            return best_pos
        # windows inside the file: anchored on the pattern's rarest line
        anchor = a
        for i in range(a, b):
            if counts[i] < counts[anchor]:
                anchor = i
        self.work += m
        if counts[anchor] == 0:  # a line the file lacks: no window inside the file matches
            return best_pos
        lo_in, hi_in = 1 - a, n_lines - b + 1  # positions whose window is inside the file
        f_lo, f_hi = max(flo, lo_in), min(fhi, hi_in)
        b_lo, b_hi = max(blo, lo_in), min(bhi, hi_in)
        if not has_f:
            f_lo, f_hi = 1, 0
        if not has_b:
            b_lo, b_hi = 1, 0
        order = self._order
        occ_lo, occ_hi = self._occ(ids[anchor])
        shift = anchor  # candidate position = anchor line - shift
        fi = bisect_left(order, f_lo + shift, occ_lo, occ_hi)
        f_end = bisect_right(order, f_hi + shift, occ_lo, occ_hi)
        bi = bisect_right(order, b_hi + shift, occ_lo, occ_hi) - 1
        b_end = bisect_left(order, b_lo + shift, occ_lo, occ_hi) - 1
        self.work += 4
        inp, pat = self.inp, texts[a:b]
        want: Optional[int] = None  # the pattern's hash, once candidates are checked by hash
        limit = _SCAN_LIMIT if self._sa is None else _SCAN_LIMIT_WITH_SA
        tried = 0
        while True:
            kf = 2 * (order[fi] - shift - fg - min_offset) if fi < f_end else _NEVER
            kb = 2 * (fg - order[bi] + shift - min_offset) + 1 if bi > b_end else _NEVER
            if min(kf, kb) >= best_key:
                break
            if tried >= limit:
                # every occurrence of the rarest line so far was a miss: ask the suffix array
                # for the first whole-pattern occurrence in each direction
                f_from = order[fi] - shift if fi < f_end else None
                b_from = order[bi] - shift if bi > b_end else None
                for pos in self._sa_search(ids[a:b], a, f_from, f_hi, b_lo, b_from):
                    k = key(pos)
                    if k < best_key:
                        best_key, best_pos = k, pos
                break
            tried += 1
            if kf < kb:
                pos = order[fi] - shift
                fi += 1
                k = kf
            else:
                pos = order[bi] - shift
                bi -= 1
                k = kb
            x = pos + a  # the window's first line
            if tried <= _SLICE_CHECKS:
                # the first candidates (usually the first one matches) line by line
                self.work += m
                if inp[x - 1 : x - 1 + m] == pat:
                    best_key, best_pos = k, pos
                    break
                continue
            if want is None:
                want = self._pattern_hash(side, a, b)
            self.work += 1
            if self._window_hash(x, m) == want:
                self.work += m
                if inp[x - 1 : x - 1 + m] == pat:
                    best_key, best_pos = k, pos
                    break
        self.work += tried
        return best_pos

    def _match_outside(self, side: _Side, pos: int, a: int, b: int, lead: int, trail: int) -> bool:
        """Does texts[a:b] match at pos, a window that sticks out of the file?"""
        n_lines = self.input_lines
        below = max(0, 1 - (pos + a))  # pattern lines before line 1
        above = max(0, pos + b - 1 - n_lines)  # pattern lines after the last line
        if below > lead or above > trail or below + above >= b - a:
            return False  # (a window wholly outside needs only "", handled by the caller)
        i0, i1 = a + below, b - above  # pattern lines inside the file
        x, m = pos + i0, i1 - i0  # ... at file lines x .. x + m - 1
        self.work += 1
        if self._window_hash(x, m) != self._pattern_hash(side, i0, i1):
            return False
        self.work += m
        return self.inp[x - 1 : x - 1 + m] == side.texts[i0:i1]

    def _sa_search(self, pat: list[int], a: int, f_from: Optional[int], f_hi: int, b_lo: int,
                   b_from: Optional[int]) -> list[int]:
        """Positions of the first whole-pattern occurrences (window inside the file) in
        [f_from, f_hi] (the lowest) and in [b_lo, b_from] (the highest)."""
        sa = self._sa
        before = sa.work if sa is not None else 0
        if sa is None or sa.depth < len(pat):
            assert self._ids is not None
            before = 0
            # sorted deep enough for every pattern of this call (a longer one re-sorts deeper)
            sa = self._sa = _Suffixes(self._ids, max(len(pat), self.max_pattern, 2 * (sa.depth if sa else 0)))
            self._sa_rows.clear()
        key = tuple(pat)
        self.work += len(pat)
        rows = self._sa_rows.get(key)
        if rows is None:
            rows = self._sa_rows[key] = sa.interval(pat)
        lo, hi = rows
        out = []
        if lo < hi:
            # a window whose first line is x starts at index x - 1 of the sequence; pos = x - a
            if f_from is not None and f_from <= f_hi:
                s = sa.first_at_or_after(lo, hi, f_from + a - 1)
                if s is not None and s + 1 - a <= f_hi:
                    out.append(s + 1 - a)
            if b_from is not None and b_lo <= b_from:
                s = sa.last_at_or_before(lo, hi, b_from + a - 1)
                if s is not None and s + 1 - a >= b_lo:
                    out.append(s + 1 - a)
        self.work += sa.work - before
        return out

    # -- applying ----------------------------------------------------------
    def apply_hunk(self, side: _Side, where: int, hunk_index: int, origin: dict[int, tuple[int, int]], emit: bool) -> None:
        """patch.c apply_hunk().  emit=False: the hunk is already applied (side
        is the swapped hunk); walk it to advance last_frozen_line like
        ``patch -R`` would, but keep the file's lines.  Raises _Misordered."""
        pat, repl = side.pat, side.repl
        old = 1
        lastline = len(pat)
        new = 1
        pat_end = len(repl)
        where -= 1
        while old <= lastline:
            if pat[old - 1][0] == "-":
                self.copy_till(where + old - 1)
                if emit:
                    self.last_frozen_line += 1  # skip the removed line
                else:
                    # the "removed" line is the file's own post-image line: keep it
                    self.copy_till(self.last_frozen_line + 1)
                old += 1
            elif new > pat_end:
                break
            elif repl[new - 1][0] == "+":
                self.copy_till(where + old - 1)
                if emit:
                    self._write_patch_line(repl[new - 1], hunk_index, origin)
                new += 1
            else:  # both context
                old += 1
                new += 1
        if new <= pat_end and repl[new - 1][0] == "+":
            self.copy_till(where + old - 1)
            while new <= pat_end and repl[new - 1][0] == "+":
                if emit:
                    if not self.after_newline:
                        self._put_newline()
                    self._write_patch_line(repl[new - 1], hunk_index, origin)
                new += 1
        if emit:
            self.out_offset += len(repl) - len(pat)

    def _write_patch_line(self, item: tuple[str, str, int], hunk_index: int, origin: dict[int, tuple[int, int]]) -> None:
        _, body, idx = item
        line_no = self._write(body)
        self.after_newline = bool(body) and body.endswith("\n")
        origin.setdefault(line_no, (hunk_index, idx))

    def finish(self) -> tuple[list[str], bool]:
        if self.last_frozen_line < self.input_lines:
            self.copy_till(self.input_lines)
        return split_lines("".join(self.chunks))

    # -- near-match of a failed hunk ----------------------------------------
    def nearest(self, side: _Side, first_guess: int) -> Optional[tuple[int, int, int]]:
        """The position (1 .. max(1, lines - n + 1)) where most pattern lines equal the
        file's, ties broken by distance to first_guess, then by position; lines past the
        end read as "".  (pos, count, n), or None if no line matches anywhere."""
        texts = side.texts
        n = len(texts)
        if n == 0:
            return None
        n_lines = self.input_lines
        last = max(1, n_lines - n + 1)
        if n_lines < n or last * n <= _NEAREST_SMALL:  # a small file: try every position
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

    def _finish_counts(self, texts: list[str], counts: dict[int, int],
                       rest: list[tuple[int, list[int]]]) -> dict[int, int]:
        """counts plus the pattern lines of the groups `rest` that match at each position."""
        inp = self.inp
        js = [j for _, group in rest for j in group]
        return {p: c + sum(1 for j in js if inp[p - 1 + j] == texts[j]) for p, c in counts.items()}

    @staticmethod
    def _best(counts: dict[int, int], first_guess: int, n: int) -> tuple[int, int, int]:
        pos = min(counts, key=lambda p: (-counts[p], abs(p - first_guess), p))
        return pos, counts[pos], n

    def _nearest_of(self, side: _Side, positions, first_guess: int) -> Optional[tuple[int, int, int]]:
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

    def _nearest_fallback(self, side: _Side, counts: dict[int, int], first_guess: int):
        """Over budget: the best of the positions around first_guess and of those where
        the most of the rarer lines counted so far match."""
        last = max(1, self.input_lines - len(side.texts) + 1)
        around = range(max(1, first_guess - _NEAREST_WINDOW), min(last, first_guess + _NEAREST_WINDOW) + 1)
        rare = heapq.nsmallest(_NEAREST_ANCHORS, counts, key=lambda p: (-counts[p], abs(p - first_guess), p))
        self.work += len(counts)
        return self._nearest_of(side, sorted(set(around) | set(rare)), first_guess)


def apply_hunks(
    original: list[str],
    hunks: list[HunkSpec],
    *,
    ends_with_newline: bool = True,
    max_fuzz: int = 2,
    check_applied: bool = True,
    applied_max_fuzz: Optional[int] = None,
) -> ApplyResult:
    """Apply the hunks of one file's unified diff to ``original`` like GNU patch.

    ``original`` holds the file's lines without terminators; ``ends_with_newline``
    says whether its last line has one.  ``max_fuzz`` is patch's ``-F``.
    Failed hunks leave the file as it was there and later hunks still try to
    apply.  ``check_applied``/``applied_max_fuzz``: see the module docstring
    (per-hunk "Reversed (or previously applied)" detection).
    """
    eng = _Engine(original, ends_with_newline)
    eng.nearest_budget += _NEAREST_BUDGET_PER_LINE * sum(len(h.lines) for h in hunks)
    eng.max_pattern = max((len(h.lines) for h in hunks), default=1)
    origin: dict[int, tuple[int, int]] = {}
    pending_context: list[tuple[int, tuple[int, int]]] = []  # (input line, origin)
    results: list[HunkResult] = []
    in_offset = 0  # GNU's in_offset (forward)
    rev_offset = 0  # GNU's in_offset as a -R run would have it

    for k, hunk in enumerate(hunks):
        fwd, rev = _compile(k, hunk)
        context = max(fwd.prefix_context, fwd.suffix_context)
        mymaxfuzz = min(max_fuzz, context)
        rev_limit = mymaxfuzz if applied_max_fuzz is None else min(mymaxfuzz, applied_max_fuzz)

        where = 0
        side = fwd
        fuzz = 0
        while True:
            where, in_offset = eng.locate_hunk(fwd, fuzz, in_offset)
            if where:
                side = fwd
                break
            if check_applied and fuzz <= rev_limit:
                rwhere, roff = eng.locate_hunk(rev, fuzz, rev_offset)
                # A post-image found inside the region earlier hunks consumed
                # (locate_hunk's quirk, see above) would be "misordered": not
                # evidence of anything, so keep searching forward as GNU does
                # for every hunk but the first.
                if rwhere and eng.last_frozen_line <= rwhere + rev.prefix_context - 1:
                    where, rev_offset, side = rwhere, roff, rev
                    break
            fuzz += 1
            if fuzz > mymaxfuzz:
                break

        if not where:
            first_guess = fwd.first + in_offset
            results.append(
                HunkResult(
                    k,
                    "failed",
                    line=fwd.first + eng.out_offset,
                    nearest=eng.nearest(fwd, first_guess),
                    source_line=first_guess,
                )
            )
            continue

        newwhere = where + eng.out_offset
        try:
            eng.apply_hunk(side, where, k, origin, emit=side is fwd)
        except _Misordered:
            results.append(
                HunkResult(
                    k,
                    "failed",
                    line=newwhere,
                    nearest=eng.nearest(fwd, fwd.first + in_offset),
                    source_line=where,
                )
            )
            continue

        for p, (c, _body, idx) in enumerate(side.pat):
            if c == " " or side is rev:
                pending_context.append((where + p, (k, idx)))

        if side is fwd:
            rev_offset = where + len(fwd.pat) - rev.first - len(rev.pat)
            status = "fuzz" if fuzz else ("offset" if in_offset else "clean")
            results.append(HunkResult(k, status, offset=in_offset, fuzz=fuzz, line=newwhere, source_line=where))
        else:
            in_offset = where + len(rev.pat) - fwd.first - len(fwd.pat)
            results.append(
                HunkResult(k, "already-applied", offset=rev_offset, fuzz=fuzz, line=newwhere, source_line=where)
            )

    global _work_total
    _work_total += eng.work
    lines, ends = eng.finish()
    for in_line, org in pending_context:
        out_line = eng.out_line_of_input.get(in_line)
        if out_line is not None and out_line <= len(lines):
            origin.setdefault(out_line, org)
    # an added empty last line without a newline is no line at all (the file ends before it):
    # origin only names lines the result has
    return ApplyResult(lines=lines, ends_with_newline=ends, hunks=results,
                       origin={k: v for k, v in sorted(origin.items()) if k <= len(lines)})
