"""In-memory ``git apply``: where each hunk of one file goes, as git 2.x decides it.

Pure standard library, no I/O; the counterpart of :mod:`patchaudit.patching.apply`
(GNU ``patch``) for builds that run ``git apply`` or ``git am``.  The decisions are
those of git's ``apply.c`` (``apply_one_fragment``/``find_pos``/``match_fragment``/
``update_image``), checked against ``git apply`` by ``tests/test_build_appliers.py``:

* The hunks of a file are applied one after the other to the *image*, the file as the
  hunks before have left it.  A hunk is first looked for at the line its ``+c`` says
  (``newpos - 1``, in the image's coordinates: no offset carries over from the hunk
  before), then one line down, one up, two down, two up, ... over the whole image.
* No fuzz: the pre-image (context and ``-`` lines) must be found byte for byte.  Only
  ``-C n`` makes git drop context lines (the side with more first, both when equal)
  until ``n`` are left; by default git keeps them all.
* A hunk whose ``-a`` is 0 or 1 must match at the start of the file, one without
  trailing context at its end (``--unidiff-zero`` turns both off, as it does for the
  hunks of a ``-U0`` diff).  With ``-C n`` those anchors are dropped before context is.
* Lines a hunk wrote (its whole post-image) are never matched again: a later hunk whose
  pre-image overlaps them fails.
* A pre-image line followed by "\\ No newline at end of file" is compared without its
  newline as git's ``memcmp`` compares it: it matches the file's line with or without
  one (with only whitespace after it, as git's hash ignores whitespace).
* A hunk that is not found fails, and git applies the patch whole or not at all: one
  failed hunk and nothing of the patch is written (the caller decides what follows).

Every failed hunk is also looked for reversed (its post-image, exactly, by the same
search): found, it is ``"already-applied"`` (git itself does not look: it fails).
Whitespace options (``--whitespace=fix``, ``--ignore-whitespace``), ``--allow-overlap``,
``--inaccurate-eof`` and binary hunks are not modelled.
"""

from __future__ import annotations

from typing import Optional

from patchaudit.inputs.hunkspec import HunkSpec
from patchaudit.patching.apply import ApplyResult, HunkResult
from patchaudit.patching.matcher import Matcher
from patchaudit.patching.sides import compile_hunk

__all__ = ["git_apply_hunks"]

_WS = " \t\n\r\v\f"


class _Image:
    """The file as git holds it while applying: each line's text (with its terminator),
    whether a hunk wrote it (LINE_PATCHED), its original line number (None: written by
    a hunk) and, for a line a hunk wrote, (hunk index, index into HunkSpec.lines)."""

    def __init__(self, original: list[str], ends_with_newline: bool) -> None:
        texts = [s + "\n" for s in original]
        if texts and not ends_with_newline:
            texts[-1] = texts[-1][:-1]
        self.texts = texts
        self.patched = [False] * len(texts)
        self.source: list[Optional[int]] = list(range(1, len(texts) + 1))
        self.origin: list[Optional[tuple[int, int]]] = [None] * len(texts)

    def matches(self, pat: list[str], at: int, match_end: bool) -> bool:
        n, m = len(self.texts), len(pat)
        if at + m > n or (match_end and at + m != n):
            return False
        texts, patched = self.texts, self.patched
        for i in range(m):
            line, want = texts[at + i], pat[i]
            if patched[at + i]:
                return False
            if line == want:
                continue
            # git compares the pre-image's bytes: a last line without its newline is a
            # prefix of the file's line, and the rest only whitespace (hash_line skips it)
            if i == m - 1 and not want.endswith("\n") and line.startswith(want):
                if not line[len(want) :].strip(_WS):
                    continue
            return False
        return True

    def find(self, pat: list[str], line: int, match_beginning: bool, match_end: bool) -> int:
        """git's find_pos: the first position, from `line` (0-based) then +1, -1, +2, ...,
        where `pat` matches; -1 when none does."""
        n, m = len(self.texts), len(pat)
        if match_beginning:
            line = 0
        elif match_end:
            line = n - m
        if line > n or line < 0:
            line = n  # git's unsigned comparison: a negative line is past the end too
        if match_beginning:
            return 0 if self.matches(pat, 0, match_end) else -1
        if not m:
            return line if (not match_end or line == n) else -1
        if match_end:
            return n - m if n - m >= 0 and self.matches(pat, n - m, True) else -1
        # forward distance d is tried before backward d, backward d before forward d + 1
        forward = self._scan(pat, line, n - m)
        lowest = 0 if forward is None else line - (forward - line) + 1
        backward = self._scan_back(pat, min(line - 1, n - m), max(lowest, 0))
        if backward is not None:
            return backward
        return forward if forward is not None else -1

    def _scan(self, pat: list[str], start: int, last: int) -> Optional[int]:
        """The lowest position in [start, last] where `pat` matches."""
        texts, first = self.texts, pat[0]
        exact = first.endswith("\n")  # else a one-line pattern compared as a prefix
        at = start
        while at <= last:
            if exact:
                try:
                    at = texts.index(first, at, last + 1)
                except ValueError:
                    return None
            if self.matches(pat, at, False):
                return at
            at += 1
        return None

    def _scan_back(self, pat: list[str], start: int, lowest: int) -> Optional[int]:
        """The highest position in [lowest, start] where `pat` matches."""
        texts, first = self.texts, pat[0]
        exact = first.endswith("\n")
        for at in range(start, lowest - 1, -1):
            if (not exact or texts[at] == first) and self.matches(pat, at, False):
                return at
        return None

    def replace(self, at: int, pre_len: int, post: list[tuple[str, int]], hunk: int) -> None:
        """update_image: the pre-image at `at` becomes the post-image (LINE_PATCHED)."""
        k = len(post)
        self.texts[at : at + pre_len] = [t for t, _ in post]
        self.patched[at : at + pre_len] = [True] * k
        self.source[at : at + pre_len] = [None] * k
        self.origin[at : at + pre_len] = [(hunk, idx) for _, idx in post]


def _images(hunk: HunkSpec) -> tuple[list[str], list[tuple[str, int]], list[tuple[str, int]], int, int]:
    """(pre-image texts, post-image (text, line index), reversed pre-image, leading, trailing)."""
    pre: list[str] = []
    post: list[tuple[str, int]] = []
    rev_post: list[tuple[str, int]] = []
    kinds = [ln.kind for ln in hunk.lines]
    changed = [i for i, k in enumerate(kinds) if k != " "]
    leading = changed[0] if changed else len(kinds)
    trailing = len(kinds) - 1 - changed[-1] if changed else 0
    for i, ln in enumerate(hunk.lines):
        body = ln.text if ln.no_newline else ln.text + "\n"
        if ln.kind != "+":
            pre.append(body)
            rev_post.append((body, i))
        if ln.kind != "-":
            post.append((body, i))
    return pre, post, rev_post, leading, trailing


def git_apply_hunks(
    original: list[str],
    hunks: list[HunkSpec],
    *,
    ends_with_newline: bool = True,
    unidiff_zero: bool = False,
    context: Optional[int] = None,
) -> ApplyResult:
    """Apply the hunks of one file's diff to ``original`` as ``git apply`` would.

    ``context`` is ``-C n`` (None: git's default, all context must match);
    ``unidiff_zero`` is ``--unidiff-zero``.  Failed hunks leave the image as it was and
    the next hunks are still tried (so every failure is reported, as ``--reject`` would
    report them); ``ApplyResult.lines`` is then not what git writes (it writes nothing)."""
    img = _Image(original, ends_with_newline)
    near: Optional[Matcher] = None
    results: list[HunkResult] = []
    for k, hunk in enumerate(hunks):
        pre, post, rev_post, leading, trailing = _images(hunk)
        pos = hunk.target_start - 1 if hunk.target_start else 0
        match_beginning = not hunk.source_start or (hunk.source_start == 1 and not unidiff_zero)
        match_end = not unidiff_zero and not trailing
        limit = context
        while True:
            at = img.find(pre, pos, match_beginning, match_end)
            if at >= 0:
                break
            if limit is None or (leading <= limit and trailing <= limit):
                break
            if match_beginning or match_end:
                match_beginning = match_end = False
                continue
            if leading >= trailing:
                pre, post = pre[1:], post[1:]
                pos -= 1
                leading -= 1
            if trailing > leading:
                pre, post = pre[:-1], post[:-1]
                trailing -= 1
        if at >= 0:
            src = img.source[at] if at < len(img.source) else None
            if src is None:  # an empty pre-image: the original line it sits before
                src = _source_before(img, at)
            fuzz = max(hunk_leading(hunk) - leading, hunk_trailing(hunk) - trailing)
            status = "fuzz" if fuzz else ("offset" if at != pos else "clean")
            results.append(HunkResult(k, status, offset=at - pos, fuzz=fuzz, line=at + 1, source_line=src))  # type: ignore[arg-type]
            img.replace(at, len(pre), post, k)
            continue
        # not found: is its post-image already there (exactly)?
        rev_pre = [t for t, _ in post]
        rpos = hunk.source_start - 1 if hunk.source_start else 0
        r_begin = not hunk.target_start or (hunk.target_start == 1 and not unidiff_zero)
        r_at = img.find(rev_pre, rpos, r_begin, not unidiff_zero and not hunk_trailing(hunk)) if rev_pre else -1
        if r_at >= 0:
            src = img.source[r_at] if r_at < len(img.source) else None
            results.append(
                HunkResult(k, "already-applied", offset=r_at - rpos, line=r_at + 1, source_line=src or r_at + 1)
            )
            for i, (_, idx) in enumerate(post):
                if img.origin[r_at + i] is None:
                    img.origin[r_at + i] = (k, idx)
            continue
        if near is None:
            near = Matcher(original, ends_with_newline)
        fwd, _ = compile_hunk(k, hunk)
        guess = _source_before(img, min(max(pos, 0), len(img.texts)))
        results.append(HunkResult(k, "failed", line=pos + 1, nearest=near.nearest(fwd, guess), source_line=guess))
    lines = [t[:-1] if t.endswith("\n") else t for t in img.texts]
    ends = not img.texts or img.texts[-1].endswith("\n")
    origin = {i + 1: o for i, o in enumerate(img.origin) if o is not None}
    return ApplyResult(lines, ends, results, origin)


def hunk_leading(hunk: HunkSpec) -> int:
    """Context lines before the hunk's first change."""
    for i, ln in enumerate(hunk.lines):
        if ln.kind != " ":
            return i
    return len(hunk.lines)


def hunk_trailing(hunk: HunkSpec) -> int:
    """Context lines after the hunk's last change."""
    for i, ln in enumerate(reversed(hunk.lines)):
        if ln.kind != " ":
            return i
    return 0


def _source_before(img: _Image, at: int) -> int:
    """The original line number at image position `at` (0-based), or of the nearest
    original line after it (past the end: one past the last line)."""
    for i in range(at, len(img.source)):
        src = img.source[i]
        if src is not None:
            return src
    last = next((s for s in reversed(img.source) if s is not None), 0)
    return last + 1
