"""How deeply Python source nests, estimated before libcst parses it.

libcst parses with a recursive native parser and walks trees with recursive
Python visitors.  Source nested deeply enough (about 1,300 brackets, or a few
thousand `+`/`.`/call links in one chain) overflows the native stack and kills
the whole process with SIGSEGV, which no `except` can catch; a few hundred
levels already exhaust Python's recursion limit in the visitors.  So every
Python text is scanned here first, in one linear pass, and refused with a clear
message when its estimated depth passes `Settings.max_nesting`.

The estimate is an upper bound on the syntax-tree depth libcst builds, counted
as libcst nests:

* each open bracket counts one, and stays counted until it closes;
* each link of an expression chain counts one until the next `,`/`;` or the
  end of the statement at that bracket level: binary and unary operators,
  `.`, calls and subscripts, `not`/`and`/`or`/`if`/`else`/`lambda`/`await`,
  adjacent string literals (libcst nests implicit concatenation);
* each indented block counts one, and each `elif` of a chain counts one
  (libcst nests `elif` in the previous `if`'s `orelse`);
* inside f-strings (PEP 701 rules, as libcst 1.9 reads them: a replacement
  field may hold strings with the same quote, and more f-strings), every
  bracket and operator of a field counts.

String contents and comments are skipped, so a `(` in a docstring counts
nothing; nothing is skipped that libcst could read as code.  The scan never
recurses except into nested f-strings, and each of those adds to the estimate,
so it stops after at most `limit` levels.
"""

from __future__ import annotations

import re

# a string literal's body after its opening quote, per quote kind (prefix letters
# b/r/u do not change where it ends: a backslash escapes the quote even in raw strings)
_BODY = {
    "'''": re.compile(r"(?:[^'\\]|\\(?:\r\n|[\s\S])|'(?!''))*(?:'''|\Z)"),
    '"""': re.compile(r'(?:[^"\\]|\\(?:\r\n|[\s\S])|"(?!""))*(?:"""|\Z)'),
    "'": re.compile(r"(?:[^'\\\r\n]|\\(?:\r\n|[\s\S]))*'?"),
    '"': re.compile(r'(?:[^"\\\r\n]|\\(?:\r\n|[\s\S]))*"?'),
}

_TOKEN = re.compile(
    r"""
    (?P<fstr>(?<![\w])(?:[fFtT][rR]?|[rR][fFtT])(?P<fq>'''|\"\"\"|'|"))
  | (?P<str>(?:(?<![\w])[rRbBuU]{1,2})?(?P<q>'''|\"\"\"|'|"))
  | (?P<com>\#[^\r\n]*)
  | (?P<cont>\\(?:\r\n|\r|\n))
  | (?P<nl>(?:\r\n|\r|\n)(?P<ws>[ \t\f]*))
  | (?P<open>[(\[{])
  | (?P<close>[)\]}])
  | (?P<sep>[,;])
  | (?P<op>[-+*/%@&|^~<>.]|\b(?:not|and|or|if|else|lambda|await)\b)
    """,
    re.X,
)
# (an identifier: ASCII letters and `_`, or any character past ASCII; written with a
# negated class, which compiles in microseconds where the range takes milliseconds)
_WORD = re.compile(r"(?:[A-Za-z_]|[^\x00-\x7f])(?:\w|[^\x00-\x7f])*")
_CHAIN_WORDS = frozenset({"not", "and", "or", "if", "else", "lambda", "await"})
_FPREFIX = re.compile(r"(?<![\w])(?:[fFtT][rR]?|[rR][fFtT])\Z")
_SPREFIX = re.compile(r"(?<![\w])(?:[rRbBuU]{1,2})\Z")
_ELIF = re.compile(r"elif\b")
_OPCHARS = frozenset("-+*/%@&|^~<>.")


class TooDeep(Exception):
    """Raised inside the scan; carries the text offset and the estimate."""

    def __init__(self, pos: int, depth: int):
        super().__init__(pos, depth)
        self.pos = pos
        self.depth = depth


def too_deep(text: str, limit: int) -> tuple[int, int] | None:
    """(line, depth) where the estimated nesting first passes `limit`, or None."""
    try:
        _scan(text, limit)
    except TooDeep as exc:
        return text.count("\n", 0, exc.pos) + 1, exc.depth
    return None


def _scan(text: str, limit: int) -> None:
    n = len(text)
    stack = [0]  # chain links per open bracket level (level 0: the statement)
    total = 0  # sum(stack)
    indents = [0]  # indentation widths of the open blocks
    elifs = [0]  # elif links per block level
    block = 0  # extra depth of blocks and elif chains of the current statement
    pos = 0
    search = _TOKEN.search

    def check(at: int, extra: int = 0) -> None:
        depth = block + len(stack) - 1 + total + extra
        if depth > limit:
            raise TooDeep(at, depth)

    def statement_start(at: int, ws: str) -> None:
        nonlocal block
        width = len(ws.expandtabs(8))
        while len(indents) > 1 and indents[-1] > width:
            indents.pop()
            elifs.pop()
        if width > indents[-1]:
            indents.append(width)
            elifs.append(0)
        if _ELIF.match(text, at):
            elifs[-1] += 1
        elif not text.startswith("else", at):
            elifs[-1] = 0
        block = len(indents) - 1 + sum(elifs)
        check(at)

    # the first line may be indented too (a fragment)
    m0 = re.match(r"[ \t\f]*", text)
    if m0 and m0.end() < n and text[m0.end()] not in "\r\n#":
        statement_start(m0.end(), m0.group())
    while True:
        m = search(text, pos)
        if m is None:
            return
        kind = m.lastgroup
        pos = m.end()
        if kind == "op" or kind == "open":
            stack[-1] += 1
            total += 1
            if kind == "open":
                stack.append(0)
            check(m.start())
        elif kind == "close":
            if len(stack) > 1:
                total -= stack.pop()
        elif kind == "sep":
            total -= stack[-1]
            stack[-1] = 0
        elif kind == "nl":
            if len(stack) == 1:
                total -= stack[0]
                stack[0] = 0
                nxt = text[pos : pos + 1]
                if nxt and nxt not in "\r\n#":
                    statement_start(pos, m.group("ws"))
        elif kind == "str":
            body = _BODY[m.group("q")].match(text, pos)
            pos = body.end() if body else n
            stack[-1] += 1
            total += 1
            check(m.start())
        elif kind == "fstr":
            stack[-1] += 1
            total += 1
            check(m.start())
            base = block + len(stack) - 1 + total
            pos = _fstring(text, pos, m.group("fq"), base, limit)
        # com, cont: nothing to count


def _fstring(text: str, i: int, quote: str, base: int, limit: int) -> int:
    """Skip an f-string body starting after its opening quote; returns the end offset.

    Raises TooDeep when a replacement field nests past `limit` (counted from
    `base`, the depth of the f-string itself)."""
    n = len(text)
    single = len(quote) == 1
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
        elif text.startswith(quote, i):
            return i + len(quote)
        elif single and c in "\r\n":
            return i  # unterminated: libcst reports it
        elif c == "{":
            if text.startswith("{{", i):
                i += 2
            else:
                i = _field(text, i + 1, base + 1, limit)
        else:
            i += 1
    return n


def _field(text: str, i: int, depth: int, limit: int) -> int:
    """Skip a replacement field after its `{`; returns the offset after its `}`."""
    n = len(text)
    brackets = 0
    if depth > limit:
        raise TooDeep(i, depth)
    while i < n:
        c = text[i]
        if c in "([{":
            brackets += 1
            depth += 1
        elif c in ")]}":
            if brackets == 0:
                return i + 1 if c == "}" else i
            brackets -= 1
        elif c in "'\"":
            q = text[i : i + 3] if text.startswith(c * 3, i) else c
            if _FPREFIX.search(text, max(0, i - 2), i):
                i = _fstring(text, i + len(q), q, depth + 1, limit)
            else:
                body = _BODY[q].match(text, i + len(q))
                i = body.end() if body else n
            depth += 1
            if depth > limit:
                raise TooDeep(i, depth)
            continue
        elif c == "#":
            while i < n and text[i] not in "\r\n":
                i += 1
            continue
        elif c == ":" and brackets == 0 and not text.startswith(":=", i):
            return _spec(text, i + 1, depth, limit)
        elif c in _OPCHARS:
            depth += 1
        elif c.isalpha() or c == "_":
            w = _WORD.match(text, i)
            if w is None:
                i += 1
                continue
            if w.group() in _CHAIN_WORDS:
                depth += 1
            i = w.end()
            if depth > limit:
                raise TooDeep(i, depth)
            continue
        if depth > limit:
            raise TooDeep(i, depth)
        i += 1
    return n


def _spec(text: str, i: int, depth: int, limit: int) -> int:
    """Skip a format spec (after the field's `:`); returns the offset after the field's `}`."""
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
        elif c == "{":
            i = _field(text, i + 1, depth + 1, limit)
        elif c == "}":
            return i + 1
        elif c in "\r\n" or c in "'\"":
            # a quote or a line end cannot be in a spec: the string ends there
            return i
        else:
            i += 1
    return n
