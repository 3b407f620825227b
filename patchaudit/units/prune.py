"""Statement pruning: parse only the statements a local rule can report on.

libcst parses about ten times slower than the stdlib `ast`, and its batched
traversal costs about as much again.  A *local* rule (`Rule.local`) reports
only on nodes inside statements whose source holds one of its needles (the
strings of its `requires`), and judges them from that statement and the
headers of the classes and functions around it.  So before libcst sees a
unit, `prune` finds those statements with `ast` and blanks every other line:

- a top-level statement (decorators included) whose lines hold no needle is
  replaced by empty lines;
- a `class`/`def`/`async def` that holds a needle in its body, and whose body
  starts on a line of its own, keeps its header lines (decorators, the
  `class`/`def` line(s), comments before the body) and, recursively, only the
  body statements that hold a needle;
- any other statement that holds a needle (if/for/while/with/try/match, a
  simple statement, a definition whose header holds the needle or whose body
  shares the header's line) is kept whole;
- statements on one logical line (`a = 1; call()`, or joined by a backslash)
  are kept or pruned together.

Every kept line is copied verbatim and every pruned line keeps its own line
ending, so the pruned text has the same number of lines and every kept node
has exactly the (line, column) it has in the full text.  Lines outside any
kept statement (comments, blank lines, pruned code) become empty.

`prune` returns None, meaning "parse the whole text", when `ast` cannot parse
the text, when no statement holds a needle, when the pruned text would not
parse again (a safety net, never hit by the tests' generated programs), or
when pruning would remove less than `MIN_SAVING` of the text.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from typing import Iterable, cast

from patchaudit.inputs import pyast

#: the runner prunes only while this is True (tests switch it off to compare findings)
ENABLED = True
#: prune only when at least this share of the text's characters goes
MIN_SAVING = 0.25

#: a physical line as Python's tokenizer counts them: "\r\n", "\r" and "\n" end
#: a line (str.splitlines would also split on form feeds and other separators)
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")

_DEFS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def split_lines(text: str) -> list[str]:
    """`text`'s physical lines, each with its own line ending ("" lines never)."""
    return _LINE.findall(text)


class _Pruner:
    def __init__(self, lines: list[str], needle_lines: list[int]):
        self.lines = lines
        self.needles = needle_lines  # sorted line numbers (1-based) holding a needle
        self.keep = bytearray(len(lines) + 2)  # keep[i]: line i is copied

    # ----- line facts ---------------------------------------------------------
    def holds(self, lo: int, hi: int) -> bool:
        """A needle on a line in [lo, hi]?"""
        k = bisect_right(self.needles, hi)
        return k > 0 and self.needles[k - 1] >= lo

    def _line_bytes(self, line: int) -> bytes:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return text.encode("utf-8", "surrogatepass")  # ast columns are UTF-8 byte offsets

    def joined_to_next(self, stmt: ast.stmt) -> bool:
        """Whether the statement after `stmt` may be on its logical line: something
        other than a comment follows `stmt` on its last line (a `;`, a backslash)."""
        tail = self._line_bytes(cast(int, stmt.end_lineno))[stmt.end_col_offset :]
        hash_at = tail.find(b"#")
        if hash_at >= 0:
            tail = tail[:hash_at]
        return bool(tail.strip(b" \t\f\r\n"))

    def starts_own_line(self, stmt: ast.stmt) -> bool:
        """Only whitespace before `stmt` on its first line (its decorators' `@` for a
        decorated definition, which always starts a line)."""
        if getattr(stmt, "decorator_list", None):
            return True
        head = self._line_bytes(stmt.lineno)[: stmt.col_offset]
        return not head.strip(b" \t\f")

    # ----- the walk -----------------------------------------------------------
    @staticmethod
    def span(stmt: ast.stmt) -> tuple[int, int]:
        lo = stmt.lineno
        for d in getattr(stmt, "decorator_list", ()):
            lo = min(lo, d.lineno)
        return lo, cast(int, stmt.end_lineno)  # set on every parsed statement

    def groups(self, stmts: list[ast.stmt]) -> Iterable[tuple[list[ast.stmt], int, int]]:
        """Siblings grouped by logical line: (statements, first line, last line)."""
        group: list[ast.stmt] = []
        lo = hi = 0
        for s in stmts:
            s_lo, s_hi = self.span(s)
            if group and (s_lo <= hi or self.joined_to_next(group[-1])):
                group.append(s)
                hi = max(hi, s_hi)
                continue
            if group:
                yield group, lo, hi
            group, lo, hi = [s], s_lo, s_hi
        if group:
            yield group, lo, hi

    def mark(self, lo: int, hi: int) -> None:
        self.keep[lo : hi + 1] = b"\x01" * (hi - lo + 1)

    def block(self, stmts: list[ast.stmt]) -> bool:
        """Mark what to keep of a block; False when nothing of it holds a needle."""
        kept = False
        for group, lo, hi in self.groups(stmts):
            if not self.holds(lo, hi):
                continue
            kept = True
            if len(group) == 1 and isinstance(group[0], _DEFS) and self.definition(group[0], lo):
                continue
            self.mark(lo, hi)
        return kept

    def definition(self, node, lo: int) -> bool:
        """Keep a class/def's header and only the body statements holding a needle;
        False (keep it whole) when its header holds the needle, its body shares the
        header's line, or no body statement holds the needle (a comment does)."""
        first = node.body[0]
        body_lo = self.span(first)[0]
        if body_lo <= lo or not self.starts_own_line(first):
            return False
        if self.holds(lo, body_lo - 1):
            return False
        if not self.block(node.body):  # marks nothing when it returns False
            return False
        self.mark(lo, body_lo - 1)
        return True


def needle_lines(text: str, lines: list[str], needles: Iterable[str]) -> list[int]:
    """The sorted 1-based numbers of the lines on which a needle occurs."""
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    found: set[int] = set()
    for needle in needles:
        at = text.find(needle)
        while at >= 0:
            first = bisect_right(starts, at)
            last = bisect_right(starts, at + len(needle) - 1)
            found.update(range(first, last + 1))
            at = text.find(needle, at + 1)
    return sorted(found)


def prune(text: str, needles: Iterable[str], tree: ast.Module | None = None) -> str | None:
    """`text` with the lines of every statement that cannot matter emptied, or None.

    The statements that matter are those whose lines hold one of `needles` (see
    the module docstring).  The result has as many lines as `text`, each kept
    line as it was and each pruned line reduced to its own line ending, so the
    kept nodes have the positions they have in `text`.  None means: parse the
    whole text (ast cannot parse it, nothing holds a needle, or pruning would
    save less than `MIN_SAVING`).  `tree`, when the caller has `ast.parse`d
    `text` already, saves that parse."""
    needles = [n for n in set(needles) if n]
    if not needles or not text:
        return None
    lines = split_lines(text)
    at = needle_lines(text, lines, needles)
    if not at:
        return None
    if tree is None:
        tree = pyast.parse(text)
    if tree is None:
        return None
    pruner = _Pruner(lines, at)
    try:
        if not pruner.block(tree.body):
            return None
    except RecursionError:
        return None
    return emptied(text, lines, pruner.keep, 1 - MIN_SAVING)


def emptied(text: str, lines: list[str], keep, max_share: float) -> str | None:
    """`text` with every line `keep` (indexed from 1) does not keep reduced to its own line
    ending, so that every kept node has its position in `text` (pruning here, exact mode's
    slices in units/slicing.py); None when more than `max_share` of the characters would be
    kept (nothing to gain), or when the result does not parse (a safety net: never hand
    libcst a text this cut broke)."""
    kept_chars = 0
    out: list[str] = []
    for i, line in enumerate(lines, 1):
        if keep[i]:
            out.append(line)
            kept_chars += len(line)
        else:
            out.append(line[len(line.rstrip("\r\n")) :])
    if kept_chars > max_share * len(text):
        return None
    cut = "".join(out)
    if pyast.parse(cut) is None:  # kept: exact mode's pre-filters ask about the slice next
        return None
    return cut
