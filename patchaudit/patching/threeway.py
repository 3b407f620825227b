"""The 3-way merge of ``git apply --3way``, on lines, as ``git merge-file`` decides it.

``git apply --3way`` (git 2.32 and later) first applies the patch to the blob its
``index`` line names (the *base*: the file the patch was made from), then merges that
result (*theirs*) into the file in the tree (*ours*), with the base as the common
ancestor; only when the repository lacks the blob does it fall back to a direct
application.  The merge here is git's (xdiff's ``xdl_merge`` at its default level):

* the changes of each side are its diff from the base (ours: `difflib`'s opcodes, with
  no junk heuristic; theirs: the hunks' own runs of ``-``/``+`` lines, where they were
  applied to the base);
* two changes of different sides conflict when their base ranges overlap *or touch*
  (no unchanged line between them), unless both sides made the same change there;
* a conflict is a change of the patch the build cannot make: ``git apply --3way``
  leaves conflict markers in the file and exits 1.

Checked against ``git merge-file`` / ``git apply --3way`` by tests/test_build_appliers.py.
Pure standard library, no I/O.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Optional

#: (base start, base end, lines replacing base[start:end] as (text, origin or None), side,
#: hunk index (-1 for ours))
Change = tuple[int, int, list[tuple[str, Optional[tuple[int, int]]]], int, int]
OURS, THEIRS = 0, 1


@dataclass
class MergeResult:
    lines: list[str]
    #: hunk indexes whose changes conflict with the file's own changes
    conflicting: set[int] = field(default_factory=set)
    #: merged line (1-based) -> (hunk index, index into HunkSpec.lines) for the patch's lines
    origin: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not self.conflicting


def _opcodes(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
    """The changes from `a` to `b` as (a start, a end, b start, b end), a pure insertion or
    deletion slid down as far as the lines allow (as xdiff's compaction slides it), so
    that the two sides' diffs place ambiguous changes alike."""
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    ops = [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]
    out: list[tuple[int, int, int, int]] = []
    for n, (i1, i2, j1, j2) in enumerate(ops):
        next_i = ops[n + 1][0] if n + 1 < len(ops) else len(a)
        next_j = ops[n + 1][2] if n + 1 < len(ops) else len(b)
        if i1 == i2:  # insertion of b[j1:j2]
            while i1 < next_i and j2 < next_j and b[j1] == a[i1] == b[j2]:
                i1, i2, j1, j2 = i1 + 1, i2 + 1, j1 + 1, j2 + 1
        elif j1 == j2:  # deletion of a[i1:i2]
            while i2 < next_i and j1 < next_j and a[i1] == a[i2] == b[j1]:
                i1, i2, j1, j2 = i1 + 1, i2 + 1, j1 + 1, j2 + 1
        out.append((i1, i2, j1, j2))
    return out


def changes(
    base: list[str],
    other: list[str],
    side: int,
    origin: dict[int, tuple[int, int]] | None = None,
    ranges: list[tuple[int, int]] | None = None,
) -> list[Change]:
    """A side's changes to the base.  For the patch's side (`origin`: line of `other` ->
    (hunk, line index); `ranges`: each hunk's base range, 0-based half-open) each change
    is attributed to the hunk whose range holds it (-1: none)."""
    out: list[Change] = []
    for i1, i2, j1, j2 in _opcodes(base, other):
        repl = [(other[j], origin.get(j + 1) if origin else None) for j in range(j1, j2)]
        hunk = -1
        for k, (lo, hi) in enumerate(ranges or ()):
            if lo <= i1 and i2 <= hi or (lo < i2 and i1 < hi):
                hunk = k
                break
        out.append((i1, i2, repl, side, hunk))
    return out


def _version(base: list[str], lo: int, hi: int, changes: list[Change]) -> list[tuple[str, Optional[tuple[int, int]]]]:
    """base[lo:hi] with `changes` (of one side, inside it, in order) made."""
    out: list[tuple[str, Optional[tuple[int, int]]]] = []
    cur = lo
    for s, e, repl, _, _ in changes:
        out.extend((t, None) for t in base[cur:s])
        out.extend(repl)
        cur = e
    out.extend((t, None) for t in base[cur:hi])
    return out


def merge(base: list[str], ours: list[str], changes_theirs: list[Change]) -> MergeResult:
    """Merge the patch's changes (`changes(base, theirs, THEIRS, ...)`) into `ours`, `base`
    their ancestor."""
    changes_all = sorted(changes(base, ours, OURS) + changes_theirs, key=lambda c: (c[0], c[1], c[3]))
    result = MergeResult([])
    merged: list[tuple[str, Optional[tuple[int, int]]]] = []
    cur = 0
    i = 0
    while i < len(changes_all):
        group = [changes_all[i]]
        lo, hi = changes_all[i][0], changes_all[i][1]
        i += 1
        # a change starting inside the group joins it; one that touches its end joins it
        # when it is of another side than a change of the group (git: adjacent changes conflict)
        while i < len(changes_all) and (
            changes_all[i][0] < hi or (changes_all[i][0] == hi and any(c[3] != changes_all[i][3] for c in group))
        ):
            group.append(changes_all[i])
            hi = max(hi, changes_all[i][1])
            i += 1
        merged.extend((t, None) for t in base[cur:lo])
        mine = [c for c in group if c[3] == OURS]
        theirs = [c for c in group if c[3] == THEIRS]
        if not mine:
            merged.extend(_version(base, lo, hi, theirs))
        elif not theirs:
            merged.extend(_version(base, lo, hi, mine))
        else:
            v_ours, v_theirs = _version(base, lo, hi, mine), _version(base, lo, hi, theirs)
            if [t for t, _ in v_ours] == [t for t, _ in v_theirs]:
                merged.extend(v_theirs)  # the same change on both sides: no conflict
            else:
                result.conflicting.update(c[4] for c in theirs)
                merged.extend(v_ours)
        cur = hi
    merged.extend((t, None) for t in base[cur:])
    result.lines = [t for t, _ in merged]
    result.origin = {n: o for n, (_, o) in enumerate(merged, 1) if o is not None}
    return result
