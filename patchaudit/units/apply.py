"""In-memory unified-diff hunk applier whose decisions agree with GNU ``patch`` 2.7.6.

Pure standard library, no I/O.  :func:`apply_hunks` takes the lines of one file
and the hunks of one file's diff and decides, hunk by hunk, what GNU ``patch``
(default options, i.e. ``-F2``, no ``-l``, no ``--merge``) would decide: where
the hunk goes, with which offset and fuzz, or that it fails.  The matching code
is a transcription of ``locate_hunk``/``patch_match``/``apply_hunk``/
``copy_till`` from patch 2.7.6 (``src/patch.c``), including its quirks, and is
checked against ``/usr/bin/patch`` by ``tests/test_apply_oracle.py``.

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


# locate_hunk scans positions one by one; over wider ranges than this it only
# visits positions where the first compared pattern line occurs (same order).
_INDEX_MIN_SPAN = 64


class _Misordered(Exception):
    pass


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
        self._line_index: Optional[dict[str, list[int]]] = None

    # -- input -------------------------------------------------------------
    def ifetch(self, line: int) -> str:
        if line < 1 or line > self.input_lines:
            return ""
        return self.inp[line - 1]

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
        key_text = side.texts[prefix_fuzz] if prefix_fuzz < pat_lines - suffix_fuzz else ""
        if key_text and max_offset - min_offset > _INDEX_MIN_SPAN:
            # Same visiting order as the loop below, but only at positions
            # where the first compared pattern line is present.
            visits = []
            for q in self._index().get(key_text, ()):
                pos = q - prefix_fuzz
                o = pos - first_guess
                if min_offset <= o <= min(max_offset, max_pos_offset):
                    visits.append((2 * (o - min_offset), o))
                o = first_guess - pos
                if min_offset <= o <= min(max_offset, max_neg_offset):
                    visits.append((2 * (o - min_offset) + 1, -o))
            for _, o in sorted(visits):
                if self.patch_match(side, first_guess, o, prefix_fuzz, suffix_fuzz):
                    return first_guess + o, in_offset + o
            return 0, in_offset
        for offset in range(min_offset, max_offset + 1):
            if offset <= max_pos_offset and self.patch_match(side, first_guess, offset, prefix_fuzz, suffix_fuzz):
                return first_guess + offset, in_offset + offset
            if offset <= max_neg_offset and self.patch_match(side, first_guess, -offset, prefix_fuzz, suffix_fuzz):
                return first_guess - offset, in_offset - offset
        return 0, in_offset

    def _index(self) -> dict[str, list[int]]:
        """input line text -> its line numbers (the input never changes)."""
        if self._line_index is None:
            idx: dict[str, list[int]] = {}
            for n, text in enumerate(self.inp, 1):
                idx.setdefault(text, []).append(n)
            self._line_index = idx
        return self._line_index

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

    def nearest(self, side: _Side, first_guess: int) -> Optional[tuple[int, int, int]]:
        texts = side.texts
        n = len(texts)
        if n == 0:
            return None
        best: Optional[tuple[int, int, int]] = None
        best_key: Optional[tuple[int, int, int]] = None
        padded = self.inp + [""] * n
        for pos in range(1, max(1, self.input_lines - n + 1) + 1):
            count = sum(map(str.__eq__, padded[pos - 1 : pos - 1 + n], texts))
            key = (-count, abs(pos - first_guess), pos)
            if best_key is None or key < best_key:
                best_key, best = key, (pos, count, n)
        if best is None or best[1] == 0:
            return None
        return best


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

    lines, ends = eng.finish()
    for in_line, org in pending_context:
        out_line = eng.out_line_of_input.get(in_line)
        if out_line is not None and out_line <= len(lines):
            origin.setdefault(out_line, org)
    # an added empty last line without a newline is no line at all (the file ends before it):
    # origin only names lines the result has
    return ApplyResult(lines=lines, ends_with_newline=ends, hunks=results,
                       origin={k: v for k, v in sorted(origin.items()) if k <= len(lines)})
