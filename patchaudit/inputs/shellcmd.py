"""Shell text as the commands a build runs: segments, structure, words.

This reads the part of POSIX shell that build scripts and Dockerfile `RUN` lines use to
patch an engine; it runs nothing.  `parse_script(text, first_line)` returns a list of
statements:

- `Simple(text, line)`: one command (`git apply --3way x.patch`, `cd dir`, `X=1`), its text
  still unexpanded (variables are expanded when the recipe interpreter reaches it:
  patchaudit/inputs/recipes.py) and the line it starts on;
- `Loop(var, items, body, line)`: `for VAR in WORDS; do ...; done`;
- `Branch(arms, line)`: `if`/`elif`/`else`; every arm is kept (a recipe reader cannot
  know which one runs; the interpreter walks them in order, as a build that takes each
  would).

Commands are split at newlines and at `&&`, `||`, `;`, `|` outside quotes and outside
`$(...)`/backticks; a backslash-newline continues a line; `#` starts a comment at the
start of a word; here-document bodies (`<<EOF ... EOF`, `<<-'PY'`) are skipped.  Words
are split with the standard library's `shlex` (POSIX mode): `words(text)`, for a command of
at most `MAX_COMMAND` characters (shlex grows a word one character at a time, in time quadratic
in the word's length: a recipe's longer command is not read, patchaudit/inputs/recipes.py).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_OPENERS = ("then", "do", "else", "!", "{", "(")
_LEADER = re.compile(r"(then|do|else|!|\{)(\s+|$)")
_NONSPACE = re.compile(r"\S")
#: the longest command `words` splits (a longer one is None, as an unclosed quote is)
MAX_COMMAND = 64 * 1024


@dataclass
class Simple:
    text: str
    line: int


@dataclass
class Loop:
    var: str
    items: str  # the words after `in`, unexpanded
    line: int
    body: list = field(default_factory=list)


@dataclass
class Branch:
    line: int
    arms: list[list] = field(default_factory=list)
    conditions: list = field(default_factory=list)  # the `if`/`elif` commands, in order


def words(text: str) -> list[str] | None:
    """The words of one command (quotes removed), or None when shlex cannot split it
    (an unclosed quote) or it is longer than `MAX_COMMAND` characters."""
    if len(text) > MAX_COMMAND:
        return None
    try:
        lex = shlex.shlex(text, posix=True, punctuation_chars="<>")
        lex.whitespace_split = True
        lex.commenters = ""
        return list(lex)
    except ValueError:
        return None


def segments(text: str, first_line: int = 1) -> list[tuple[str, int]]:
    """The commands of `text`, each with the line it starts on (`first_line` is the line of
    the text's first character in its file)."""
    return _Scanner(text, first_line).run()


class _Scanner:
    """One pass over a shell text, splitting it into commands (see `segments`)."""

    def __init__(self, text: str, first_line: int) -> None:
        self.text = text
        self.out: list[tuple[str, int]] = []
        self.buf: list[str] = []
        self.where: list[int] = []  # the line of each piece of `buf`
        self.start = self.line = first_line
        self.quote = ""
        self.depth = 0  # $( ... ) and backticks
        self.ticks = 0  # backticks in `buf` (counted as they come: a count of `buf` is quadratic)

    def put(self, piece: str) -> None:
        self.ticks += piece == "`"
        self.buf.append(piece)
        self.where.append(self.line)

    def flush(self) -> None:
        lines_of = [w for piece, w in zip(self.buf, self.where) for _ in piece]
        text = "".join(self.buf)
        k = 0
        while True:  # `then`/`do`/`else` lead the command after them: its line is its own
            while k < len(text) and text[k].isspace():
                k += 1
            m = _LEADER.match(text, k)
            if not m or _NONSPACE.search(text, m.end(1)) is None:
                break
            self.out.append((m.group(1), lines_of[k]))
            k = m.end()
        seg = text[k:].strip()
        if seg:
            self.out.append((seg, lines_of[k] if k < len(lines_of) else self.start))
        self.buf.clear()
        self.where.clear()
        self.ticks = 0
        self.start = self.line

    def run(self) -> list[tuple[str, int]]:
        n = len(self.text)
        i = 0
        while i < n:
            i = self.step(i)
        self.flush()
        return self.out

    def step(self, i: int) -> int:
        """Consume the text at `i`; the index after it."""
        text = self.text
        c = text[i]
        if self.quote == "'" or (self.quote == '"' and c != "\\"):
            self.put(c)
            if c == self.quote:
                self.quote = ""
            elif c == "\n":
                self.line += 1
            return i + 1
        if c == "\\" and i + 1 < len(text):
            if text[i + 1] == "\n":
                self.line += 1
                self.put(" ")
            else:
                self.put(text[i : i + 2])
            return i + 2
        if c in "'\"":
            self.quote = c
        elif text.startswith("$(", i):
            self.depth += 1
            self.put("$(")
            return i + 2
        elif c == "`":
            self.depth = self.depth - 1 if self.depth and self.ticks % 2 else self.depth + 1
        elif self.depth:
            if c == ")":
                self.depth -= 1
            elif c == "\n":
                self.line += 1
        elif c == "#" and (not self.buf or self.buf[-1][-1:] in (" ", "\t", ";", "&", "|")):
            end = text.find("\n", i)
            return len(text) if end < 0 else end
        elif c == "\n":
            return self.newline(i)
        elif c in ";|&" and not (c == "&" and text[i + 1 : i + 2] == ">"):  # `&>` redirects
            self.flush()
            return i + 2 if text[i : i + 2] in ("&&", "||", ";;") else i + 1
        self.put(c)
        return i + 1

    def newline(self, i: int) -> int:
        seg_text = "".join(self.buf)
        docs = [(m.group(2), seg_text[m.start() : m.start() + 3] == "<<-") for m in _HEREDOC.finditer(seg_text)]
        self.flush()
        self.line += 1
        i += 1
        if docs:
            i, self.line = _skip_heredocs(self.text, i, self.line, docs)
        self.start = self.line
        return i


def _skip_heredocs(text: str, i: int, line: int, docs: list[tuple[str, bool]]) -> tuple[int, int]:
    """Skip the bodies of here-documents begun on the line before `i`."""
    n = len(text)
    for word, dash in docs:
        while i < n:
            end = text.find("\n", i)
            end = n if end < 0 else end
            body = text[i:end]
            i = end + 1
            line += 1
            if (body.lstrip("\t") if dash else body) == word:
                break
    return i, line


def _head(seg: str) -> tuple[str, str]:
    """The first word of a segment (a keyword?) and the rest."""
    parts = seg.split(None, 1)
    return (parts[0], parts[1] if len(parts) > 1 else "") if parts else ("", "")


def parse_script(text: str, first_line: int = 1) -> list:
    """The statements of a shell text (see the module docstring)."""
    root: list = []
    stack: list = [root]  # lists to append to; Loop / Branch objects interleaved
    owners: list = []
    for seg, line in segments(text, first_line):
        seg = seg.strip()
        while True:
            head, rest = _head(seg)
            if head in _OPENERS:
                if head == "else" and owners and isinstance(owners[-1], Branch):
                    owners[-1].arms.append([])
                    stack[-1] = owners[-1].arms[-1]
                seg = rest.strip()
                continue
            break
        if not seg:
            continue
        head, rest = _head(seg)
        if head == "if" or head == "elif":
            if head == "if":
                br = Branch(line)
                stack[-1].append(br)
                owners.append(br)
                br.arms.append([])
                stack.append(br.arms[-1])
            elif owners and isinstance(owners[-1], Branch):
                owners[-1].arms.append([])
                stack[-1] = owners[-1].arms[-1]
            cond = rest.strip()
            while cond.startswith("! "):
                cond = cond[2:].strip()
            if cond:
                stack[-1].append(Simple(cond, line))
            continue
        if head in ("fi", "done", "}", ")", "esac"):
            if owners and len(stack) > 1:
                owners.pop()
                stack.pop()
            tail = rest.strip()
            if tail and not tail.startswith((">", "<", "2>", "|")):
                stack[-1].append(Simple(tail, line))
            continue
        if head in ("for", "while", "until"):
            m = re.match(r"for\s+([A-Za-z_][A-Za-z0-9_]*)(?:\s+in\s+(.*))?$", seg, re.S)
            loop = Loop(m.group(1), (m.group(2) or "").strip(), line) if m else Loop("", "", line)
            if not m and head != "for":
                # while/until: the condition is a command; the body runs once for a reader
                cond = rest.strip()
                if cond:
                    loop.body.append(Simple(cond, line))
            stack[-1].append(loop)
            owners.append(loop)
            stack.append(loop.body)
            continue
        if head == "case":
            owners.append(Branch(line))
            stack.append([])
            continue
        stack[-1].append(Simple(seg, line))
    return root
