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
"Search cost" in ``patching/costs.py`` and ``tests/test_security_apply.py``.

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

from dataclasses import dataclass, field
from typing import Literal, Optional

from patchaudit.inputs.hunkspec import HunkLine, HunkSpec
from patchaudit.patching import costs
from patchaudit.patching.matcher import Matcher
from patchaudit.patching.sides import Misordered, Side, compile_hunk, split_lines

__all__ = [
    "HunkLine",
    "HunkSpec",
    "HunkResult",
    "ApplyResult",
    "apply_hunks",
    "split_lines",
]


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
    # see "Search cost" in patching/costs.py.)
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


# Work counter, for tests (tests/test_security_apply.py): the units of work all apply_hunks
# calls of this process have done: lines compared, candidate positions tried, index and
# suffix-array entries built, occurrences read.
_work_total = 0


def work_done() -> int:
    """Units of work done by :func:`apply_hunks` so far in this process (never decreases)."""
    return _work_total


def _locate(
    eng: Matcher, fwd: Side, rev: Side, mymaxfuzz: int, rev_limit: Optional[int], in_offset: int, rev_offset: int
) -> tuple[int, Side, int, int, int]:
    """Where the hunk goes: forward at fuzz 0, reversed (the post-image: already applied)
    at fuzz 0 unless `rev_limit` is None or below, forward at fuzz 1, ...; returns
    (where (0: nowhere), the side found, its fuzz, in_offset, rev_offset)."""
    where = 0
    side = fwd
    fuzz = 0
    while True:
        where, in_offset = eng.locate_hunk(fwd, fuzz, in_offset)
        if where:
            side = fwd
            break
        if rev_limit is not None and fuzz <= rev_limit:
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
    return where, side, fuzz, in_offset, rev_offset


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
    eng = Matcher(original, ends_with_newline)
    eng.nearest_budget += costs.NEAREST_BUDGET_PER_LINE * sum(len(h.lines) for h in hunks)
    eng.max_pattern = max((len(h.lines) for h in hunks), default=1)
    origin: dict[int, tuple[int, int]] = {}
    pending_context: list[tuple[int, tuple[int, int]]] = []  # (input line, origin)
    results: list[HunkResult] = []
    in_offset = 0  # GNU's in_offset (forward)
    rev_offset = 0  # GNU's in_offset as a -R run would have it

    for k, hunk in enumerate(hunks):
        fwd, rev = compile_hunk(k, hunk)
        context = max(fwd.prefix_context, fwd.suffix_context)
        mymaxfuzz = min(max_fuzz, context)
        rev_limit: Optional[int] = None  # None: no reversed check (GNU's -f)
        if check_applied:
            rev_limit = mymaxfuzz if applied_max_fuzz is None else min(mymaxfuzz, applied_max_fuzz)
        where, side, fuzz, in_offset, rev_offset = _locate(eng, fwd, rev, mymaxfuzz, rev_limit, in_offset, rev_offset)

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
        except Misordered:
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
            status: Literal["fuzz", "offset", "clean"] = "fuzz" if fuzz else ("offset" if in_offset else "clean")
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
    return ApplyResult(
        lines=lines,
        ends_with_newline=ends,
        hunks=results,
        origin={k: v for k, v in sorted(origin.items()) if k <= len(lines)},
    )
